package ratelimit

import (
	"fmt"
	"strconv"
	"time"
)

// Result is the limiter reply of every RL.* limiter command, from RESP2 and RESP3 alike.
type Result struct {
	// Allowed is true when the whole request was granted (Granted >= the cost asked).
	Allowed bool
	// Granted is the units granted by this call: the cost when allowed, 0 when denied, between
	// with BestEffort.
	Granted int64
	// Limit is the limiter's capacity; Remaining the units that could still be granted now.
	Limit, Remaining int64
	// RetryAfter is 0 when the whole request was granted, else the wait until the same request
	// would be (a granted leaky-bucket request: its queue delay). When Never it is negative.
	RetryAfter time.Duration
	// ResetAfter is the time until the limiter is back to its fresh state.
	ResetAfter time.Duration
	// Never is true when the request can never be granted (its cost is above the limit,
	// retry_after_ms -1): waiting does not help, and an HTTP answer carries no Retry-After.
	Never bool
	// RetryAfterMs and ResetAfterMs are the reply's own integers (retry_after_ms -1 when Never).
	RetryAfterMs, ResetAfterMs int64

	// DeniedBy, Reason and Limiters are filled by a detailed reply only (the Detail option).
	// Reason is "granted", "limit", "blocked", "never" or "shadow"; DeniedBy the name of the
	// limiter that denied the call ("" when granted).
	DeniedBy string
	Reason   string
	Limiters []LimiterDetail
}

// Detailed reports whether the reply was a detailed one (Reason and Limiters are set).
func (r *Result) Detailed() bool { return r.Reason != "" }

// RetryAfterHeader is the value of an HTTP Retry-After for r in whole seconds, rounded up and
// at least 1, and false when there must be none (allowed, or never).
func (r *Result) RetryAfterHeader() (int64, bool) {
	if r.Allowed || r.Never {
		return 0, false
	}
	return max(1, ceilSeconds(r.RetryAfterMs)), true
}

func ceilSeconds(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return (ms + 999) / 1000
}

// LimiterDetail is one limiter of a detailed reply: its Name (NAME, else its key), the units
// asked of it (Cost), its own limiter reply, the time over which Limit applies (Window; 0 for
// a concurrency limiter) and the policy it came from, if any.
type LimiterDetail struct {
	Name, Key                  string
	Cost, Granted              int64
	Limit, Remaining           int64
	RetryAfterMs, ResetAfterMs int64
	WindowMs                   int64
	Policy                     string
}

// Never reports retry_after_ms -1: this limiter can never grant the units asked of it.
func (d LimiterDetail) Never() bool { return d.RetryAfterMs == -1 }

// RetryAfter and ResetAfter as durations (RetryAfter negative when Never).
func (d LimiterDetail) RetryAfter() time.Duration { return ms(d.RetryAfterMs) }
func (d LimiterDetail) ResetAfter() time.Duration { return ms(d.ResetAfterMs) }
func (d LimiterDetail) Window() time.Duration     { return ms(d.WindowMs) }

func ms(v int64) time.Duration {
	if v < 0 {
		return -1
	}
	return time.Duration(v) * time.Millisecond
}

// ThrottleResult is the reply of CL.THROTTLE (redis-cell's shape: seconds, RetryAfterS -1 when
// allowed, Limit = max_burst + 1).
type ThrottleResult struct {
	Limited                                    bool
	Limit, Remaining, RetryAfterS, ResetAfterS int64
}

// Allowed is the opposite of Limited.
func (t *ThrottleResult) Allowed() bool { return !t.Limited }

// StreamCount is the reply of RL.STREAMCOUNT: the window's total after the call; Allowed false
// (and Total -1) when denied.
type StreamCount struct {
	Allowed bool
	Total   int64
}

// Info is the reply of RL.INFO: Algorithm ("none" for a key holding only a block) and every
// field by name (parameters, the limiter reply at this moment, blocked_ms, ttl_ms, ...): an
// int64 or a string.
type Info struct {
	Algorithm string
	Fields    map[string]any
}

