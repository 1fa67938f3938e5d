package ratelimit_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

// GCRA burst 3, 1 per second (T = 1 s): three at once, then denied for T.
func TestGCRA(t *testing.T) {
	protocols(t, func(t *testing.T, c *ratelimit.Client, _ *redis.Client, key func(string) string) {
		t0 := base()
		k := key("g")
		for i := int64(1); i <= 3; i++ {
			r, err := c.GCRA(ctx, k, 3, 1, time.Second, ratelimit.At(t0))
			check(t, "grant", r, err, want{true, 1, 3, 3 - i, 0, i * 1000})
		}
		r, err := c.GCRA(ctx, k, 3, 1, time.Second, ratelimit.At(t0))
		check(t, "deny", r, err, want{false, 0, 3, 0, 1000, 3000})
		if h, ok := r.RetryAfterHeader(); !ok || h != 1 {
			t.Fatalf("Retry-After %d %v", h, ok)
		}
		// 1.5 s later one unit came back.
		r, err = c.GCRA(ctx, k, 3, 1, time.Second, ratelimit.At(t0.Add(1500*time.Millisecond)))
		check(t, "later", r, err, want{true, 1, 3, 0, 0, 2500})
		// A cost above the burst can never pass.
		r, err = c.GCRA(ctx, key("never"), 3, 1, time.Second, ratelimit.Cost(4), ratelimit.At(t0))
		check(t, "never", r, err, want{false, 0, 3, 3, -1, 0})
		if _, ok := r.RetryAfterHeader(); ok || r.RetryAfter >= 0 {
			t.Fatal("a request that can never pass has no Retry-After")
		}
		// PEEK and COST 0 change nothing; BESTEFFORT grants what is there.
		k2 := key("g2")
		r, err = c.GCRA(ctx, k2, 3, 1, time.Second, ratelimit.Cost(2), ratelimit.Peek(), ratelimit.At(t0))
		check(t, "peek", r, err, want{true, 2, 3, 1, 0, 2000})
		r, err = c.GCRA(ctx, k2, 3, 1, time.Second, ratelimit.Cost(5), ratelimit.BestEffort(), ratelimit.At(t0))
		if err != nil || r.Allowed || r.Granted != 3 || r.Remaining != 0 {
			t.Fatalf("best effort: %+v %v", r, err)
		}
		// DEDUP: a retried request is not charged twice.
		k3 := key("d")
		for i := 0; i < 2; i++ {
			r, err = c.GCRA(ctx, k3, 3, 1, time.Second, ratelimit.Dedup("req-1"), ratelimit.At(t0))
			check(t, "dedup", r, err, want{true, 1, 3, 2, 0, 1000})
		}
	})
}

