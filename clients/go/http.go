package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FailMode is what the middleware does when Redis cannot answer within the timeout.
type FailMode int

const (
	// FailClosed answers ErrorStatus (503): the default, an outage never lifts the limits.
	FailClosed FailMode = iota
	// FailOpen lets requests through while the limiter is down.
	FailOpen
)

// Header styles of the middleware.
const (
	HeadersDraft11 = "draft-11" // RateLimit-Policy and RateLimit, one item per limit (default)
	HeadersDraft7  = "draft-7"  // RateLimit-Limit, -Remaining, -Reset and RateLimit-Policy
	HeadersLegacy  = "legacy"   // X-RateLimit-Limit, -Remaining, -Reset
	HeadersNone    = "none"
)

// Reserve is the reservation flow: the units are held (HOLD) before the handler and settled
// (RL.SETTLE) after it with the real usage.
type Reserve struct {
	// Hold is how long the reservation lives unsettled (given back after it); 30s when 0.
	Hold time.Duration
	// Usage gives the units really used per limit name, from the request and the handler's
	// status; a limit left out settles what it held.
	Usage func(r *http.Request, status int) map[string]int64
}

// HTTPOptions configure the net/http middleware (the names and defaults the project's Python
// and Node packages use).
type HTTPOptions struct {
	// Limits: limit name -> limiter (ParseLimit("100/minute") makes one from a string). Several
	// are applied together with RL.ALL, all or nothing.
	Limits map[string]Limiter
	// Name makes this integration's keys distinct; derived from the limits' parameters when
	// empty. Two middlewares resolving to the same keys are refused unless both give this same
	// Name (sharing on purpose).
	Name string
	// Prefix starts every key ("rl:").
	Prefix string
	// Key is the client key of a request (default: ClientAddress with TrustProxy and
	// IPv6Subnet). An error answers 500: it is an error of the application.
	Key func(*http.Request) (string, error)
	// Cost is the units of a request for every limit (default 1); Costs per limit name.
	Cost  func(*http.Request) (int64, error)
	Costs map[string]func(*http.Request) (int64, error)
	// Fail is FailClosed (503, default) or FailOpen when Redis cannot answer within Timeout.
	Fail FailMode
	// OnError is called with every limiter failure.
	OnError func(error, *http.Request)
	// Timeout bounds one limiter call (500ms). Give the go-redis client ContextTimeoutEnabled
	// (its sockets then honour it too) and MaxRetries -1 (a lost reply is not sent again).
	Timeout time.Duration
	// Headers is the header style: HeadersDraft11 (default), HeadersDraft7, HeadersLegacy,
	// HeadersNone. PartitionKey adds draft-11's pk (a hash of the client key).
	Headers      string
	PartitionKey bool
	// Skip lets a request through unlimited; Allowlist lists client keys never limited.
	Skip      func(*http.Request) bool
	Allowlist []string
	// Status answers a retryable denial (429), NeverStatus one that can never pass (413),
	// ErrorStatus a limiter that is down under FailClosed (503).
	Status, NeverStatus, ErrorStatus int
	// OnDenied writes a custom denied answer (the headers are already set); default: an
	// RFC 9457 application/problem+json body.
	OnDenied func(http.ResponseWriter, *http.Request, *Result)
	// Block blocks the client's keys for this long when a request is denied (RL.BLOCK).
	Block time.Duration
	// Reserve holds units before the handler and settles them after it.
	Reserve *Reserve
	// Shadow evaluates and charges every request but never denies (SHADOW), to roll a limit out.
	Shadow bool
	// Logger logs the first failure (and the first after a recovery); slog.Default() if nil.
	Logger *slog.Logger
	// TrustProxy is the number of proxy hops whose X-Forwarded-For is trusted (0: none, the
	// default). IPv6Subnet is the prefix length IPv6 clients are keyed by (56).
	TrustProxy int
	IPv6Subnet int
}

type limitEntry struct {
	name    string
	limiter Limiter
}

// Middleware is the net/http rate-limit middleware (NewMiddleware).
type Middleware struct {
	c       *Client
	o       HTTPOptions
	entries []limitEntry
	space   string
	allow   map[string]bool
	loaded  atomic.Bool
	failing atomic.Bool
}

var (
	registryMu sync.Mutex
	registry   = map[string]string{} // key space -> explicit name ("" when derived)
)

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' || c == '{' || c == '}' {
			return false
		}
	}
	return true
}