// Int returns the integer field name, and false when there is none.
func (i *Info) Int(name string) (int64, bool) {
	v, ok := i.Fields[name].(int64)
	return v, ok
}

// Result is the limiter reply at this moment (as PEEK COST 0), nil for a key holding only a
// block.
func (i *Info) Result() *Result {
	var v [4]int64
	for n, f := range []string{"limit", "remaining", "retry_after_ms", "reset_after_ms"} {
		x, ok := i.Int(f)
		if !ok {
			return nil
		}
		v[n] = x
	}
	return &Result{Allowed: true, Limit: v[0], Remaining: v[1], RetryAfterMs: v[2], ResetAfterMs: v[3],
		RetryAfter: ms(v[2]), ResetAfter: ms(v[3]), Never: v[2] == -1}
}

// PolicyDefinition is a named policy as RL.POLICY GET replies it: Args are the arguments of
// the RL.POLICY SET that made it (after the name), Shadow and Desc read from them.
type PolicyDefinition struct {
	Name   string
	Args   []string
	Shadow bool
	Desc   string
}

var resultFields = [5]string{"granted", "limit", "remaining", "retry_after_ms", "reset_after_ms"}
var detailFields = [10]string{"name", "key", "cost", "granted", "limit", "remaining",
	"retry_after_ms", "reset_after_ms", "window_ms", "policy"}

func text(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case []byte:
		return string(t), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("ratelimit: expected a string in the reply, got %T", v)
}

func integer(v any) (int64, error) {
	switch t := v.(type) {
	case int64:
		return t, nil
	case string:
		return strconv.ParseInt(t, 10, 64)
	}
	return 0, fmt.Errorf("ratelimit: expected an integer in the reply, got %T (%v)", v, v)
}

// named turns a RESP3 map into field -> value.
func named(m map[any]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		s, err := text(k)
		if err != nil {
			return nil, err
		}
		out[s] = v
	}
	return out, nil
}

func parseDetail(entry any) (LimiterDetail, error) {
	var vals [10]any
	switch e := entry.(type) {
	case map[any]any:
		m, err := named(e)
		if err != nil {
			return LimiterDetail{}, err
		}
		for i, f := range detailFields {
			vals[i] = m[f]
		}
	case []any:
		copy(vals[:], e)
	default:
		return LimiterDetail{}, fmt.Errorf("ratelimit: not a limiter of a detailed reply: %T", entry)
	}
	var d LimiterDetail
	var err error
	strs := []*string{&d.Name, &d.Key}
	for i, p := range strs {
		if *p, err = text(vals[i]); err != nil {
			return d, err
		}
	}
	ints := []*int64{&d.Cost, &d.Granted, &d.Limit, &d.Remaining, &d.RetryAfterMs, &d.ResetAfterMs, &d.WindowMs}
	for i, p := range ints {
		if *p, err = integer(vals[2+i]); err != nil {
			return d, err
		}
	}
	d.Policy, err = text(vals[9])
	return d, err
}

