// Package ratelimit is the Go client of redis-ratelimit, the Redis module of native
// rate-limiting commands (RL.GCRA, RL.TOKENBUCKET, RL.LEAKYBUCKET, RL.FIXED, RL.SLIDING,
// RL.SLIDINGCOUNTER, RL.STREAMCOUNT, RL.ALL, RL.CHECK, RL.ACQUIRE, RL.SETTLE, RL.POLICY,
// RL.LIMIT, CL.THROTTLE), with typed results, on go-redis v9: a [redis.UniversalClient]
// (standalone, Sentinel or Cluster), RESP2 or RESP3.
//
// It also has a net/http middleware ([NewMiddleware]); the package redisrate is a drop-in for
// github.com/go-redis/redis_rate/v10 backed by RL.GCRA.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client runs the module's commands on a go-redis client, or their script form (see Backend).
type Client struct {
	rdb redis.UniversalClient
	backendState
}

// New returns a Client on rdb: a *redis.Client, *redis.ClusterClient, *redis.Ring or a failover
// client, with either protocol (Protocol 2 or 3). The backend is BackendAuto unless
// WithBackend says otherwise: the module when the server has it, else the script backend
// (RL.GCRA, RL.TOKENBUCKET, RL.FIXED epoch windows, RL.SLIDINGCOUNTER, RL.ALL, RL.CHECK,
// RL.CHECKALL with Cost, Peek, BestEffort, Detail; anything else is an error wrapping
// ErrModuleRequired).
func New(rdb redis.UniversalClient, opts ...ClientOption) *Client {
	c := &Client{rdb: rdb}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Redis returns the go-redis client under c.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Option is one of the shared options of the limiter commands.
type Option func(*options)

type options struct {
	cost       int64
	peek       bool
	bestEffort bool
	dedup      *string
	block      time.Duration
	at         *time.Time
	detail     bool
	delay      time.Duration
	hold       time.Duration
	shadow     bool
	wait       time.Duration
}

// Cost is the units this request consumes (COST n, n >= 0, default 1; 0 reports the state).
func Cost(n int64) Option { return func(o *options) { o.cost = n } }

// Peek computes the reply as if the request were made and changes nothing (PEEK).
func Peek() Option { return func(o *options) { o.peek = true } }

// BestEffort grants as many units as are available (maybe 0) instead of denying (BESTEFFORT).
func BestEffort() Option { return func(o *options) { o.bestEffort = true } }

// Dedup is an idempotency token: a retried request with the same id is not charged twice
// (DEDUP id). A Hold reservation and a concurrency limiter in RL.ALL are named by it.
func Dedup(id string) Option { return func(o *options) { o.dedup = &id } }

// Block blocks the key(s) that denied the call for d (BLOCK d: a penalty box).
func Block(d time.Duration) Option { return func(o *options) { o.block = d } }

// At evaluates the call as if the server's clock read t (AT; for tests and replays).
func At(t time.Time) Option { return func(o *options) { o.at = &t } }

// Detail asks for the detailed reply (DETAIL): Result.Reason, DeniedBy and Limiters.
func Detail() Option { return func(o *options) { o.detail = true } }

// Delay grants a request that becomes allowed within d now, as a reservation of that moment;
// RetryAfter is then the wait before acting (DELAY d; GCRA, token and leaky buckets).
func Delay(d time.Duration) Option { return func(o *options) { o.delay = d } }

// Hold makes the granted units a reservation under the Dedup id, to be settled with
// Client.Settle within ttl (HOLD ttl); unsettled, it is given back when ttl has passed.
func Hold(ttl time.Duration) Option { return func(o *options) { o.hold = ttl } }

// Shadow evaluates and charges the call as an enforced one (a call that would be denied
// charges nothing) but never denies it (SHADOW); with Detail, Reason is "shadow".
func Shadow() Option { return func(o *options) { o.shadow = true } }

// Wait makes Acquire wait for its turn up to d when the lease does not fit now (WAIT d). The
// go-redis client's ReadTimeout must be longer than d.
func Wait(d time.Duration) Option { return func(o *options) { o.wait = d } }

func collect(opts []Option) options {
	o := options{cost: 1}
	for _, f := range opts {
		f(&o)
	}
	return o
}

func addDur(out []any, word string, d time.Duration) ([]any, error) {
	if d == 0 {
		return out, nil
	}
	s, err := DurationArg(d)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", word, err)
	}
	return append(out, word, s), nil
}