// NewMiddleware checks the options and returns the middleware. It refuses a key space (prefix
// and name) that another middleware of this process already uses, unless both gave the same
// explicit Name.
func NewMiddleware(c *Client, o HTTPOptions) (*Middleware, error) {
	if len(o.Limits) == 0 {
		return nil, errors.New("ratelimit: HTTPOptions.Limits needs at least one limit")
	}
	m := &Middleware{c: c, o: o, allow: map[string]bool{}}
	for name, l := range o.Limits {
		if !validName(name) {
			return nil, fmt.Errorf("ratelimit: limit name %q must be printable ASCII without spaces, quotes or braces", name)
		}
		if l == nil {
			return nil, fmt.Errorf("ratelimit: limit %q has no limiter", name)
		}
		if _, ok := l.(Concurrency); ok {
			return nil, fmt.Errorf("ratelimit: limit %q: a concurrency limiter is not an HTTP rate limit", name)
		}
		if _, err := l.Params(); err != nil {
			return nil, fmt.Errorf("ratelimit: limit %q: %w", name, err)
		}
		m.entries = append(m.entries, limitEntry{name, l})
	}
	sort.Slice(m.entries, func(i, j int) bool { return m.entries[i].name < m.entries[j].name })
	for name := range o.Costs {
		if o.Limits[name] == nil {
			return nil, fmt.Errorf("ratelimit: Costs names %q, which is not a limit", name)
		}
	}
	if m.o.Prefix == "" {
		m.o.Prefix = "rl:"
	}
	if m.o.Timeout == 0 {
		m.o.Timeout = 500 * time.Millisecond
	}
	if m.o.Timeout < 0 {
		return nil, errors.New("ratelimit: Timeout must be positive")
	}
	switch m.o.Headers {
	case "":
		m.o.Headers = HeadersDraft11
	case HeadersDraft11, HeadersDraft7, HeadersLegacy, HeadersNone:
	default:
		return nil, fmt.Errorf("ratelimit: Headers %q is not draft-11, draft-7, legacy or none", m.o.Headers)
	}
	if m.o.Fail != FailClosed && m.o.Fail != FailOpen {
		return nil, errors.New("ratelimit: Fail must be FailClosed or FailOpen")
	}
	for _, p := range []*int{&m.o.Status, &m.o.NeverStatus, &m.o.ErrorStatus} {
		if *p != 0 && (*p < 100 || *p > 599) {
			return nil, fmt.Errorf("ratelimit: status %d is not an HTTP status", *p)
		}
	}
	if m.o.Status == 0 {
		m.o.Status = http.StatusTooManyRequests
	}
	if m.o.NeverStatus == 0 {
		m.o.NeverStatus = http.StatusRequestEntityTooLarge
	}
	if m.o.ErrorStatus == 0 {
		m.o.ErrorStatus = http.StatusServiceUnavailable
	}
	if m.o.IPv6Subnet == 0 {
		m.o.IPv6Subnet = 56
	}
	if m.o.Reserve != nil {
		r := *m.o.Reserve
		if r.Hold == 0 {
			r.Hold = 30 * time.Second
		}
		if _, err := DurationArg(r.Hold); err != nil {
			return nil, fmt.Errorf("ratelimit: Reserve.Hold: %w", err)
		}
		m.o.Reserve = &r
	}
	if m.o.Logger == nil {
		m.o.Logger = slog.Default()
	}
	if c.choice == BackendLua {
		if err := m.scriptCan(); err != nil {
			return nil, err
		}
	}
	for _, a := range o.Allowlist {
		m.allow[a] = true
	}
	name := o.Name
	if name == "" {
		ids := make([]string, len(m.entries))
		for i, e := range m.entries {
			ids[i] = e.limiter.ID()
			if len(m.entries) > 1 {
				ids[i] = e.name + "." + ids[i]
			}
		}
		name = strings.Join(ids, "+")
	} else if !validName(name) {
		return nil, fmt.Errorf("ratelimit: Name %q must be printable ASCII without spaces, quotes or braces", name)
	}
	m.space = m.o.Prefix + name
	registryMu.Lock()
	defer registryMu.Unlock()
	if prev, ok := registry[m.space]; ok && !(prev != "" && prev == o.Name) {
		return nil, fmt.Errorf("ratelimit: another middleware already uses the keys %q: give each a distinct Name, "+
			"or both the same explicit Name to share the limits on purpose", m.space+":*")
	}
	registry[m.space] = o.Name
	return m, nil
}

// Close releases the middleware's key space, so that another may use it.
func (m *Middleware) Close() {
	registryMu.Lock()
	delete(registry, m.space)
	registryMu.Unlock()
}

