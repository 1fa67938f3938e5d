package ratelimit

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Limiter is one limiter as RL.ALL, RL.CHECK and RL.POLICY SET write it: an algorithm word,
// its positional arguments and its own options. The implementations are [GCRA], [TokenBucket],
// [LeakyBucket], [Fixed], [Sliding], [SlidingCounter] and [Concurrency].
type Limiter interface {
	// Command is the command of the limiter on one key (RL.GCRA); Word its algorithm word in
	// RL.ALL (GCRA).
	Command() string
	Word() string
	// Quota is the limit (q of the RateLimit-Policy header field).
	Quota() int64
	// WindowDuration is the time over which Quota applies (w of RateLimit-Policy): the window,
	// or the time a fully used limiter takes to be fresh again; 0 for a concurrency limiter and
	// a calendar window (a detailed reply carries the current one).
	WindowDuration() time.Duration
	// Params are the positional arguments after the key, with the limiter's own options.
	Params() ([]any, error)
	// Spec is the limiter as RL.ALL writes it: Word, Params, then CHARGE and NAME when set.
	Spec() ([]any, error)
	// ID names the limiter and every parameter (gcra-10-5-1s): the HTTP middleware derives
	// its key space from it.
	ID() string
}

// Units returns a pointer to n, for the Charge field of a limiter (CHARGE 0 is allowed, so an
// unset charge is nil).
func Units(n int64) *int64 { return &n }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// dimension is the per-limiter options of RL.ALL / RL.CHECK / RL.POLICY SET.
func dimension(charge *int64, name string) ([]any, error) {
	var out []any
	if charge != nil {
		if *charge < 0 {
			return nil, fmt.Errorf("ratelimit: charge must be >= 0, not %d", *charge)
		}
		out = append(out, "CHARGE", *charge)
	}
	if name != "" {
		if !nameRE.MatchString(name) {
			return nil, fmt.Errorf("ratelimit: a limiter name is 1-64 of letters, digits, _ - . :, not %q", name)
		}
		out = append(out, "NAME", name)
	}
	return out, nil
}

func positive(v int64, what string) error {
	if v < 1 {
		return fmt.Errorf("ratelimit: %s must be an integer >= 1, not %d", what, v)
	}
	return nil
}