// args are the options in the module's words.
func (o options) args() ([]any, error) {
	if o.cost < 0 {
		return nil, fmt.Errorf("ratelimit: cost must be >= 0, not %d", o.cost)
	}
	if o.hold != 0 && o.dedup == nil {
		return nil, errors.New("ratelimit: Hold needs Dedup: a reservation is settled by its id")
	}
	var out []any
	if o.cost != 1 {
		out = append(out, "COST", o.cost)
	}
	if o.peek {
		out = append(out, "PEEK")
	}
	if o.shadow {
		out = append(out, "SHADOW")
	}
	if o.bestEffort {
		out = append(out, "BESTEFFORT")
	}
	if o.dedup != nil {
		out = append(out, "DEDUP", *o.dedup)
	}
	var err error
	for _, d := range []struct {
		w string
		d time.Duration
	}{{"HOLD", o.hold}, {"BLOCK", o.block}, {"DELAY", o.delay}, {"WAIT", o.wait}} {
		if out, err = addDur(out, d.w, d.d); err != nil {
			return nil, err
		}
	}
	if o.detail {
		out = append(out, "DETAIL")
	}
	if o.at != nil {
		out = append(out, "AT", TimeArg(*o.at))
	}
	return out, nil
}

// Do runs one command whose first key is at keyPos (0: keyless) and returns its reply, the
// server's errors classified (errors.Is with ErrWrongType, ErrUnknownPolicy,
// ErrModuleNotLoaded). The Envoy rate-limit service and other integrations build on it.
func (c *Client) Do(ctx context.Context, keyPos int, args ...any) (any, error) {
	if len(args) > 0 && isLimiterCommand(strings.ToUpper(fmt.Sprint(args[0]))) {
		b, err := c.Backend(ctx)
		if err != nil {
			return nil, err
		}
		if b == BackendLua {
			return c.doScript(ctx, args)
		}
	}
	cmd := redis.NewCmd(ctx, args...)
	if keyPos > 0 {
		cmd.SetFirstKeyPos(int8(keyPos))
	}
	_ = c.rdb.Process(ctx, cmd)
	v, err := cmd.Result()
	return v, classify(err)
}

func (c *Client) result(ctx context.Context, keyPos int, cost int64, args []any) (*Result, error) {
	v, err := c.Do(ctx, keyPos, args...)
	if err != nil {
		return nil, err
	}
	return ParseResult(v, cost)
}

func (c *Client) limiter(ctx context.Context, key string, l Limiter, opts []Option, allowed map[string]bool) (*Result, error) {
	o := collect(opts)
	if err := o.only(l.Command(), allowed); err != nil {
		return nil, err
	}
	p, err := l.Params()
	if err != nil {
		return nil, err
	}
	oa, err := o.args()
	if err != nil {
		return nil, err
	}
	args := append(append([]any{l.Command(), key}, p...), oa...)
	return c.result(ctx, 1, o.cost, args)
}

// only refuses the options a command does not take (a clear client-side error).
func (o options) only(cmd string, allowed map[string]bool) error {
	if allowed == nil {
		allowed = limiterOpts
	}
	check := []struct {
		set  bool
		name string
	}{{o.peek, "Peek"}, {o.bestEffort, "BestEffort"}, {o.dedup != nil, "Dedup"}, {o.block != 0, "Block"},
		{o.delay != 0, "Delay"}, {o.hold != 0, "Hold"}, {o.wait != 0, "Wait"}, {o.shadow, "Shadow"}}
	for _, c := range check {
		if c.set && !allowed[c.name] {
			return fmt.Errorf("ratelimit: %s does not take the option %s", cmd, c.name)
		}
	}
	return nil
}

