// Package redis_rate is a drop-in for github.com/go-redis/redis_rate/v10 backed by the
// redis-ratelimit module's RL.GCRA: the same exported API (NewLimiter, Limit, PerSecond,
// PerMinute, PerHour, Allow, AllowN, AllowAtMost, Reset, Result), the same decisions, in exact
// integer arithmetic instead of floating point. Switch by changing the import path:
//
//	import redis_rate "github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"
//
// What differs: a key holds the module's type, not redis_rate's string, so a key last written by
// redis_rate's Lua script is refused (WRONGTYPE, errors.Is ratelimit.ErrWrongType) until it
// expires — switch with another prefix (NewLimiterPrefix) or let the old keys expire (at most
// Burst·Period/Rate after their last use). RetryAfter and ResetAfter come from the module in
// whole milliseconds rounded up (never early), where redis_rate's floats give nanoseconds.
// AllowAtMost charges the units it grants; redis_rate's script also charges the fraction of a
// unit left over, so after a partial grant the module allows the next request up to one
// emission interval sooner — the exact answer. Limits with Burst or Rate below 1, or a Period
// below 1 ms, are errors rather than redis_rate's division by zero.
package redis_rate

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

const redisPrefix = "rate:"

type rediser interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Limit is Rate events per Period, with bursts of Burst.
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

func (l Limit) String() string {
	return fmt.Sprintf("%d req/%s (burst %d)", l.Rate, fmtDur(l.Period), l.Burst)
}

// IsZero reports whether l is the zero Limit.
func (l Limit) IsZero() bool {
	return l == Limit{}
}

func fmtDur(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return d.String()
}

// PerSecond is rate per second, bursts of rate.
func PerSecond(rate int) Limit {
	return Limit{Rate: rate, Period: time.Second, Burst: rate}
}

// PerMinute is rate per minute, bursts of rate.
func PerMinute(rate int) Limit {
	return Limit{Rate: rate, Period: time.Minute, Burst: rate}
}

// PerHour is rate per hour, bursts of rate.
func PerHour(rate int) Limit {
	return Limit{Rate: rate, Period: time.Hour, Burst: rate}
}

// Limiter controls how frequently events are allowed to happen.
type Limiter struct {
	rdb    rediser
	prefix string
	// at, when set (tests), gives the AT of each call.
	at func() (time.Time, bool)
}

// NewLimiter returns a new Limiter on rdb (a *redis.Client, *redis.ClusterClient, *redis.Ring,
// ...), with redis_rate's key prefix "rate:".
func NewLimiter(rdb rediser) *Limiter {
	return &Limiter{rdb: rdb, prefix: redisPrefix}
}

// NewLimiterPrefix returns a new Limiter whose keys start with prefix instead of "rate:": the
// way to switch from redis_rate while its keys still exist (see the package documentation).
func NewLimiterPrefix(rdb rediser, prefix string) *Limiter {
	return &Limiter{rdb: rdb, prefix: prefix}
}