func TestAlgorithms(t *testing.T) {
	protocols(t, func(t *testing.T, c *ratelimit.Client, _ *redis.Client, key func(string) string) {
		t0 := base()
		r, err := c.TokenBucket(ctx, key("tb"), 5, 1, time.Second, ratelimit.Cost(2), ratelimit.At(t0))
		check(t, "token bucket", r, err, want{true, 2, 5, 3, 0, 2000})

		lb := key("lb")
		r, err = c.LeakyBucket(ctx, lb, 2, 1, time.Second, ratelimit.At(t0))
		check(t, "leaky 1", r, err, want{true, 1, 2, 1, 0, 1000})
		r, err = c.LeakyBucket(ctx, lb, 2, 1, time.Second, ratelimit.At(t0))
		check(t, "leaky 2 (queue delay)", r, err, want{true, 1, 2, 0, 1000, 2000})

		fx := key("fx")
		endMs := (t0.UnixMilli()/60000 + 1) * 60000
		for i := int64(1); i <= 2; i++ {
			r, err = c.Fixed(ctx, fx, ratelimit.Fixed{Limit: 2, Window: time.Minute}, ratelimit.At(t0))
			check(t, "fixed", r, err, want{true, 1, 2, 2 - i, 0, endMs - t0.UnixMilli()})
		}
		r, err = c.Fixed(ctx, fx, ratelimit.Fixed{Limit: 2, Window: time.Minute}, ratelimit.At(t0))
		check(t, "fixed deny", r, err, want{false, 0, 2, 0, endMs - t0.UnixMilli(), endMs - t0.UnixMilli()})
		r, err = c.Fixed(ctx, key("cal"), ratelimit.Fixed{Limit: 100, Calendar: ratelimit.Month, TZ: "Europe/Paris", Anchor: "31"})
		if err != nil || !r.Allowed || r.Remaining != 99 || r.ResetAfter <= 0 || r.ResetAfter > 32*24*time.Hour {
			t.Fatalf("calendar: %+v %v", r, err)
		}

		sl := key("sl")
		for i := int64(1); i <= 2; i++ {
			r, err = c.Sliding(ctx, sl, 2, 10*time.Second, 0, ratelimit.At(t0))
			check(t, "sliding", r, err, want{true, 1, 2, 2 - i, 0, 10000})
		}
		r, err = c.Sliding(ctx, sl, 2, 10*time.Second, 0, ratelimit.At(t0))
		check(t, "sliding deny", r, err, want{false, 0, 2, 0, 10000, 10000})
		r, err = c.Sliding(ctx, key("slp"), 2, 10*time.Second, time.Second, ratelimit.At(t0))
		if err != nil || !r.Allowed || r.Remaining != 1 {
			t.Fatalf("sliding precision: %+v %v", r, err)
		}
		r, err = c.SlidingCounter(ctx, key("sc"), 3, 10*time.Second, ratelimit.At(t0))
		if err != nil || !r.Allowed || r.Limit != 3 || r.Remaining != 2 {
			t.Fatalf("sliding counter: %+v %v", r, err)
		}
		// DELAY: the 4th of GCRA 3 1/s is granted as a reservation 1 s ahead.
		dk := key("delay")
		for i := 0; i < 3; i++ {
			if _, err := c.GCRA(ctx, dk, 3, 1, time.Second, ratelimit.At(t0)); err != nil {
				t.Fatal(err)
			}
		}
		r, err = c.GCRA(ctx, dk, 3, 1, time.Second, ratelimit.Delay(time.Second), ratelimit.At(t0))
		if err != nil || r.Granted != 1 || r.RetryAfterMs != 1000 {
			t.Fatalf("delay: %+v %v", r, err)
		}
		if _, err := c.Fixed(ctx, fx, ratelimit.Fixed{Limit: 2, Window: time.Minute}, ratelimit.Delay(time.Second)); err == nil {
			t.Fatal("DELAY on RL.FIXED is refused")
		}
	})
}

// RL.ALL with CHARGE and NAME: requests and tokens in one call, all or nothing.
func TestAllDetail(t *testing.T) {
	protocols(t, func(t *testing.T, c *ratelimit.Client, rdb *redis.Client, key func(string) string) {
		t0 := base()
		rps, tpm := "{"+key("u")+"}:rps", "{"+key("u")+"}:tpm"
		specs := []ratelimit.Spec{
			{Key: rps, Limiter: ratelimit.GCRA{Burst: 2, Rate: 1, Period: time.Second, Name: "rps"}},
			{Key: tpm, Limiter: ratelimit.TokenBucket{Capacity: 10, Refill: 1, Period: time.Second, Charge: ratelimit.Units(4), Name: "tpm"}},
		}
		r, err := c.CheckAll(ctx, specs, ratelimit.At(t0), ratelimit.Detail())
		check(t, "checkall", r, err, want{true, 1, 2, 1, 0, 4000})
		if n, _ := rdb.Exists(ctx, rps, tpm).Result(); n != 0 {
			t.Fatal("RL.CHECKALL wrote")
		}
		r, err = c.All(ctx, specs, ratelimit.At(t0), ratelimit.Detail())
		check(t, "all 1", r, err, want{true, 1, 2, 1, 0, 4000})
		wantD := []ratelimit.LimiterDetail{
			{Name: "rps", Key: rps, Cost: 1, Granted: 1, Limit: 2, Remaining: 1, RetryAfterMs: 0, ResetAfterMs: 1000, WindowMs: 2000},
			{Name: "tpm", Key: tpm, Cost: 4, Granted: 4, Limit: 10, Remaining: 6, RetryAfterMs: 0, ResetAfterMs: 4000, WindowMs: 10000},
		}
		if !r.Detailed() || r.Reason != "granted" || r.DeniedBy != "" || !reflect.DeepEqual(r.Limiters, wantD) {
			t.Fatalf("detail: %+v", r)
		}
		if specs[0].Limiter.WindowDuration() != 2*time.Second || specs[1].Limiter.WindowDuration() != 10*time.Second {
			t.Fatal("a limiter's window differs from the reply's window_ms")
		}
		r, err = c.All(ctx, specs, ratelimit.At(t0))
		check(t, "all 2", r, err, want{true, 1, 2, 0, 0, 8000})
		r, err = c.All(ctx, specs, ratelimit.At(t0), ratelimit.Detail())
		check(t, "all 3", r, err, want{false, 0, 2, 0, 2000, 8000})
		if r.Reason != "limit" || r.DeniedBy != "rps" || r.Limiters[1].RetryAfterMs != 2000 {
			t.Fatalf("denied detail: %+v", r)
		}
		// SHADOW lets it through, says who would have denied.
		r, err = c.All(ctx, specs, ratelimit.At(t0), ratelimit.Detail(), ratelimit.Shadow())
		if err != nil || !r.Allowed || r.Reason != "shadow" || r.DeniedBy != "rps" {
			t.Fatalf("shadow: %+v %v", r, err)
		}
		// RL.CHECK never writes.
		r, err = c.Check(ctx, key("chk"), ratelimit.GCRA{Burst: 2, Rate: 1, Period: time.Second}, ratelimit.At(t0))
		check(t, "check", r, err, want{true, 1, 2, 1, 0, 1000})
		if n, _ := rdb.Exists(ctx, key("chk")).Result(); n != 0 {
			t.Fatal("RL.CHECK wrote")
		}
	})
}