var (
	limiterOpts = map[string]bool{"Peek": true, "BestEffort": true, "Dedup": true, "Block": true,
		"Delay": true, "Hold": true, "Shadow": true}
	noDelayOpts = map[string]bool{"Peek": true, "BestEffort": true, "Dedup": true, "Block": true,
		"Hold": true, "Shadow": true}
	checkOpts    = map[string]bool{"BestEffort": true, "Shadow": true}
	checkAllOpts = map[string]bool{"Shadow": true}
	acquireOpts  = map[string]bool{"Peek": true, "Block": true, "Wait": true, "Shadow": true}
)

// Apply calls the command of l (a GCRA, Fixed, ...) on key. A Concurrency limiter takes a lease
// id: use Acquire.
func (c *Client) Apply(ctx context.Context, key string, l Limiter, opts ...Option) (*Result, error) {
	switch l.(type) {
	case Concurrency, *Concurrency:
		return nil, errors.New("ratelimit: a concurrency limiter takes a lease id: use Acquire or Lease")
	case GCRA, TokenBucket, LeakyBucket, *GCRA, *TokenBucket, *LeakyBucket:
		return c.limiter(ctx, key, l, opts, limiterOpts)
	}
	return c.limiter(ctx, key, l, opts, noDelayOpts)
}

// GCRA is RL.GCRA key burst rate period: burst requests at once, rate per period sustained.
func (c *Client) GCRA(ctx context.Context, key string, burst, rate int64, period time.Duration, opts ...Option) (*Result, error) {
	return c.limiter(ctx, key, GCRA{Burst: burst, Rate: rate, Period: period}, opts, limiterOpts)
}

// TokenBucket is RL.TOKENBUCKET key capacity refill period.
func (c *Client) TokenBucket(ctx context.Context, key string, capacity, refill int64, period time.Duration, opts ...Option) (*Result, error) {
	return c.limiter(ctx, key, TokenBucket{Capacity: capacity, Refill: refill, Period: period}, opts, limiterOpts)
}

// LeakyBucket is RL.LEAKYBUCKET key capacity rate period. A granted request's RetryAfter is its
// queue delay (Allowed is still true).
func (c *Client) LeakyBucket(ctx context.Context, key string, capacity, rate int64, period time.Duration, opts ...Option) (*Result, error) {
	return c.limiter(ctx, key, LeakyBucket{Capacity: capacity, Rate: rate, Period: period}, opts, limiterOpts)
}

// Fixed is RL.FIXED key limit window [OFFSET d] [TZ zone] [ANCHOR a]: f carries the window (or
// the calendar period) and its options.
func (c *Client) Fixed(ctx context.Context, key string, f Fixed, opts ...Option) (*Result, error) {
	return c.limiter(ctx, key, f, opts, noDelayOpts)
}

// Sliding is RL.SLIDING key limit window [PRECISION d] (precision 0: none).
func (c *Client) Sliding(ctx context.Context, key string, limit int64, window, precision time.Duration, opts ...Option) (*Result, error) {
	return c.limiter(ctx, key, Sliding{Limit: limit, Window: window, Precision: precision}, opts, noDelayOpts)
}

// SlidingCounter is RL.SLIDINGCOUNTER key limit window.
func (c *Client) SlidingCounter(ctx context.Context, key string, limit int64, window time.Duration, opts ...Option) (*Result, error) {
	return c.limiter(ctx, key, SlidingCounter{Limit: limit, Window: window}, opts, noDelayOpts)
}

// Spec is one limiter of RL.ALL or RL.CHECKALL and its key.
type Spec struct {
	Key     string
	Limiter Limiter
}