// Allow is a shortcut for AllowN(ctx, key, limit, 1).
func (l Limiter) Allow(ctx context.Context, key string, limit Limit) (*Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// args are RL.GCRA's burst, rate and period for limit: the period in whole ms (a period with a
// fraction of a ms is scaled with the rate, keeping the emission interval Period/Rate exact).
func args(limit Limit) (burst, rate int64, period time.Duration, err error) {
	if limit.Burst < 1 || limit.Rate < 1 || limit.Period < time.Millisecond {
		return 0, 0, 0, fmt.Errorf("redis_rate: %v: Burst and Rate must be >= 1 and Period >= 1ms", limit)
	}
	period, rate = limit.Period, int64(limit.Rate)
	if r := int64(period % time.Millisecond); r != 0 {
		k := int64(time.Millisecond) / gcd(int64(period), int64(time.Millisecond))
		period, rate = period*time.Duration(k), rate*k
	}
	return int64(limit.Burst), rate, period, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (l Limiter) gcra(ctx context.Context, key string, limit Limit, n int, bestEffort bool) (*ratelimit.Result, error) {
	if n < 0 {
		return nil, fmt.Errorf("redis_rate: n must be >= 0, not %d", n)
	}
	burst, rate, period, err := args(limit)
	if err != nil {
		return nil, err
	}
	p, err := ratelimit.DurationArg(period)
	if err != nil {
		return nil, err
	}
	a := []any{"RL.GCRA", l.prefix + key, burst, rate, p}
	if n != 1 {
		a = append(a, "COST", n)
	}
	if bestEffort {
		a = append(a, "BESTEFFORT")
	}
	if l.at != nil {
		if t, ok := l.at(); ok {
			a = append(a, "AT", ratelimit.TimeArg(t))
		}
	}
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(1)
	_ = l.rdb.Process(ctx, cmd)
	v, err := cmd.Result()
	if err != nil {
		return nil, ratelimit.Classify(err)
	}
	return ratelimit.ParseResult(v, int64(n))
}

// mulDiv is a·b/c in exact arithmetic, truncated like redis_rate's conversion to a Duration.
func mulDiv(a, b, c int64) time.Duration {
	var x big.Int
	x.Mul(big.NewInt(a), big.NewInt(b))
	x.Quo(&x, big.NewInt(c))
	return time.Duration(x.Int64())
}

// AllowN reports whether n events may happen at time now.
func (l Limiter) AllowN(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	r, err := l.gcra(ctx, key, limit, n, false)
	if err != nil {
		return nil, err
	}
	if r.Allowed {
		return &Result{Limit: limit, Allowed: int(r.Granted), Remaining: int(r.Remaining), RetryAfter: -1, ResetAfter: r.ResetAfter}, nil
	}
	retry := r.RetryAfter
	if r.Never {
		// n above the burst never passes; redis_rate answers the time at which it would if
		// the burst allowed it: the backlog plus (n - burst) emission intervals.
		retry = r.ResetAfter + mulDiv(int64(n-limit.Burst), int64(limit.Period), int64(limit.Rate))
	}
	return &Result{Limit: limit, Allowed: 0, Remaining: 0, RetryAfter: retry, ResetAfter: r.ResetAfter}, nil
}

// AllowAtMost reports whether at most n events may happen at time now.
// It returns number of allowed events that is less than or equal to n.
func (l Limiter) AllowAtMost(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	r, err := l.gcra(ctx, key, limit, n, true)
	if err != nil {
		return nil, err
	}
	if r.Granted > 0 {
		return &Result{Limit: limit, Allowed: int(r.Granted), Remaining: int(r.Remaining), RetryAfter: -1, ResetAfter: r.ResetAfter}, nil
	}
	// Nothing granted: the wait until one event may happen (redis_rate's meaning here), from
	// the backlog: TAT + T - burst·T - now.
	retry := r.ResetAfter + mulDiv(int64(1-limit.Burst), int64(limit.Period), int64(limit.Rate))
	if retry < 0 {
		retry = 0
	}
	if n == 0 && r.Remaining >= 1 {
		return &Result{Limit: limit, Allowed: 0, Remaining: int(r.Remaining), RetryAfter: -1, ResetAfter: r.ResetAfter}, nil
	}
	return &Result{Limit: limit, Allowed: 0, Remaining: 0, RetryAfter: retry, ResetAfter: r.ResetAfter}, nil
}

// Reset gets a key and reset all limitations and previous usages
func (l *Limiter) Reset(ctx context.Context, key string) error {
	return l.rdb.Del(ctx, l.prefix+key).Err()
}

// Result is the result of Allow, AllowN and AllowAtMost.
type Result struct {
	// Limit is the limit that was used to obtain this result.
	Limit Limit

	// Allowed is the number of events that may happen at time now.
	Allowed int

	// Remaining is the maximum number of requests that could be
	// permitted instantaneously for this key given the current
	// state. For example, if a rate limiter allows 10 requests per
	// second and has already received 6 requests for this key this
	// second, Remaining would be 4.
	Remaining int

	// RetryAfter is the time until the next request will be permitted.
	// It should be -1 unless the rate limit has been exceeded.
	RetryAfter time.Duration

	// ResetAfter is the time until the RateLimiter returns to its
	// initial state for a given key. For example, if a rate limiter
	// manages requests per second and received one request 200ms ago,
	// Reset would return 800ms. You can also think of this as the time
	// until Limit and Remaining will be equal.
	ResetAfter time.Duration
}