// Keys are the keys of a client, in the order of the limits (sorted by name).
func (m *Middleware) Keys(client string) []string {
	if len(m.entries) == 1 {
		return []string{m.space + ":" + client}
	}
	out := make([]string, len(m.entries))
	for i, e := range m.entries {
		out[i] = m.space + ":{" + client + "}:" + e.name
	}
	return out
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Handler wraps next with the limits.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.o.Skip != nil && m.o.Skip(r) {
			next.ServeHTTP(w, r)
			return
		}
		client, err := m.clientKey(r)
		if err != nil {
			http.Error(w, "internal error: rate-limit key: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if m.allow[client] {
			next.ServeHTTP(w, r)
			return
		}
		costs, err := m.costs(r)
		if err != nil {
			http.Error(w, "internal error: rate-limit cost: "+err.Error(), http.StatusInternalServerError)
			return
		}
		keys := m.Keys(client)
		var id string
		if m.o.Reserve != nil {
			if id, err = randomID(); err != nil {
				http.Error(w, "internal error", http.StatusInternalServerError)
				return
			}
		}
		res, err := m.call(r.Context(), keys, costs, id)
		if err != nil {
			m.failed(err, r)
			if m.o.Fail == FailOpen {
				next.ServeHTTP(w, r)
				return
			}
			writeProblem(w, m.o.ErrorStatus, "Service Unavailable", "the rate limiter is unavailable", -1)
			return
		}
		m.recovered()
		m.setHeaders(r.Context(), w.Header(), res, keys, client)
		if !res.Allowed {
			status := m.o.Status
			if res.Never {
				status = m.o.NeverStatus
			}
			if m.o.OnDenied != nil {
				m.o.OnDenied(w, r, res)
				return
			}
			retry := int64(-1)
			if v := w.Header().Get("Retry-After"); v != "" {
				retry, _ = strconv.ParseInt(v, 10, 64)
			}
			detail := "rate limit exceeded"
			if res.Never {
				detail = "the request's cost is above the limit: it can never pass"
			}
			writeProblem(w, status, http.StatusText(status), detail, retry)
			return
		}
		if m.o.Reserve == nil {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		m.settle(r, keys, costs, id, sw.status)
	})
}

func (m *Middleware) clientKey(r *http.Request) (string, error) {
	if m.o.Key != nil {
		k, err := m.o.Key(r)
		if err == nil && k == "" {
			err = errors.New("the Key function returned an empty key")
		}
		return k, err
	}
	return ClientAddress(r, m.o.TrustProxy, m.o.IPv6Subnet), nil
}

