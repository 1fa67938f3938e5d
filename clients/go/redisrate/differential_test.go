package redis_rate

import (
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"sync"
	"testing"
	"time"

	orig "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

// redis_rate keeps its TAT in seconds since 2017-01-01 (a float in a string key).
const jan2017 = 1483228800

// The differential test: the same calls, in the same order, through the real redis_rate v10
// (its Lua script) and through this package (RL.GCRA), on one server. Each redis_rate call's
// server time is recovered from the TAT its script stored and the ResetAfter it replied (to
// ~0.1 µs, below the µs of the server's TIME), and the drop-in's call is evaluated at exactly
// that time (AT), so both see the same clock. Every Result field is compared:
//   - Limit, Allowed and Remaining must be equal;
//   - RetryAfter and ResetAfter may differ only by the module's rounding of ms up: drop-in minus
//     redis_rate in [-2µs, 1ms+2µs] (the µs are redis_rate's float error).
//
// One difference is redis_rate's defect, not the module's: after AllowAtMost grants fewer
// than asked, redis_rate's script charges the fraction of a unit it did not grant (its TAT is
// set to now + burst·T), so it denies the next unit up to one emission interval longer than
// exact arithmetic; on that call ResetAfter differs by that fraction of T. The test
// re-synchronises the two keys after such a grant (Reset on both) and counts them.
// And redis_rate's floats truncate an exact integer k of units to k - 1: its Remaining is one
// below the exact value, and AllowAtMost grants one unit less (counted; the module's exact
// answer is the right one).
func TestDifferential(t *testing.T) {
	s := testserver.Start(t, testserver.Module())
	limits := []orig.Limit{
		orig.PerSecond(50),
		{Rate: 3, Burst: 5, Period: 100 * time.Millisecond},
		{Rate: 7, Burst: 2, Period: 150 * time.Millisecond},
		{Rate: 1, Burst: 4, Period: 40 * time.Millisecond},
		{Rate: 1000, Burst: 10, Period: time.Second},
		{Rate: 6, Burst: 3, Period: 90*time.Millisecond + 500*time.Microsecond},
	}
	const callsPerLimit = 200
	var mu sync.Mutex
	var total stats
	t.Run("group", func(t *testing.T) {
		for i, lim := range limits {
			i, lim := i, lim
			t.Run(fmt.Sprintf("%d-%s", i, lim), func(t *testing.T) {
				t.Parallel()
				st := runSequence(t, s, fmt.Sprintf("diff%d", i), lim, callsPerLimit, int64(i+1))
				mu.Lock()
				total.add(st)
				mu.Unlock()
			})
		}
	})
	t.Logf("differential: %d calls compared (%d Allow, %d AllowN, %d AllowAtMost), %d allowed; "+
		"Limit/Allowed/Remaining differences: %d; RetryAfter drop-in minus redis_rate in [%v, %v], "+
		"ResetAfter in [%v, %v] (partial grants aside); Remaining one below the exact value from "+
		"redis_rate's float truncation: %d; AllowAtMost granting one unit less than the exact "+
		"value in redis_rate (same float truncation): %d; AllowAtMost partial grants re-synchronised: %d",
		total.calls, total.ops[0], total.ops[1], total.ops[2], total.allowed, total.diffs,
		total.retryMin, total.retryMax, total.resetMin, total.resetMax, total.floatRemaining, total.floatAllowed, total.resync)
	if total.calls != len(limits)*callsPerLimit || total.allowed == 0 || total.allowed == total.calls {
		t.Fatalf("the sequence must compare grants and denials: %+v", total)
	}
}

type stats struct {
	calls, allowed, diffs, resync int
	floatRemaining, floatAllowed  int
	ops                           [3]int
	retryMin, retryMax            time.Duration
	resetMin, resetMax            time.Duration
}

func (s *stats) add(o stats) {
	if s.calls == 0 {
		s.retryMin, s.retryMax, s.resetMin, s.resetMax = o.retryMin, o.retryMax, o.resetMin, o.resetMax
	}
	s.calls += o.calls
	s.allowed += o.allowed
	s.diffs += o.diffs
	s.resync += o.resync
	s.floatRemaining += o.floatRemaining
	s.floatAllowed += o.floatAllowed
	for i := range s.ops {
		s.ops[i] += o.ops[i]
	}
	s.retryMin, s.retryMax = min(s.retryMin, o.retryMin), max(s.retryMax, o.retryMax)
	s.resetMin, s.resetMax = min(s.resetMin, o.resetMin), max(s.resetMax, o.resetMax)
}

func (s *stats) span(min, max *time.Duration, d time.Duration) {
	if s.calls == 0 || d < *min {
		*min = d
	}
	if s.calls == 0 || d > *max {
		*max = d
	}
}

// recoveredNow is the server time of redis_rate's last call: the TAT its script left in the
// key minus the ResetAfter it replied (both TAT - now), rounded to the server's µs.
func recoveredNow(t *testing.T, rdb *redis.Client, key string, res *orig.Result) (time.Time, bool) {
	v, err := rdb.Get(ctx, "rate:"+key).Result()
	if err == redis.Nil {
		return time.Time{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	tat, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatal(err)
	}
	now := tat - res.ResetAfter.Seconds()
	us := int64(math.Round(now*1e6)) + jan2017*1_000_000
	return time.UnixMicro(us), true
}

func runSequence(t *testing.T, s *testserver.Server, key string, lim orig.Limit, calls int, seed int64) stats {
	rdb := s.Client(t, 3)
	ref := orig.NewLimiter(rdb)
	var at time.Time
	var pinned bool
	drop := NewLimiterPrefix(rdb, "rl:")
	drop.at = func() (time.Time, bool) { return at, pinned }
	rc := ratelimit.New(rdb)
	mine := Limit{Rate: lim.Rate, Burst: lim.Burst, Period: lim.Period}
	rng := rand.New(rand.NewSource(seed))
	period := lim.Period / time.Duration(lim.Rate)
	var st stats
	for i := 0; i < calls; i++ {
		time.Sleep(time.Duration(rng.Int63n(int64(period) * 3 / 2)))
		op := 0
		n := 1
		switch x := rng.Intn(100); {
		case x < 25:
			op, n = 1, rng.Intn(lim.Burst+2)
		case x < 40:
			op, n = 2, rng.Intn(lim.Burst+2)
		}
		var want *orig.Result
		var got *Result
		var err error
		switch op {
		case 0:
			want, err = ref.Allow(ctx, key, lim)
		case 1:
			want, err = ref.AllowN(ctx, key, lim, n)
		default:
			want, err = ref.AllowAtMost(ctx, key, lim, n)
		}
		if err != nil {
			t.Fatal(err)
		}
		if now, ok := recoveredNow(t, rdb, key, want); ok && want.ResetAfter > 0 {
			at, pinned = now, true
		} else {
			// The state is fresh (TAT <= now): the result does not depend on the time, as long
			// as the drop-in's key is fresh too: the server's time after the call.
			now, err := rdb.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			at, pinned = now.Truncate(time.Microsecond), true
		}
		switch op {
		case 0:
			got, err = drop.Allow(ctx, key, mine)
		case 1:
			got, err = drop.AllowN(ctx, key, mine, n)
		default:
			got, err = drop.AllowAtMost(ctx, key, mine, n)
		}
		if err != nil {
			t.Fatal(err)
		}
		dRetry, dReset := got.RetryAfter-want.RetryAfter, got.ResetAfter-want.ResetAfter
		partial := op == 2 && want.Allowed > 0 && want.Allowed < n
		// redis_rate's Remaining is its float (B·T - ResetAfter)/T truncated: when that is an
		// integer k in exact arithmetic the float may be k - ε, and redis_rate says k - 1.
		x := (float64(lim.Burst)*float64(period) - float64(want.ResetAfter)) / float64(period)
		k := math.Round(x)
		floatRemaining := want.RetryAfter == -1 && !partial && math.Abs(x-k) < 1e-4 &&
			got.Remaining == int(k) && want.Remaining == int(k)-1
		if floatRemaining {
			st.floatRemaining++
		}
		// The same float error in AllowAtMost: k units available exactly, redis_rate sees
		// k - ε, grants k - 1 and charges k - ε; the module grants k and is then empty too.
		floatAllowed := partial && got.Allowed == want.Allowed+1 && got.Remaining == 0 &&
			dReset >= -2*time.Microsecond && dReset <= time.Millisecond+2*time.Microsecond
		if floatAllowed {
			st.floatAllowed++
		}
		resetLow := -2 * time.Microsecond
		if partial {
			// redis_rate charged the fraction of a unit it did not grant: its ResetAfter is
			// longer by that fraction of T.
			resetLow = -period
		}
		same := (got.Allowed == want.Allowed || floatAllowed) && (got.Remaining == want.Remaining || floatRemaining) &&
			(got.RetryAfter == -1) == (want.RetryAfter == -1) && got.Limit == mine
		if !same || dRetry < -2*time.Microsecond || dRetry > time.Millisecond+2*time.Microsecond ||
			dReset < resetLow || dReset > time.Millisecond+2*time.Microsecond {
			st.diffs++
			info, _ := rc.Info(ctx, "rl:"+key)
			t.Errorf("call %d op %d n %d at %s: redis_rate %+v, drop-in %+v (module state %v)",
				i, op, n, ratelimit.TimeArg(at), *want, *got, info)
		}
		st.span(&st.retryMin, &st.retryMax, dRetry)
		if !partial {
			st.span(&st.resetMin, &st.resetMax, dReset)
		}
		st.calls++
		st.ops[op]++
		if want.Allowed > 0 {
			st.allowed++
		}
		if partial {
			// redis_rate charged a fraction more than it granted: start both afresh.
			st.resync++
			if err := ref.Reset(ctx, key); err != nil {
				t.Fatal(err)
			}
			if err := drop.Reset(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st
}