// HOLD then RL.SETTLE: below the hold gives back, above it charges (debt).
func TestHoldSettle(t *testing.T) {
	protocols(t, func(t *testing.T, c *ratelimit.Client, _ *redis.Client, key func(string) string) {
		t0 := base()
		k := key("h")
		r, err := c.GCRA(ctx, k, 10, 10, time.Second, ratelimit.Cost(5), ratelimit.Dedup("r1"), ratelimit.Hold(30*time.Second), ratelimit.At(t0))
		check(t, "hold", r, err, want{true, 5, 10, 5, 0, 500})
		rs, err := c.Settle(ctx, []string{k, key("missing")}, "r1", []int64{2, 1}, t0)
		if err != nil || len(rs) != 2 || rs[1] != nil {
			t.Fatalf("settle: %v %v", rs, err)
		}
		check(t, "settle", rs[0], nil, want{true, 2, 10, 8, 0, 200})
		rs, err = c.Settle(ctx, []string{k}, "r1", []int64{7}, t0)
		check(t, "settle again", rs[0], err, want{true, 2, 10, 8, 0, 200})

		k2 := key("debt")
		if _, err := c.GCRA(ctx, k2, 10, 10, time.Second, ratelimit.Cost(5), ratelimit.Dedup("r2"), ratelimit.Hold(30*time.Second), ratelimit.At(t0)); err != nil {
			t.Fatal(err)
		}
		rs, err = c.Settle(ctx, []string{k2}, "r2", []int64{15}, t0)
		check(t, "settle debt", rs[0], err, want{false, 15, 10, 0, 600, 1500})
		if _, err := c.GCRA(ctx, k2, 10, 10, time.Second, ratelimit.Hold(time.Second)); err == nil {
			t.Fatal("Hold without Dedup is refused")
		}
	})
}