func specArgs(specs []Spec) ([]any, error) {
	if len(specs) == 0 {
		return nil, errors.New("ratelimit: RL.ALL needs at least one limiter")
	}
	out := []any{len(specs)}
	for _, s := range specs {
		out = append(out, s.Key)
	}
	for _, s := range specs {
		if s.Limiter == nil {
			return nil, fmt.Errorf("ratelimit: no limiter for key %q", s.Key)
		}
		sp, err := s.Limiter.Spec()
		if err != nil {
			return nil, err
		}
		out = append(out, sp...)
	}
	return out, nil
}

func keyArgs(keys []string, policy string) ([]any, error) {
	if len(keys) == 0 {
		return nil, errors.New("ratelimit: RL.ALL needs at least one key")
	}
	out := []any{len(keys)}
	for _, k := range keys {
		out = append(out, k)
	}
	return append(out, "POLICY", policy), nil
}

func (c *Client) multi(ctx context.Context, cmd string, head []any, opts []Option, allowed map[string]bool) (*Result, error) {
	o := collect(opts)
	if err := o.only(cmd, allowed); err != nil {
		return nil, err
	}
	oa, err := o.args()
	if err != nil {
		return nil, err
	}
	args := append(append([]any{cmd}, head...), oa...)
	return c.result(ctx, 2, o.cost, args)
}

// All is RL.ALL: every limiter grants (each its own Charge, else the cost), or none is charged.
// In Redis Cluster the keys must share a slot: use a hash tag ({user:42}:s, {user:42}:h).
// With Detail, each limiter's own numbers are in Result.Limiters (named by Name, else the key).
func (c *Client) All(ctx context.Context, specs []Spec, opts ...Option) (*Result, error) {
	head, err := specArgs(specs)
	if err != nil {
		return nil, err
	}
	return c.multi(ctx, "RL.ALL", head, opts, limiterOpts)
}

// AllPolicy is RL.ALL numkeys key [key ...] POLICY name: the named policy, one key per limiter
// of the policy in order.
func (c *Client) AllPolicy(ctx context.Context, keys []string, policy string, opts ...Option) (*Result, error) {
	head, err := keyArgs(keys, policy)
	if err != nil {
		return nil, err
	}
	return c.multi(ctx, "RL.ALL", head, opts, limiterOpts)
}

// Check is RL.CHECK: the reply the call would give with PEEK, from a read-only command (it runs
// on replicas). A missing key is a fresh limiter.
func (c *Client) Check(ctx context.Context, key string, l Limiter, opts ...Option) (*Result, error) {
	o := collect(opts)
	if err := o.only("RL.CHECK", checkOpts); err != nil {
		return nil, err
	}
	sp, err := l.Spec()
	if err != nil {
		return nil, err
	}
	oa, err := o.args()
	if err != nil {
		return nil, err
	}
	args := append(append([]any{"RL.CHECK", key}, sp...), oa...)
	return c.result(ctx, 1, o.cost, args)
}

// CheckAll is RL.CHECKALL: would this request pass every limit? The reply All would give with
// PEEK, from a read-only command.
func (c *Client) CheckAll(ctx context.Context, specs []Spec, opts ...Option) (*Result, error) {
	head, err := specArgs(specs)
	if err != nil {
		return nil, err
	}
	return c.multi(ctx, "RL.CHECKALL", head, opts, checkAllOpts)
}

// CheckAllPolicy is RL.CHECKALL numkeys key [key ...] POLICY name.
func (c *Client) CheckAllPolicy(ctx context.Context, keys []string, policy string, opts ...Option) (*Result, error) {
	head, err := keyArgs(keys, policy)
	if err != nil {
		return nil, err
	}
	return c.multi(ctx, "RL.CHECKALL", head, opts, checkAllOpts)
}

// Limit is RL.LIMIT key policy: the named one-limiter policy on key, with the options and reply
// of its limiter's command. An unknown policy is an error (errors.Is ErrUnknownPolicy).
func (c *Client) Limit(ctx context.Context, key, policy string, opts ...Option) (*Result, error) {
	o := collect(opts)
	if err := o.only("RL.LIMIT", limiterOpts); err != nil {
		return nil, err
	}
	oa, err := o.args()
	if err != nil {
		return nil, err
	}
	return c.result(ctx, 1, o.cost, append([]any{"RL.LIMIT", key, policy}, oa...))
}