// ParseResult reads a limiter reply: a RESP2 array of five integers (eight with DETAIL) or a
// RESP3 map. cost is the cost asked for (Allowed is Granted >= cost); a negative cost means
// unknown, and then Allowed is retry_after_ms == 0.
func ParseResult(reply any, cost int64) (*Result, error) {
	var vals [5]int64
	var r Result
	var limiters []any
	switch t := reply.(type) {
	case map[any]any:
		m, err := named(t)
		if err != nil {
			return nil, err
		}
		for i, f := range resultFields {
			if vals[i], err = integer(m[f]); err != nil {
				return nil, fmt.Errorf("ratelimit: field %s: %w", f, err)
			}
		}
		if reason, ok := m["reason"]; ok {
			if r.Reason, err = text(reason); err != nil {
				return nil, err
			}
			if r.DeniedBy, err = text(m["denied_by"]); err != nil {
				return nil, err
			}
			limiters, _ = m["limiters"].([]any)
		}
	case []any:
		if len(t) != 5 && len(t) != 8 {
			return nil, fmt.Errorf("ratelimit: not a limiter reply: %d elements", len(t))
		}
		var err error
		for i := range vals {
			if vals[i], err = integer(t[i]); err != nil {
				return nil, err
			}
		}
		if len(t) == 8 {
			if r.DeniedBy, err = text(t[5]); err != nil {
				return nil, err
			}
			if r.Reason, err = text(t[6]); err != nil {
				return nil, err
			}
			limiters, _ = t[7].([]any)
		}
	default:
		return nil, fmt.Errorf("ratelimit: not a limiter reply: %T", reply)
	}
	for _, e := range limiters {
		d, err := parseDetail(e)
		if err != nil {
			return nil, err
		}
		r.Limiters = append(r.Limiters, d)
	}
	r.Granted, r.Limit, r.Remaining, r.RetryAfterMs, r.ResetAfterMs = vals[0], vals[1], vals[2], vals[3], vals[4]
	r.Never = r.RetryAfterMs == -1
	r.RetryAfter, r.ResetAfter = ms(r.RetryAfterMs), ms(r.ResetAfterMs)
	if cost >= 0 {
		r.Allowed = r.Granted >= cost
	} else {
		r.Allowed = r.RetryAfterMs == 0
	}
	return &r, nil
}

// pairs reads a RESP2 flat array of name, value pairs or a RESP3 map.
func pairs(reply any) ([][2]any, error) {
	switch t := reply.(type) {
	case map[any]any:
		out := make([][2]any, 0, len(t))
		for k, v := range t {
			out = append(out, [2]any{k, v})
		}
		return out, nil
	case []any:
		if len(t)%2 != 0 {
			return nil, fmt.Errorf("ratelimit: odd number of elements in a reply of pairs")
		}
		out := make([][2]any, 0, len(t)/2)
		for i := 0; i < len(t); i += 2 {
			out = append(out, [2]any{t[i], t[i+1]})
		}
		return out, nil
	}
	return nil, fmt.Errorf("ratelimit: not a map reply: %T", reply)
}

func parseInfo(reply any) (*Info, error) {
	ps, err := pairs(reply)
	if err != nil {
		return nil, err
	}
	info := &Info{Fields: make(map[string]any, len(ps))}
	for _, p := range ps {
		k, err := text(p[0])
		if err != nil {
			return nil, err
		}
		switch v := p[1].(type) {
		case int64:
			info.Fields[k] = v
		default:
			s, err := text(v)
			if err != nil {
				return nil, err
			}
			info.Fields[k] = s
		}
	}
	info.Algorithm, _ = info.Fields["algorithm"].(string)
	return info, nil
}

// The limiters of a policy's definition: the algorithm word and its positional arguments, then
// options of one value each.
var arity = map[string]int{"GCRA": 3, "TOKENBUCKET": 3, "LEAKYBUCKET": 3, "FIXED": 2, "SLIDING": 2,
	"SLIDINGCOUNTER": 2, "CONCURRENCY": 2}
var limiterOptions = map[string]bool{"CHARGE": true, "NAME": true, "OFFSET": true, "TZ": true,
	"ANCHOR": true, "PRECISION": true}

func parsePolicy(name string, reply any) (*PolicyDefinition, error) {
	list, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("ratelimit: not an RL.POLICY GET reply: %T", reply)
	}
	def := &PolicyDefinition{Name: name}
	for _, a := range list {
		s, err := text(a)
		if err != nil {
			return nil, err
		}
		def.Args = append(def.Args, s)
	}
	args := def.Args
	for i := 0; i < len(args); {
		word := upper(args[i])
		switch {
		case word == "SHADOW":
			def.Shadow = true
			i++
		case word == "DESC" && i+1 < len(args):
			def.Desc = args[i+1]
			i += 2
		case arity[word] > 0:
			i += 1 + arity[word]
			for i+1 < len(args) && limiterOptions[upper(args[i])] {
				i += 2
			}
		default:
			return def, nil
		}
	}
	return def, nil
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