func (m *Middleware) costs(r *http.Request) ([]int64, error) {
	base := int64(1)
	if m.o.Cost != nil {
		c, err := m.o.Cost(r)
		if err != nil {
			return nil, err
		}
		base = c
	}
	out := make([]int64, len(m.entries))
	for i, e := range m.entries {
		out[i] = base
		if f := m.o.Costs[e.name]; f != nil {
			c, err := f(r)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		if out[i] < 0 {
			return nil, fmt.Errorf("cost of limit %q is negative (%d)", e.name, out[i])
		}
	}
	return out, nil
}

// call asks the limiter, bounded by Timeout whatever the go-redis client's own timeouts (set
// ContextTimeoutEnabled on it so that the socket honours the bound too).
func (m *Middleware) call(parent context.Context, keys []string, costs []int64, id string) (*Result, error) {
	ctx, cancel := context.WithTimeout(parent, m.o.Timeout)
	defer cancel()
	type answer struct {
		r   *Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := m.ask(ctx, keys, costs, id)
		done <- answer{r, err}
	}()
	select {
	case a := <-done:
		return a.r, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("ratelimit: no answer within %v: %w", m.o.Timeout, ctx.Err())
	}
}

func (m *Middleware) ask(ctx context.Context, keys []string, costs []int64, id string) (*Result, error) {
	if !m.loaded.Load() {
		if err := m.c.CheckModule(ctx); err != nil {
			return nil, err
		}
		m.loaded.Store(true)
	}
	opts := []Option{Detail()}
	if m.o.Shadow {
		opts = append(opts, Shadow())
	}
	if m.o.Block > 0 {
		opts = append(opts, Block(m.o.Block))
	}
	if id != "" {
		opts = append(opts, Dedup(id), Hold(m.o.Reserve.Hold))
	}
	if len(m.entries) == 1 {
		return m.c.Apply(ctx, keys[0], m.entries[0].limiter, append(opts, Cost(costs[0]))...)
	}
	specs := make([]Spec, len(m.entries))
	for i, e := range m.entries {
		specs[i] = Spec{Key: keys[i], Limiter: withCharge(e.limiter, costs[i])}
	}
	// The call's COST is the largest charge (the merged Granted); each limiter has its own.
	var maxCost int64
	for _, c := range costs {
		maxCost = max(maxCost, c)
	}
	return m.c.All(ctx, specs, append(opts, Cost(maxCost))...)
}

// scriptCan refuses, under BackendLua, the options and limits the script backend cannot do.
func (m *Middleware) scriptCan() error {
	var what []string
	if m.o.Reserve != nil {
		what = append(what, "Reserve (HOLD, RL.SETTLE)")
	}
	if m.o.Block > 0 {
		what = append(what, "Block (RL.BLOCK)")
	}
	if m.o.Shadow {
		what = append(what, "Shadow")
	}
	for _, e := range m.entries {
		switch l := e.limiter.(type) {
		case GCRA, TokenBucket, SlidingCounter:
		case Fixed:
			if l.Calendar != "" {
				what = append(what, fmt.Sprintf("the limit %q (a calendar window)", e.name))
			}
		default:
			what = append(what, fmt.Sprintf("the limit %q (%s)", e.name, e.limiter.Command()))
		}
	}
	if len(what) > 0 {
		return &Error{kind: ErrModuleRequired, Err: fmt.Errorf("%w: %s", ErrModuleRequired, strings.Join(what, ", "))}
	}
	return nil
}

func withCharge(l Limiter, n int64) Limiter {
	c := Units(n)
	switch v := l.(type) {
	case GCRA:
		v.Charge = c
		return v
	case TokenBucket:
		v.Charge = c
		return v
	case LeakyBucket:
		v.Charge = c
		return v
	case Fixed:
		v.Charge = c
		return v
	case Sliding:
		v.Charge = c
		return v
	case SlidingCounter:
		v.Charge = c
		return v
	}
	return l
}

func (m *Middleware) settle(r *http.Request, keys []string, costs []int64, id string, status int) {
	if status == 0 {
		status = http.StatusOK
	}
	var usage map[string]int64
	if m.o.Reserve.Usage != nil {
		usage = m.o.Reserve.Usage(r, status)
	}
	units := make([]int64, len(keys))
	for i, e := range m.entries {
		units[i] = costs[i]
		if u, ok := usage[e.name]; ok && u >= 0 {
			units[i] = u
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.o.Timeout)
	defer cancel()
	if _, err := m.c.Settle(ctx, keys, id, units); err != nil {
		// Unsettled, the reservation is given back when Hold ends.
		m.failed(err, r)
	}
}

func (m *Middleware) failed(err error, r *http.Request) {
	if m.o.OnError != nil {
		m.o.OnError(err, r)
	}
	if m.failing.CompareAndSwap(false, true) {
		mode := "closed"
		if m.o.Fail == FailOpen {
			mode = "open"
		}
		m.o.Logger.Warn("redis_ratelimit: the rate limiter failed; failing "+mode, "keys", m.space, "error", err)
	}
}

func (m *Middleware) recovered() {
	if m.failing.CompareAndSwap(true, false) {
		m.o.Logger.Info("redis_ratelimit: the rate limiter answers again", "keys", m.space)
	}
}

// effectiveWindows are the t of draft-11 per limit (-1: unknown, t left out): whole seconds,
// rounded up, until the limit has one unit more than it has left ("until additional quota is
// made available"); 0 when it has used nothing. Rate limiters (GCRA, token and leaky buckets)
// give it from the reply (the backlog drains one unit every window/quota), a fixed window at its
// end, a sliding window from a read-only RL.CHECK of remaining + 1 units.
func (m *Middleware) effectiveWindows(ctx context.Context, res *Result, keys []string) []int64 {
	out := make([]int64, len(m.entries))
	for i, e := range m.entries {
		d := res.Limiters[i]
		switch {
		case d.Remaining >= d.Limit:
			out[i] = 0
		case isRate(e.limiter):
			next := max(d.Remaining, 0) + 1
			spare := (d.Limit - next) * d.WindowMs / d.Limit
			out[i] = ceilSeconds(d.ResetAfterMs - spare)
		case isFixed(e.limiter):
			out[i] = ceilSeconds(d.ResetAfterMs)
		default:
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.o.Timeout)
			r, err := m.c.Check(cctx, keys[i], e.limiter, Cost(max(d.Remaining, 0)+1))
			cancel()
			if err != nil || r.Never {
				out[i] = -1
			} else {
				out[i] = ceilSeconds(r.RetryAfterMs)
			}
		}
	}
	return out
}

func isRate(l Limiter) bool {
	switch l.(type) {
	case GCRA, TokenBucket, LeakyBucket:
		return true
	}
	return false
}

func isFixed(l Limiter) bool {
	_, ok := l.(Fixed)
	return ok
}

func sfString(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

// mostRestrictive is the limit the draft-7 and legacy fields describe: the one that denied,
// else the one with the fewest remaining (then the longest t, then the longest reset).
func mostRestrictive(res *Result, ts []int64) int {
	best := 0
	for i, d := range res.Limiters {
		if res.DeniedBy != "" && d.Name == res.DeniedBy {
			return i
		}
		b := res.Limiters[best]
		if d.Remaining < b.Remaining || (d.Remaining == b.Remaining && (ts[i] > ts[best] ||
			(ts[i] == ts[best] && d.ResetAfterMs > b.ResetAfterMs))) {
			best = i
		}
	}
	return best
}

func (m *Middleware) setHeaders(ctx context.Context, h http.Header, res *Result, keys []string, client string) {
	retry, retryable := res.RetryAfterHeader()
	if len(res.Limiters) == len(m.entries) && m.o.Headers != HeadersNone {
		ts := m.effectiveWindows(ctx, res, keys)
		if retryable {
			// Never before a limit that denied the call has more quota.
			for i, d := range res.Limiters {
				if d.RetryAfterMs != 0 {
					retry = max(retry, ts[i])
				}
			}
		}
		pk := ""
		if m.o.PartitionKey {
			sum := sha256.Sum256([]byte(client))
			pk = ";pk=:" + base64.StdEncoding.EncodeToString(sum[:12]) + ":"
		}
		var policy, limit, p7 []string
		for i, e := range m.entries {
			d := res.Limiters[i]
			w := ceilSeconds(d.WindowMs)
			item := fmt.Sprintf("%s;q=%d", sfString(e.name), d.Limit)
			q7 := strconv.FormatInt(d.Limit, 10)
			if w > 0 {
				item += fmt.Sprintf(";w=%d", w)
				q7 += fmt.Sprintf(";w=%d", w)
			}
			policy = append(policy, item+pk)
			p7 = append(p7, q7)
			li := fmt.Sprintf("%s;r=%d", sfString(e.name), max(d.Remaining, 0))
			if ts[i] >= 0 {
				li += fmt.Sprintf(";t=%d", ts[i])
			}
			limit = append(limit, li+pk)
		}
		d := res.Limiters[mostRestrictive(res, ts)]
		reset := ceilSeconds(d.ResetAfterMs)
		switch m.o.Headers {
		case HeadersDraft11:
			h.Set("RateLimit-Policy", strings.Join(policy, ", "))
			h.Set("RateLimit", strings.Join(limit, ", "))
		case HeadersDraft7:
			h.Set("RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
			h.Set("RateLimit-Remaining", strconv.FormatInt(max(d.Remaining, 0), 10))
			h.Set("RateLimit-Reset", strconv.FormatInt(reset, 10))
			h.Set("RateLimit-Policy", strings.Join(p7, ", "))
		case HeadersLegacy:
			// As GitHub and most APIs send it: the Unix time (s) of the reset.
			now := (time.Now().UnixMilli() + 999) / 1000
			h.Set("X-RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
			h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(d.Remaining, 0), 10))
			h.Set("X-RateLimit-Reset", strconv.FormatInt(now+reset, 10))
		}
	}
	if retryable {
		h.Set("Retry-After", strconv.FormatInt(retry, 10))
	}
}

func writeProblem(w http.ResponseWriter, status int, title, detail string, retry int64) {
	body := map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail}
	if retry >= 0 {
		body["retry_after"] = retry
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// ClientAddress is the client's address as a key: the peer address, or with trustProxy > 0 the
// address that many hops back in X-Forwarded-For (never trusted by default). An IPv6 address
// is keyed by its /ipv6Subnet prefix (56 by default, as one customer's network).
func ClientAddress(r *http.Request, trustProxy, ipv6Subnet int) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if trustProxy > 0 {
		var hops []string
		for _, v := range r.Header.Values("X-Forwarded-For") {
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					hops = append(hops, p)
				}
			}
		}
		// The peer is the nearest proxy; each trusted hop vouches for the one before it.
		if i := len(hops) - trustProxy; len(hops) > 0 {
			host = hops[max(i, 0)]
		}
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	if ipv6Subnet <= 0 || ipv6Subnet > 128 {
		ipv6Subnet = 56
	}
	return ip.Mask(net.CIDRMask(ipv6Subnet, 128)).String() + "/" + strconv.Itoa(ipv6Subnet)
}
