package ratelimit_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

// The embedded script is the repository's lua/ratelimit.lua byte for byte (scripts/sync-lua.sh
// copies it): no fork.
func TestScriptIsTheRepositorys(t *testing.T) {
	repo, err := os.ReadFile("../../lua/ratelimit.lua")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(repo, []byte(ratelimit.ScriptSource())) {
		t.Fatal("clients/go/ratelimit.lua differs from lua/ratelimit.lua: run scripts/sync-lua.sh")
	}
}

// On a server without the module, BackendAuto uses the script (said once in the log), on keys of
// its own; everything the script cannot do is an error naming the module.
func TestScriptBackendWithoutTheModule(t *testing.T) {
	bare := testserver.Start(t, "")
	for _, protocol := range []int{2, 3} {
		rdb := bare.Client(t, protocol)
		rdb.FlushAll(ctx)
		var log bytes.Buffer
		c := ratelimit.New(rdb, ratelimit.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		var remaining []int64
		for i := 0; i < 4; i++ {
			r, err := c.GCRA(ctx, "u", 3, 1, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			remaining = append(remaining, r.Remaining)
			if i == 3 && (r.Allowed || r.RetryAfter < 59*time.Minute) {
				t.Fatalf("the fourth is denied for an hour: %+v", r)
			}
		}
		if b, _ := c.Backend(ctx); b != ratelimit.BackendLua {
			t.Fatalf("backend %q", b)
		}
		if got := []int64{2, 1, 0, 0}; !equal(remaining, got) {
			t.Fatalf("remaining %v", remaining)
		}
		if n := strings.Count(log.String(), "script backend"); n != 1 {
			t.Fatalf("the choice is logged once: %q", log.String())
		}
		if keys := rdb.Keys(ctx, "*").Val(); len(keys) != 1 || keys[0] != "u:lua" {
			t.Fatalf("keys %v", keys)
		}
		if v := rdb.Get(ctx, "u:lua").Val(); !strings.HasPrefix(v, "rl1 gcra ") {
			t.Fatalf("value %q", v)
		}
		r, err := c.All(ctx, []ratelimit.Spec{
			{Key: "{a}:1", Limiter: ratelimit.GCRA{Burst: 10, Rate: 1, Period: time.Minute}},
			{Key: "{a}:2", Limiter: ratelimit.SlidingCounter{Limit: 3, Window: time.Minute}},
		}, ratelimit.Cost(2), ratelimit.Detail())
		if err != nil || !r.Allowed || r.Remaining != 1 || len(r.Limiters) != 2 {
			t.Fatalf("all: %+v %v", r, err)
		}
		r, err = c.Check(ctx, "t", ratelimit.TokenBucket{Capacity: 5, Refill: 1, Period: time.Minute}, ratelimit.Cost(6))
		if err != nil || !r.Never {
			t.Fatalf("check: %+v %v", r, err)
		}
		r, err = c.Fixed(ctx, "f", ratelimit.Fixed{Limit: 2, Window: time.Hour, Offset: 30 * time.Minute}, ratelimit.Cost(3), ratelimit.BestEffort())
		if err != nil || r.Granted != 2 || r.Remaining != 0 {
			t.Fatalf("fixed: %+v %v", r, err)
		}
		// The script cache flushed: the next call loads it again.
		rdb.ScriptFlush(ctx)
		if r, err := c.GCRA(ctx, "u2", 3, 1, time.Hour); err != nil || r.Remaining != 2 {
			t.Fatalf("after SCRIPT FLUSH: %+v %v", r, err)
		}
		for what, call := range map[string]func() error{
			"DEDUP":  func() error { _, err := c.GCRA(ctx, "k", 5, 1, time.Second, ratelimit.Dedup("x")); return err },
			"SHADOW": func() error { _, err := c.GCRA(ctx, "k", 5, 1, time.Second, ratelimit.Shadow()); return err },
			"BLOCK":  func() error { _, err := c.GCRA(ctx, "k", 5, 1, time.Second, ratelimit.Block(time.Minute)); return err },
			"AT":     func() error { _, err := c.GCRA(ctx, "k", 5, 1, time.Second, ratelimit.At(time.Now())); return err },
			"calendar": func() error {
				_, err := c.Fixed(ctx, "k", ratelimit.Fixed{Limit: 5, Calendar: ratelimit.Month})
				return err
			},
			"RL.LEAKYBUCKET": func() error { _, err := c.LeakyBucket(ctx, "k", 5, 1, time.Second); return err },
			"RL.SETTLE":      func() error { _, err := c.Settle(ctx, []string{"k"}, "id", []int64{1}); return err },
			"RL.BLOCK":       func() error { _, err := c.Block(ctx, "k", time.Minute); return err },
			"RL.ACQUIRE":     func() error { _, err := c.Acquire(ctx, "k", 5, time.Minute, "id"); return err },
			"RL.INFO":        func() error { _, err := c.Info(ctx, "k"); return err },
			"policies":       func() error { _, err := c.PolicyList(ctx); return err },
		} {
			err := call()
			if !errors.Is(err, ratelimit.ErrModuleRequired) || !strings.Contains(err.Error(), "redis-ratelimit module") ||
				!strings.Contains(err.Error(), what) {
				t.Fatalf("%s: %v", what, err)
			}
		}
		if n := rdb.Exists(ctx, "k", "k:lua").Val(); n != 0 {
			t.Fatalf("a refused call wrote %d keys", n)
		}
	}
}

// The net/http middleware on the script backend: limits, headers, and the refusal at
// construction of what the script cannot do.
func TestScriptBackendMiddleware(t *testing.T) {
	bare := testserver.Start(t, "")
	rdb := bare.Client(t, 3)
	c := ratelimit.New(rdb, ratelimit.WithBackend(ratelimit.BackendLua))
	m := newMW(t, c, ratelimit.HTTPOptions{Name: "lua", Limits: map[string]ratelimit.Limiter{
		"burst": ratelimit.GCRA{Burst: 2, Rate: 1, Period: time.Minute},
		"day":   ratelimit.SlidingCounter{Limit: 100, Window: 24 * time.Hour},
	}})
	var codes []int
	for i := 0; i < 3; i++ {
		rec := serve(t, m.Handler(okHandler), "10.0.0.1:1")
		codes = append(codes, rec.Code)
		if i == 2 && rec.Header().Get("Retry-After") != "60" {
			t.Fatalf("Retry-After: %v", rec.Header())
		}
		if i == 1 && (rec.Header().Get("RateLimit-Policy") != `"burst";q=2;w=120, "day";q=100;w=86400` ||
			!strings.HasPrefix(rec.Header().Get("RateLimit"), `"burst";r=0;t=60, "day";r=98;t=`)) {
			t.Fatalf("header fields: %v", rec.Header())
		}
	}
	if !equal(codes, []int{200, 200, 429}) {
		t.Fatalf("codes %v", codes)
	}
	if keys := rdb.Keys(ctx, "rl:lua:*").Val(); len(keys) != 2 || !strings.HasSuffix(keys[0], ":lua") {
		t.Fatalf("keys %v", keys)
	}
	_, err := ratelimit.NewMiddleware(c, ratelimit.HTTPOptions{Name: "r", Shadow: true,
		Limits: map[string]ratelimit.Limiter{"default": ratelimit.MustParseLimit("1/second")}})
	if !errors.Is(err, ratelimit.ErrModuleRequired) || !strings.Contains(err.Error(), "Shadow") {
		t.Fatalf("Shadow under the script: %v", err)
	}
	_, err = ratelimit.NewMiddleware(c, ratelimit.HTTPOptions{Name: "cal",
		Limits: map[string]ratelimit.Limiter{"default": ratelimit.Fixed{Limit: 5, Calendar: ratelimit.Day}}})
	if !errors.Is(err, ratelimit.ErrModuleRequired) || !strings.Contains(err.Error(), "calendar") {
		t.Fatalf("calendar under the script: %v", err)
	}
}

// BackendAuto on a server with the module uses the module; a Client forced onto the script
// beside it keeps its own keys.
func TestScriptBackendBesideTheModule(t *testing.T) {
	rdb := server(t).Client(t, 2)
	rdb.Del(ctx, "bm", "bm:lua")
	c := ratelimit.New(rdb)
	if r, err := c.GCRA(ctx, "bm", 2, 1, time.Minute); err != nil || r.Remaining != 1 {
		t.Fatalf("module: %+v %v", r, err)
	}
	if b, _ := c.Backend(ctx); b != ratelimit.BackendModule {
		t.Fatalf("backend %q", b)
	}
	lua := ratelimit.New(rdb, ratelimit.WithBackend(ratelimit.BackendLua))
	if r, err := lua.GCRA(ctx, "bm", 2, 1, time.Minute); err != nil || r.Remaining != 1 {
		t.Fatalf("script: %+v %v", r, err)
	}
	if rdb.Type(ctx, "bm:lua").Val() != "string" || rdb.Type(ctx, "bm").Val() == "string" {
		t.Fatal("the two backends share no key")
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// MetricsHook reports the script backend's replies as the module's: by command, acquired or
// limited.
func TestScriptBackendMetrics(t *testing.T) {
	bare := testserver.Start(t, "")
	rdb := bare.Client(t, 2)
	o := &counts{requests: map[string]int{}, near: map[string]int{}}
	rdb.AddHook(ratelimit.MetricsHook(o, 20))
	c := ratelimit.New(rdb, ratelimit.WithBackend(ratelimit.BackendLua))
	for i := 0; i < 3; i++ {
		if _, err := c.GCRA(ctx, "m", 2, 1, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if o.requests["rl.gcra  acquired"] != 2 || o.requests["rl.gcra  limited"] != 1 || o.near["rl.gcra "] != 1 {
		t.Fatalf("metrics of the script: %v %v", o.requests, o.near)
	}
}