func TestPolicies(t *testing.T) {
	protocols(t, func(t *testing.T, c *ratelimit.Client, _ *redis.Client, key func(string) string) {
		t0 := base()
		v1, err := c.PolicySet(ctx, "free", []ratelimit.Limiter{ratelimit.GCRA{Burst: 2, Rate: 1, Period: time.Second}}, ratelimit.PolicyOptions{Desc: "free tier"})
		if err != nil || v1 < 1 {
			t.Fatalf("set: %d %v", v1, err)
		}
		r, err := c.Limit(ctx, key("p"), "free", ratelimit.At(t0), ratelimit.Detail())
		check(t, "limit", r, err, want{true, 1, 2, 1, 0, 1000})
		if r.Limiters[0].Policy != "free" {
			t.Fatalf("policy in detail: %+v", r.Limiters)
		}
		def, err := c.PolicyGet(ctx, "free")
		if err != nil || def.Desc != "free tier" || def.Shadow || !reflect.DeepEqual(def.Args, []string{"GCRA", "2", "1", "1000ms", "DESC", "free tier"}) {
			t.Fatalf("get: %+v %v", def, err)
		}
		two := []ratelimit.Limiter{
			ratelimit.GCRA{Burst: 1, Rate: 1, Period: time.Second, Name: "burst"},
			ratelimit.Fixed{Limit: 100, Calendar: ratelimit.Day, TZ: "UTC", Name: "daily"},
		}
		v2, err := c.PolicySet(ctx, "two", two, ratelimit.PolicyOptions{Shadow: true})
		if err != nil || v2 <= v1 {
			t.Fatalf("versions grow: %d then %d (%v)", v1, v2, err)
		}
		keys := []string{"{" + key("u") + "}:b", "{" + key("u") + "}:d"}
		if r, err = c.AllPolicy(ctx, keys, "two", ratelimit.Detail()); err != nil || !r.Allowed || len(r.Limiters) != 2 || r.Limiters[1].Name != "daily" {
			t.Fatalf("all policy: %+v %v", r, err)
		}
		// The policy is SHADOW: the second call in the same second passes, reason shadow.
		if r, err = c.AllPolicy(ctx, keys, "two", ratelimit.Detail()); err != nil || !r.Allowed || r.Reason != "shadow" {
			t.Fatalf("shadow policy: %+v %v", r, err)
		}
		if r, err = c.CheckAllPolicy(ctx, keys, "two"); err != nil || r.Limit == 0 {
			t.Fatalf("checkall policy: %+v %v", r, err)
		}
		list, err := c.PolicyList(ctx)
		if err != nil || list["free"] != v1 || list["two"] != v2 {
			t.Fatalf("list: %v %v", list, err)
		}
		dump, err := c.PolicyDump(ctx)
		if err != nil || len(dump) == 0 {
			t.Fatalf("dump: %v", err)
		}
		if ok, err := c.PolicyDel(ctx, "free"); !ok || err != nil {
			t.Fatalf("del: %v %v", ok, err)
		}
		_, err = c.Limit(ctx, key("p"), "free")
		if !errors.Is(err, ratelimit.ErrUnknownPolicy) {
			t.Fatalf("unknown policy: %v", err)
		}
		if def, err := c.PolicyGet(ctx, "free"); def != nil || err != nil {
			t.Fatalf("get of a deleted policy: %+v %v", def, err)
		}
		if err := c.PolicyRestore(ctx, dump, true); err != nil {
			t.Fatal(err)
		}
		if def, err := c.PolicyGet(ctx, "free"); err != nil || def == nil || def.Desc != "free tier" {
			t.Fatalf("restored: %+v %v", def, err)
		}
	})
}