// DurationArg is the command argument for d: a positive whole number of milliseconds
// ("1500ms"). Sub-millisecond parts are refused rather than rounded.
func DurationArg(d time.Duration) (string, error) {
	if d <= 0 || d%time.Millisecond != 0 {
		return "", fmt.Errorf("ratelimit: a duration must be a positive whole number of ms, not %v", d)
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms", nil
}

// TimeArg is the AT argument for t: Unix milliseconds with the microseconds as a fraction.
func TimeArg(t time.Time) string {
	us := t.UnixMicro()
	ms, frac := us/1000, us%1000
	if frac < 0 {
		ms, frac = ms-1, frac+1000
	}
	if frac == 0 {
		return strconv.FormatInt(ms, 10)
	}
	return fmt.Sprintf("%d.%03d", ms, frac)
}

func durID(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// refill is ceil(amount*period/per), rounded up to whole ms.
func refill(amount int64, period time.Duration, per int64) time.Duration {
	if per <= 0 {
		return 0
	}
	ms := period.Milliseconds()
	return time.Duration((amount*ms+per-1)/per) * time.Millisecond
}

func spec(l Limiter, charge *int64, name string) ([]any, error) {
	p, err := l.Params()
	if err != nil {
		return nil, err
	}
	d, err := dimension(charge, name)
	if err != nil {
		return nil, err
	}
	return append(append([]any{l.Word()}, p...), d...), nil
}

// GCRA is RL.GCRA: Burst requests at once, Rate per Period sustained.
type GCRA struct {
	Burst, Rate int64
	Period      time.Duration
	// Charge asks this limiter for that many units instead of the call's cost (CHARGE); nil: the cost.
	Charge *int64
	// Name names the limiter in a detailed reply (NAME); "": its key.
	Name string
}

func (GCRA) Command() string { return "RL.GCRA" }
func (GCRA) Word() string    { return "GCRA" }
func (g GCRA) Quota() int64  { return g.Burst }
func (g GCRA) WindowDuration() time.Duration {
	return refill(g.Burst, g.Period, g.Rate)
}
func (g GCRA) ID() string { return fmt.Sprintf("gcra-%d-%d-%s", g.Burst, g.Rate, durID(g.Period)) }
func (g GCRA) Params() ([]any, error) {
	return rateParams(g.Burst, "burst", g.Rate, "rate", g.Period)
}
func (g GCRA) Spec() ([]any, error) { return spec(g, g.Charge, g.Name) }

func rateParams(a int64, an string, b int64, bn string, period time.Duration) ([]any, error) {
	if err := positive(a, an); err != nil {
		return nil, err
	}
	if err := positive(b, bn); err != nil {
		return nil, err
	}
	p, err := DurationArg(period)
	if err != nil {
		return nil, err
	}
	return []any{a, b, p}, nil
}

// TokenBucket is RL.TOKENBUCKET: Capacity tokens, Refill more per Period.
type TokenBucket struct {
	Capacity, Refill int64
	Period           time.Duration
	Charge           *int64
	Name             string
}

func (TokenBucket) Command() string { return "RL.TOKENBUCKET" }
func (TokenBucket) Word() string    { return "TOKENBUCKET" }
func (t TokenBucket) Quota() int64  { return t.Capacity }
func (t TokenBucket) WindowDuration() time.Duration {
	return refill(t.Capacity, t.Period, t.Refill)
}
func (t TokenBucket) ID() string {
	return fmt.Sprintf("tokenbucket-%d-%d-%s", t.Capacity, t.Refill, durID(t.Period))
}
func (t TokenBucket) Params() ([]any, error) {
	return rateParams(t.Capacity, "capacity", t.Refill, "refill", t.Period)
}
func (t TokenBucket) Spec() ([]any, error) { return spec(t, t.Charge, t.Name) }

// LeakyBucket is RL.LEAKYBUCKET: a queue of Capacity units draining Rate per Period. A granted
// request's RetryAfter is its queue delay.
type LeakyBucket struct {
	Capacity, Rate int64
	Period         time.Duration
	Charge         *int64
	Name           string
}

func (LeakyBucket) Command() string { return "RL.LEAKYBUCKET" }
func (LeakyBucket) Word() string    { return "LEAKYBUCKET" }
func (l LeakyBucket) Quota() int64  { return l.Capacity }
func (l LeakyBucket) WindowDuration() time.Duration {
	return refill(l.Capacity, l.Period, l.Rate)
}
func (l LeakyBucket) ID() string {
	return fmt.Sprintf("leakybucket-%d-%d-%s", l.Capacity, l.Rate, durID(l.Period))
}
func (l LeakyBucket) Params() ([]any, error) {
	return rateParams(l.Capacity, "capacity", l.Rate, "rate", l.Period)
}
func (l LeakyBucket) Spec() ([]any, error) { return spec(l, l.Charge, l.Name) }

// Calendar periods of RL.FIXED.
const (
	Day     = "day"
	Week    = "week"
	Month   = "month"
	Quarter = "quarter"
	Year    = "year"
)

// Fixed is RL.FIXED: at most Limit per epoch-aligned Window (shifted by Offset), or, when
// Calendar is set (Day, Week, Month, Quarter, Year), per calendar period in the time zone TZ
// (an IANA name or "+05:30"; UTC by default) starting at Anchor ("mon".."sun" for a week, the
// day of the month, "04-15" for a year or quarter); Offset is then the start's time of day.
type Fixed struct {
	Limit    int64
	Window   time.Duration
	Calendar string
	Offset   time.Duration
	TZ       string
	Anchor   string
	Charge   *int64
	Name     string
}

func (Fixed) Command() string { return "RL.FIXED" }
func (Fixed) Word() string    { return "FIXED" }
func (f Fixed) Quota() int64  { return f.Limit }
func (f Fixed) WindowDuration() time.Duration {
	if f.Calendar != "" {
		return 0
	}
	return f.Window
}
func (f Fixed) ID() string {
	w := f.Calendar
	if w == "" {
		w = durID(f.Window)
	}
	id := fmt.Sprintf("fixed-%d-%s", f.Limit, w)
	if f.Offset != 0 {
		id += "-o" + durID(f.Offset)
	}
	if f.TZ != "" {
		id += "-" + f.TZ
	}
	if f.Anchor != "" {
		id += "-a" + f.Anchor
	}
	return id
}
func (f Fixed) Params() ([]any, error) {
	if err := positive(f.Limit, "limit"); err != nil {
		return nil, err
	}
	out := []any{f.Limit}
	switch f.Calendar {
	case "":
		w, err := DurationArg(f.Window)
		if err != nil {
			return nil, err
		}
		if f.TZ != "" || f.Anchor != "" {
			return nil, fmt.Errorf("ratelimit: TZ and Anchor need a calendar window (day, week, month, quarter, year)")
		}
		out = append(out, w)
	case Day, Week, Month, Quarter, Year:
		if f.Window != 0 {
			return nil, fmt.Errorf("ratelimit: give Window or Calendar, not both")
		}
		out = append(out, f.Calendar)
	default:
		return nil, fmt.Errorf("ratelimit: calendar window %q is not day, week, month, quarter or year", f.Calendar)
	}
	if f.Offset < 0 {
		return nil, fmt.Errorf("ratelimit: offset must not be negative")
	}
	if f.Offset > 0 {
		o, err := DurationArg(f.Offset)
		if err != nil {
			return nil, err
		}
		out = append(out, "OFFSET", o)
	}
	if f.TZ != "" {
		out = append(out, "TZ", f.TZ)
	}
	if f.Anchor != "" {
		out = append(out, "ANCHOR", f.Anchor)
	}
	return out, nil
}
func (f Fixed) Spec() ([]any, error) { return spec(f, f.Charge, f.Name) }

// Sliding is RL.SLIDING: an exact sliding-window log of Limit per Window, Precision (when not
// 0) merging entries into buckets.
type Sliding struct {
	Limit     int64
	Window    time.Duration
	Precision time.Duration
	Charge    *int64
	Name      string
}

func (Sliding) Command() string                 { return "RL.SLIDING" }
func (Sliding) Word() string                    { return "SLIDING" }
func (s Sliding) Quota() int64                  { return s.Limit }
func (s Sliding) WindowDuration() time.Duration { return s.Window }
func (s Sliding) ID() string {
	id := fmt.Sprintf("sliding-%d-%s", s.Limit, durID(s.Window))
	if s.Precision != 0 {
		id += "-p" + durID(s.Precision)
	}
	return id
}
func (s Sliding) Params() ([]any, error) {
	if err := positive(s.Limit, "limit"); err != nil {
		return nil, err
	}
	w, err := DurationArg(s.Window)
	if err != nil {
		return nil, err
	}
	out := []any{s.Limit, w}
	if s.Precision != 0 {
		p, err := DurationArg(s.Precision)
		if err != nil {
			return nil, err
		}
		out = append(out, "PRECISION", p)
	}
	return out, nil
}
func (s Sliding) Spec() ([]any, error) { return spec(s, s.Charge, s.Name) }

// SlidingCounter is RL.SLIDINGCOUNTER: the weighted two-window estimate of Limit per Window.
type SlidingCounter struct {
	Limit  int64
	Window time.Duration
	Charge *int64
	Name   string
}

func (SlidingCounter) Command() string                 { return "RL.SLIDINGCOUNTER" }
func (SlidingCounter) Word() string                    { return "SLIDINGCOUNTER" }
func (s SlidingCounter) Quota() int64                  { return s.Limit }
func (s SlidingCounter) WindowDuration() time.Duration { return s.Window }
func (s SlidingCounter) ID() string {
	return fmt.Sprintf("slidingcounter-%d-%s", s.Limit, durID(s.Window))
}
func (s SlidingCounter) Params() ([]any, error) {
	if err := positive(s.Limit, "limit"); err != nil {
		return nil, err
	}
	w, err := DurationArg(s.Window)
	if err != nil {
		return nil, err
	}
	return []any{s.Limit, w}, nil
}
func (s SlidingCounter) Spec() ([]any, error) { return spec(s, s.Charge, s.Name) }

// Concurrency is a concurrency limiter (RL.ACQUIRE): at most Limit units in flight, leases of
// Lease. In RL.ALL the lease id is the call's Dedup id.
type Concurrency struct {
	Limit  int64
	Lease  time.Duration
	Charge *int64
	Name   string
}

func (Concurrency) Command() string               { return "RL.ACQUIRE" }
func (Concurrency) Word() string                  { return "CONCURRENCY" }
func (c Concurrency) Quota() int64                { return c.Limit }
func (Concurrency) WindowDuration() time.Duration { return 0 }
func (c Concurrency) ID() string {
	return fmt.Sprintf("concurrency-%d-%s", c.Limit, durID(c.Lease))
}
func (c Concurrency) Params() ([]any, error) {
	if err := positive(c.Limit, "limit"); err != nil {
		return nil, err
	}
	l, err := DurationArg(c.Lease)
	if err != nil {
		return nil, err
	}
	return []any{c.Limit, l}, nil
}
func (c Concurrency) Spec() ([]any, error) { return spec(c, c.Charge, c.Name) }