// Refund is RL.REFUND: give back up to units; Granted is what was given back. nil for a missing
// key. Only Dedup and At apply.
func (c *Client) Refund(ctx context.Context, key string, units int64, opts ...Option) (*Result, error) {
	o := collect(opts)
	args := []any{"RL.REFUND", key, units}
	if o.dedup != nil {
		args = append(args, "DEDUP", *o.dedup)
	}
	if o.at != nil {
		args = append(args, "AT", TimeArg(*o.at))
	}
	r, err := c.result(ctx, 1, 0, args)
	if err == redis.Nil {
		return nil, nil
	}
	return r, err
}

// Settle is RL.SETTLE: settle the reservation id (made with Hold and Dedup) with the units
// really used, one per key. Below the held units the difference is given back, above them the
// extra is charged (the limiter may go into debt). One Result per key (nil for a missing key):
// Granted is what the id is charged there after the settle; Allowed means one unit could be
// granted now, else RetryAfter is the wait. A retried settle settles nothing more.
func (c *Client) Settle(ctx context.Context, keys []string, id string, units []int64, at ...time.Time) ([]*Result, error) {
	if len(keys) == 0 {
		return nil, errors.New("ratelimit: RL.SETTLE needs at least one key")
	}
	if len(units) != len(keys) {
		return nil, fmt.Errorf("ratelimit: one units per key: %d keys, %d units", len(keys), len(units))
	}
	args := []any{"RL.SETTLE", len(keys)}
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, id)
	for _, u := range units {
		if u < 0 {
			return nil, fmt.Errorf("ratelimit: units must be >= 0, not %d", u)
		}
		args = append(args, u)
	}
	if len(at) > 0 {
		args = append(args, "AT", TimeArg(at[0]))
	}
	v, err := c.Do(ctx, 2, args...)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("ratelimit: not an RL.SETTLE reply: %T", v)
	}
	out := make([]*Result, len(list))
	for i, e := range list {
		if e == nil {
			continue
		}
		if out[i], err = ParseResult(e, -1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Block is RL.BLOCK: block key for d (a manual ban); returns the block's remaining time.
func (c *Client) Block(ctx context.Context, key string, d time.Duration, at ...time.Time) (time.Duration, error) {
	s, err := DurationArg(d)
	if err != nil {
		return 0, err
	}
	args := []any{"RL.BLOCK", key, s}
	if len(at) > 0 {
		args = append(args, "AT", TimeArg(at[0]))
	}
	v, err := c.Do(ctx, 1, args...)
	if err != nil {
		return 0, err
	}
	n, err := integer(v)
	return time.Duration(n) * time.Millisecond, err
}

// Unblock is RL.UNBLOCK: true if a block was removed.
func (c *Client) Unblock(ctx context.Context, key string) (bool, error) {
	v, err := c.Do(ctx, 1, "RL.UNBLOCK", key)
	if err != nil {
		return false, err
	}
	n, err := integer(v)
	return n == 1, err
}

// Acquire is RL.ACQUIRE key limit lease ID id: take the cost's units under the lease id (a
// renewal when id already holds them). With Wait, a lease that does not fit waits for its turn
// (first come, first served) up to that long.
func (c *Client) Acquire(ctx context.Context, key string, limit int64, lease time.Duration, id string, opts ...Option) (*Result, error) {
	o := collect(opts)
	if err := o.only("RL.ACQUIRE", acquireOpts); err != nil {
		return nil, err
	}
	p, err := Concurrency{Limit: limit, Lease: lease}.Params()
	if err != nil {
		return nil, err
	}
	oa, err := o.args()
	if err != nil {
		return nil, err
	}
	args := append(append(append([]any{"RL.ACQUIRE", key}, p...), "ID", id), oa...)
	return c.result(ctx, 1, o.cost, args)
}

// Release is RL.RELEASE: free the lease's units; returns their number (0 if it held none).
func (c *Client) Release(ctx context.Context, key, id string, at ...time.Time) (int64, error) {
	args := []any{"RL.RELEASE", key, id}
	if len(at) > 0 {
		args = append(args, "AT", TimeArg(at[0]))
	}
	v, err := c.Do(ctx, 1, args...)
	if err != nil {
		return 0, err
	}
	return integer(v)
}

// Lease is a lease held on a concurrency limiter (Client.Lease).
type Lease struct {
	c      *Client
	Key    string
	ID     string
	Limit  int64
	Length time.Duration
	Cost   int64
	Result *Result
}

// Renew extends the lease by its length again.
func (l *Lease) Renew(ctx context.Context) (*Result, error) {
	return l.c.Acquire(ctx, l.Key, l.Limit, l.Length, l.ID, Cost(l.Cost))
}

// Release frees the lease's units.
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.c.Release(ctx, l.Key, l.ID)
	return err
}

// Lease takes the cost's units of a concurrency limiter under a new random id; when they do
// not fit (after Wait, if given) the error is a *LimitedError (errors.Is ErrLimited). Release
// the lease when done (defer lease.Release(ctx)).
func (c *Client) Lease(ctx context.Context, key string, limit int64, lease time.Duration, opts ...Option) (*Lease, error) {
	id, err := randomID()
	if err != nil {
		return nil, err
	}
	r, err := c.Acquire(ctx, key, limit, lease, id, opts...)
	if err != nil {
		return nil, err
	}
	if !r.Allowed {
		return nil, &LimitedError{Result: r}
	}
	return &Lease{c: c, Key: key, ID: id, Limit: limit, Length: lease, Cost: collect(opts).cost, Result: r}, nil
}

// StreamCount is RL.STREAMCOUNT key window [ADD add] [LIMIT limit] (limit 0: none): the
// window's total after the call.
func (c *Client) StreamCount(ctx context.Context, key string, window time.Duration, add, limit int64, at ...time.Time) (*StreamCount, error) {
	w, err := DurationArg(window)
	if err != nil {
		return nil, err
	}
	args := []any{"RL.STREAMCOUNT", key, w}
	if add != 1 {
		args = append(args, "ADD", add)
	}
	if limit > 0 {
		args = append(args, "LIMIT", limit)
	}
	if len(at) > 0 {
		args = append(args, "AT", TimeArg(at[0]))
	}
	v, err := c.Do(ctx, 1, args...)
	if err != nil {
		return nil, err
	}
	n, err := integer(v)
	return &StreamCount{Allowed: n >= 0, Total: n}, err
}

// Throttle is CL.THROTTLE (redis-cell's arguments and reply: periods and times in seconds).
func (c *Client) Throttle(ctx context.Context, key string, maxBurst, countPerPeriod, periodS, quantity int64, at ...time.Time) (*ThrottleResult, error) {
	args := []any{"CL.THROTTLE", key, maxBurst, countPerPeriod, periodS, quantity}
	if len(at) > 0 {
		args = append(args, "AT", TimeArg(at[0]))
	}
	v, err := c.Do(ctx, 1, args...)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok || len(list) != 5 {
		return nil, fmt.Errorf("ratelimit: not a CL.THROTTLE reply: %v", v)
	}
	var n [5]int64
	for i, e := range list {
		if n[i], err = integer(e); err != nil {
			return nil, err
		}
	}
	return &ThrottleResult{Limited: n[0] == 1, Limit: n[1], Remaining: n[2], RetryAfterS: n[3], ResetAfterS: n[4]}, nil
}

// Info is RL.INFO: the key's algorithm, parameters and state; nil for a missing key.
func (c *Client) Info(ctx context.Context, key string) (*Info, error) {
	v, err := c.Do(ctx, 1, "RL.INFO", key)
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseInfo(v)
}