func TestLeases(t *testing.T) {
	protocols(t, func(t *testing.T, c *ratelimit.Client, _ *redis.Client, key func(string) string) {
		k := key("c")
		r, err := c.Acquire(ctx, k, 1, 10*time.Second, "a")
		if err != nil || !r.Allowed || r.Remaining != 0 {
			t.Fatalf("acquire: %+v %v", r, err)
		}
		done := make(chan *ratelimit.Result, 1)
		errc := make(chan error, 1)
		go func() {
			r, err := c.Acquire(ctx, k, 1, 10*time.Second, "b", ratelimit.Wait(2*time.Second))
			done <- r
			errc <- err
		}()
		time.Sleep(150 * time.Millisecond)
		if n, err := c.Release(ctx, k, "a"); n != 1 || err != nil {
			t.Fatalf("release: %d %v", n, err)
		}
		if r, err := <-done, <-errc; err != nil || !r.Allowed {
			t.Fatalf("WAIT: %+v %v", r, err)
		}
		r, err = c.Acquire(ctx, k, 1, 10*time.Second, "c", ratelimit.Wait(100*time.Millisecond))
		if err != nil || r.Allowed {
			t.Fatalf("WAIT timeout: %+v %v", r, err)
		}
		k2 := key("lease")
		l, err := c.Lease(ctx, k2, 1, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var le *ratelimit.LimitedError
		if _, err := c.Lease(ctx, k2, 1, 10*time.Second); !errors.Is(err, ratelimit.ErrLimited) || !errors.As(err, &le) || le.Result.Allowed {
			t.Fatalf("second lease: %v", err)
		}
		if r, err := l.Renew(ctx); err != nil || !r.Allowed {
			t.Fatalf("renew: %+v %v", r, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lease(ctx, k2, 1, 10*time.Second); err != nil {
			t.Fatalf("after release: %v", err)
		}
	})
}

func TestOtherCommands(t *testing.T) {
	protocols(t, func(t *testing.T, c *ratelimit.Client, _ *redis.Client, key func(string) string) {
		t0 := base()
		k := key("r")
		if _, err := c.GCRA(ctx, k, 3, 1, time.Second, ratelimit.Cost(3), ratelimit.At(t0)); err != nil {
			t.Fatal(err)
		}
		r, err := c.Refund(ctx, k, 2, ratelimit.At(t0))
		check(t, "refund", r, err, want{true, 2, 3, 2, 0, 1000})
		if r, err := c.Refund(ctx, key("none"), 1); r != nil || err != nil {
			t.Fatalf("refund of a missing key: %+v %v", r, err)
		}
		info, err := c.Info(ctx, k)
		if err != nil || info.Algorithm != "gcra" {
			t.Fatalf("info: %+v %v", info, err)
		}
		if n, ok := info.Int("ttl_ms"); !ok || n <= 0 {
			t.Fatalf("info ttl_ms: %+v", info.Fields)
		}
		// RL.INFO reads at the server's clock, 30 s after the calls at t0: fresh again.
		if ir := info.Result(); ir == nil || ir.Limit != 3 || ir.Remaining != 3 || ir.ResetAfterMs != 0 {
			t.Fatalf("info result: %+v", ir)
		}
		if info, err := c.Info(ctx, key("none")); info != nil || err != nil {
			t.Fatalf("info of a missing key: %+v %v", info, err)
		}
		bk := key("b")
		d, err := c.Block(ctx, bk, 5*time.Second)
		if err != nil || d != 5*time.Second {
			t.Fatalf("block: %v %v", d, err)
		}
		r, err = c.GCRA(ctx, bk, 3, 1, time.Second)
		if err != nil || r.Allowed || r.RetryAfter <= 2*time.Second || r.RetryAfter > 5*time.Second {
			t.Fatalf("blocked: %+v %v", r, err)
		}
		if ok, err := c.Unblock(ctx, bk); !ok || err != nil {
			t.Fatalf("unblock: %v %v", ok, err)
		}
		sk := key("s")
		for i := int64(1); i <= 2; i++ {
			sc, err := c.StreamCount(ctx, sk, 10*time.Second, 1, 2)
			if err != nil || !sc.Allowed || sc.Total != i {
				t.Fatalf("streamcount: %+v %v", sc, err)
			}
		}
		if sc, err := c.StreamCount(ctx, sk, 10*time.Second, 1, 2); err != nil || sc.Allowed || sc.Total != -1 {
			t.Fatalf("streamcount denied: %+v %v", sc, err)
		}
		th, err := c.Throttle(ctx, key("t"), 1, 1, 1, 1)
		if err != nil || th.Limited || !th.Allowed() || th.Limit != 2 || th.Remaining != 1 || th.RetryAfterS != -1 {
			t.Fatalf("throttle: %+v %v", th, err)
		}
	})
}

func TestErrors(t *testing.T) {
	protocols(t, func(t *testing.T, c *ratelimit.Client, rdb *redis.Client, key func(string) string) {
		k := key("str")
		rdb.Set(ctx, k, "x", 0)
		_, err := c.GCRA(ctx, k, 1, 1, time.Second)
		var re redis.Error
		if !errors.Is(err, ratelimit.ErrWrongType) || !errors.As(err, &re) {
			t.Fatalf("WRONGTYPE on a string: %v", err)
		}
		g := key("g")
		if _, err := c.GCRA(ctx, g, 1, 1, time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err = c.SlidingCounter(ctx, g, 1, time.Second); !errors.Is(err, ratelimit.ErrWrongType) {
			t.Fatalf("WRONGTYPE on another algorithm: %v", err)
		}
		if _, err := c.GCRA(ctx, g, 0, 1, time.Second); err == nil {
			t.Fatal("burst 0 is refused")
		}
		if _, err := c.GCRA(ctx, g, 1, 1, 1500*time.Microsecond); err == nil {
			t.Fatal("a sub-ms period is refused")
		}
		if err := c.CheckModule(ctx); err != nil {
			t.Fatal(err)
		}
	})
	bare := testserver.Start(t, "")
	c := ratelimit.New(bare.Client(t, 3), ratelimit.WithBackend(ratelimit.BackendModule))
	_, err := c.GCRA(ctx, "k", 1, 1, time.Second)
	if !errors.Is(err, ratelimit.ErrModuleNotLoaded) {
		t.Fatalf("no module: %v", err)
	}
	if err := c.CheckModule(ctx); !errors.Is(err, ratelimit.ErrModuleNotLoaded) {
		t.Fatalf("CheckModule without the module: %v", err)
	}
}
