package ratelimit_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// counts is a MetricsObserver that keeps what it was told.
type counts struct {
	mu       sync.Mutex
	requests map[string]int // "command policy acquired|limited"
	near     map[string]int // "command policy"
	queued   []time.Duration
}

func (c *counts) Request(_ context.Context, command, policy string, acquired, near bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	result := "limited"
	if acquired {
		result = "acquired"
	}
	c.requests[command+" "+policy+" "+result]++
	if near {
		c.near[command+" "+policy]++
	}
}

func (c *counts) TimeInQueue(_ context.Context, d time.Duration, _ bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queued = append(c.queued, d)
}

// serverMetrics is RL.METRICS as name -> value.
func serverMetrics(t *testing.T, rdb *redis.Client) map[string]float64 {
	t.Helper()
	v, err := rdb.Do(ctx, "RL.METRICS").Slice()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for i := 0; i+1 < len(v); i += 2 {
		f, err := strconv.ParseFloat(fmt.Sprint(v[i+1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprint(v[i])] = f
	}
	return out
}

func TestNearLimitIsTheModulesRule(t *testing.T) {
	for _, c := range []struct {
		remaining, limit, percent int64
		want                      bool
	}{
		{1, 10, 20, true}, {2, 10, 20, false}, {0, 1, 20, true}, {0, 1, 0, false},
		{math.MaxInt64 - 1, math.MaxInt64, 100, true}, {math.MaxInt64, math.MaxInt64, 100, false},
		{-1, 0, 0, true},
	} {
		if got := ratelimit.NearLimit(c.remaining, c.limit, c.percent); got != c.want {
			t.Errorf("NearLimit(%d, %d, %d) = %v", c.remaining, c.limit, c.percent, got)
		}
	}
}

// The hook's counts equal what the calls imply (AT pins each call's time) and what the module
// counted itself (RL.METRICS), on RESP2 and RESP3.
func TestMetricsHookCountsWhatTheServerCounts(t *testing.T) {
	protocols(t, func(t *testing.T, _ *ratelimit.Client, rdb *redis.Client, key func(string) string) {
		obs := &counts{requests: map[string]int{}, near: map[string]int{}}
		rdb.AddHook(ratelimit.MetricsHook(obs, 20))
		c := ratelimit.New(rdb)
		policy := fmt.Sprintf("free_resp%d", rdb.Options().Protocol)
		if _, err := c.PolicySet(ctx, policy, []ratelimit.Limiter{ratelimit.GCRA{Burst: 5, Rate: 1, Period: time.Minute}}, ratelimit.PolicyOptions{}); err != nil {
			t.Fatal(err)
		}
		before := serverMetrics(t, rdb)
		at := ratelimit.At(base())
		// A limit of 10, 12 calls at one instant: 10 acquired (remaining 9..0; 1 and 0 are
		// below 20% of 10: near), 2 limited.
		for i := 0; i < 12; i++ {
			if _, err := c.GCRA(ctx, key("g"), 10, 1, time.Minute, at); err != nil {
				t.Fatal(err)
			}
		}
		// The policy (limit 5): 7 calls, 5 acquired (remaining 0 near), 2 limited.
		for i := 0; i < 7; i++ {
			if _, err := c.Limit(ctx, key("f"), policy, at); err != nil {
				t.Fatal(err)
			}
		}
		after := serverMetrics(t, rdb)
		want := map[string]int{
			"rl.gcra  acquired": 10, "rl.gcra  limited": 2,
			"rl.limit " + policy + " acquired": 5, "rl.limit " + policy + " limited": 2,
		}
		for k, n := range want {
			if obs.requests[k] != n {
				t.Errorf("%q: %d, want %d", k, obs.requests[k], n)
			}
		}
		if obs.near["rl.gcra "] != 2 || obs.near["rl.limit "+policy] != 1 {
			t.Errorf("near: %v", obs.near)
		}
		for _, cmd := range []struct{ name, policy string }{{"rl.gcra", ""}, {"rl.limit", policy}} {
			d := func(counter string) int {
				k := fmt.Sprintf("ratelimit_command_%s_total{command=%q}", counter, cmd.name)
				return int(after[k] - before[k])
			}
			if d("granted") != obs.requests[cmd.name+" "+cmd.policy+" acquired"] ||
				d("denied") != obs.requests[cmd.name+" "+cmd.policy+" limited"] ||
				d("near_limit") != obs.near[cmd.name+" "+cmd.policy] {
				t.Errorf("%s: the server counted granted %d, denied %d, near %d; the hook %v %v",
					cmd.name, d("granted"), d("denied"), d("near_limit"), obs.requests, obs.near)
			}
		}
	})
}

// A WAIT that times out is reported with the time it took.
func TestMetricsHookTimesAWait(t *testing.T) {
	rdb := server(t).Client(t, 2)
	obs := &counts{requests: map[string]int{}, near: map[string]int{}}
	rdb.AddHook(ratelimit.MetricsHook(obs, 20))
	c := ratelimit.New(rdb)
	k := t.Name()
	if r, err := c.Acquire(ctx, k, 1, time.Minute, "holder"); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	r, err := c.Acquire(ctx, k, 1, time.Minute, "late", ratelimit.Wait(100*time.Millisecond))
	if err != nil || r.Allowed {
		t.Fatal(r, err)
	}
	if obs.requests["rl.acquire  acquired"] != 1 || obs.requests["rl.acquire  limited"] != 1 {
		t.Errorf("requests: %v", obs.requests)
	}
	if len(obs.queued) != 1 || obs.queued[0] < 100*time.Millisecond {
		t.Errorf("time in queue: %v", obs.queued)
	}
}
