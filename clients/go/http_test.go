package ratelimit_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })

func serve(t *testing.T, h http.Handler, remote string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = remote
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func newMW(t *testing.T, c *ratelimit.Client, o ratelimit.HTTPOptions) *ratelimit.Middleware {
	t.Helper()
	if o.Timeout == 0 {
		// The tests share 2 busy cores under the race detector: the default bound (500ms) is
		// for production; TestHTTPFailures checks the bound itself.
		o.Timeout = 10 * time.Second
	}
	m, err := ratelimit.NewMiddleware(c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func TestHTTPOneLimit(t *testing.T) {
	c := ratelimit.New(server(t).Client(t, 3))
	m := newMW(t, c, ratelimit.HTTPOptions{Name: "one", Limits: map[string]ratelimit.Limiter{"default": ratelimit.MustParseLimit("3/minute")}})
	h := m.Handler(okHandler)
	for i, want := range []string{`"default";r=2;t=20`, `"default";r=1;t=20`, `"default";r=0;t=20`} {
		rec := serve(t, h, "10.0.0.1:1234")
		if rec.Code != 200 || rec.Header().Get("RateLimit") != want || rec.Header().Get("RateLimit-Policy") != `"default";q=3;w=60` {
			t.Fatalf("request %d: %d %v", i, rec.Code, rec.Header())
		}
	}
	rec := serve(t, h, "10.0.0.1:1234")
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "20" || rec.Header().Get("RateLimit") != `"default";r=0;t=20` {
		t.Fatalf("denied: %d %v", rec.Code, rec.Header())
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["status"] != float64(429) || body["retry_after"] != float64(20) ||
		rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("body: %s %v", rec.Body, err)
	}
	// Another client has its own key.
	if rec := serve(t, h, "10.0.0.2:1"); rec.Code != 200 {
		t.Fatalf("another client: %d", rec.Code)
	}
	if keys := m.Keys("10.0.0.1"); len(keys) != 1 || keys[0] != "rl:one:10.0.0.1" {
		t.Fatalf("keys %v", keys)
	}
}

func TestHTTPSeveralLimits(t *testing.T) {
	c := ratelimit.New(server(t).Client(t, 2))
	m := newMW(t, c, ratelimit.HTTPOptions{
		Limits: map[string]ratelimit.Limiter{
			"burst": ratelimit.GCRA{Burst: 2, Rate: 1, Period: time.Second},
			"daily": ratelimit.Fixed{Limit: 100, Calendar: ratelimit.Day},
		},
		Costs: map[string]func(*http.Request) (int64, error){"daily": func(*http.Request) (int64, error) { return 5, nil }},
	})
	keys := m.Keys("c1")
	if len(keys) != 2 || keys[0] != "rl:burst.gcra-2-1-1s+daily.fixed-100-day:{c1}:burst" {
		t.Fatalf("keys %v", keys)
	}
	rec := serve(t, m.Handler(okHandler), "c1:1")
	pol := rec.Header().Get("RateLimit-Policy")
	if rec.Code != 200 || !strings.HasPrefix(pol, `"burst";q=2;w=2, "daily";q=100;w=`) ||
		!strings.HasPrefix(rec.Header().Get("RateLimit"), `"burst";r=1;t=1, "daily";r=95;t=`) {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	serve(t, m.Handler(okHandler), "c1:1")
	rec = serve(t, m.Handler(okHandler), "c1:1")
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Header().Get("RateLimit"), `"daily";r=90;t=`) {
		t.Fatalf("denied: %d %v", rec.Code, rec.Header())
	}
}

func TestHTTPNeverAndKeys(t *testing.T) {
	c := ratelimit.New(server(t).Client(t, 3))
	m := newMW(t, c, ratelimit.HTTPOptions{
		Name:      "never",
		Limits:    map[string]ratelimit.Limiter{"default": ratelimit.MustParseLimit("3/m")},
		Cost:      func(*http.Request) (int64, error) { return 5, nil },
		Allowlist: []string{"10.9.9.9"},
		Headers:   ratelimit.HeadersLegacy,
	})
	rec := serve(t, m.Handler(okHandler), "10.0.0.1:1")
	if rec.Code != 413 || rec.Header().Get("Retry-After") != "" || rec.Header().Get("X-RateLimit-Limit") != "3" {
		t.Fatalf("never: %d %v", rec.Code, rec.Header())
	}
	if rec := serve(t, m.Handler(okHandler), "10.9.9.9:1"); rec.Code != 200 || rec.Header().Get("X-RateLimit-Limit") != "" {
		t.Fatalf("allowlist: %d", rec.Code)
	}
	bad := newMW(t, c, ratelimit.HTTPOptions{Name: "badkey", Limits: map[string]ratelimit.Limiter{"default": ratelimit.MustParseLimit("3/m")},
		Key: func(*http.Request) (string, error) { return "", errors.New("no user") }})
	if rec := serve(t, bad.Handler(okHandler), "10.0.0.1:1"); rec.Code != 500 {
		t.Fatalf("a key function's error is the application's: %d", rec.Code)
	}
	// No shared keys by accident.
	lim := map[string]ratelimit.Limiter{"default": ratelimit.MustParseLimit("7/hour")}
	a := newMW(t, c, ratelimit.HTTPOptions{Limits: lim})
	_ = a
	if _, err := ratelimit.NewMiddleware(c, ratelimit.HTTPOptions{Limits: lim}); err == nil || !strings.Contains(err.Error(), "Name") {
		t.Fatalf("the same derived key space twice: %v", err)
	}
	newMW(t, c, ratelimit.HTTPOptions{Limits: lim, Name: "shared"})
	newMW(t, c, ratelimit.HTTPOptions{Limits: lim, Name: "shared"})
	if _, err := ratelimit.ParseLimit("ten per minute"); err == nil {
		t.Fatal("a malformed limit string is refused")
	}
	for s, want := range map[string]ratelimit.GCRA{"10/second": {Burst: 10, Rate: 10, Period: time.Second},
		"5 per minute": {Burst: 5, Rate: 5, Period: time.Minute}, "2/d": {Burst: 2, Rate: 2, Period: 24 * time.Hour}} {
		if g, err := ratelimit.ParseLimit(s); err != nil || g != want {
			t.Fatalf("%s: %+v %v", s, g, err)
		}
	}
}

func TestHTTPHeaderStyles(t *testing.T) {
	c := ratelimit.New(server(t).Client(t, 3))
	lim := map[string]ratelimit.Limiter{"default": ratelimit.MustParseLimit("3/minute")}
	d7 := newMW(t, c, ratelimit.HTTPOptions{Name: "d7", Limits: lim, Headers: ratelimit.HeadersDraft7})
	rec := serve(t, d7.Handler(okHandler), "10.0.0.1:1")
	h := rec.Header()
	if h.Get("RateLimit-Limit") != "3" || h.Get("RateLimit-Remaining") != "2" || h.Get("RateLimit-Reset") != "20" ||
		h.Get("RateLimit-Policy") != "3;w=60" || h.Get("RateLimit") != "" {
		t.Fatalf("draft-7: %v", h)
	}
	pk := newMW(t, c, ratelimit.HTTPOptions{Name: "pk", Limits: lim, PartitionKey: true})
	a := serve(t, pk.Handler(okHandler), "10.0.0.1:1").Header().Get("RateLimit")
	b := serve(t, pk.Handler(okHandler), "10.0.0.2:1").Header().Get("RateLimit")
	if !strings.Contains(a, ";pk=:") || a[strings.Index(a, "pk="):] == b[strings.Index(b, "pk="):] || strings.Contains(a, "10.0.0.1") {
		t.Fatalf("pk: %q %q", a, b)
	}
	sl := newMW(t, c, ratelimit.HTTPOptions{Name: "slid", Limits: map[string]ratelimit.Limiter{"default": ratelimit.Sliding{Limit: 2, Window: time.Minute}}})
	if h := serve(t, sl.Handler(okHandler), "10.0.0.1:1").Header().Get("RateLimit"); h != `"default";r=1;t=60` {
		t.Fatalf("sliding t: %q", h)
	}
	lg := newMW(t, c, ratelimit.HTTPOptions{Name: "legacy", Limits: lim, Headers: ratelimit.HeadersLegacy})
	before := time.Now().Unix()
	h = serve(t, lg.Handler(okHandler), "10.0.0.1:1").Header()
	if reset, _ := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); reset < before+20 || reset > before+22 || h.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("legacy: %v", h)
	}
	none := newMW(t, c, ratelimit.HTTPOptions{Name: "none", Limits: lim, Headers: ratelimit.HeadersNone})
	if rec := serve(t, none.Handler(okHandler), "10.0.0.1:1"); len(rec.Header()) != 0 {
		t.Fatalf("none: %v", rec.Header())
	}
}

func TestHTTPFailures(t *testing.T) {
	lim := map[string]ratelimit.Limiter{"default": ratelimit.MustParseLimit("3/minute")}
	// Nothing listens on the port of a stopped server.
	down := testserver.Start(t, "")
	addr := down.Addr
	down.Stop()
	for _, mode := range []ratelimit.FailMode{ratelimit.FailClosed, ratelimit.FailOpen} {
		var hooked atomic.Int32
		c := ratelimit.New(redis.NewClient(&redis.Options{Addr: addr}))
		m := newMW(t, c, ratelimit.HTTPOptions{Name: "down" + string(rune('a'+mode)), Limits: lim, Fail: mode, Timeout: 200 * time.Millisecond,
			OnError: func(error, *http.Request) { hooked.Add(1) }})
		start := time.Now()
		rec := serve(t, m.Handler(okHandler), "10.0.0.1:1")
		if time.Since(start) > 2*time.Second || hooked.Load() != 1 {
			t.Fatalf("mode %d: took %v, hook called %d times", mode, time.Since(start), hooked.Load())
		}
		if want := map[ratelimit.FailMode]int{ratelimit.FailClosed: 503, ratelimit.FailOpen: 200}[mode]; rec.Code != want {
			t.Fatalf("mode %d: %d", mode, rec.Code)
		}
	}
	// A server without the module: the error says so, and the request fails closed.
	bare := testserver.Start(t, "")
	var got error
	m := newMW(t, ratelimit.New(bare.Client(t, 3), ratelimit.WithBackend(ratelimit.BackendModule)), ratelimit.HTTPOptions{Name: "bare", Limits: lim,
		OnError: func(err error, _ *http.Request) { got = err }})
	if rec := serve(t, m.Handler(okHandler), "10.0.0.1:1"); rec.Code != 503 || !errors.Is(got, ratelimit.ErrModuleNotLoaded) ||
		!strings.Contains(got.Error(), "loadmodule") {
		t.Fatalf("no module: %d %v", rec.Code, got)
	}
}

func TestHTTPReserveShadowBlock(t *testing.T) {
	rdb := server(t).Client(t, 3)
	c := ratelimit.New(rdb)
	m := newMW(t, c, ratelimit.HTTPOptions{
		Name:    "reserve",
		Limits:  map[string]ratelimit.Limiter{"tokens": ratelimit.TokenBucket{Capacity: 10, Refill: 1, Period: time.Hour}},
		Cost:    func(*http.Request) (int64, error) { return 5, nil },
		Reserve: &ratelimit.Reserve{Hold: 30 * time.Second, Usage: func(*http.Request, int) map[string]int64 { return map[string]int64{"tokens": 2} }},
	})
	if rec := serve(t, m.Handler(okHandler), "10.0.0.1:1"); rec.Code != 200 || rec.Header().Get("RateLimit") != `"tokens";r=5;t=3600` {
		t.Fatalf("reserve: %d %v", rec.Code, rec.Header())
	}
	r, err := c.Check(ctx, m.Keys("10.0.0.1")[0], ratelimit.TokenBucket{Capacity: 10, Refill: 1, Period: time.Hour}, ratelimit.Cost(0))
	if err != nil || r.Remaining != 8 {
		t.Fatalf("settled at the usage: %+v %v", r, err)
	}
	sh := newMW(t, c, ratelimit.HTTPOptions{Name: "shadow", Shadow: true, Limits: map[string]ratelimit.Limiter{"default": ratelimit.MustParseLimit("1/hour")}})
	for i := 0; i < 3; i++ {
		if rec := serve(t, sh.Handler(okHandler), "10.0.0.1:1"); rec.Code != 200 {
			t.Fatalf("shadow denies nothing: %d", rec.Code)
		}
	}
	bl := newMW(t, c, ratelimit.HTTPOptions{Name: "block", Block: 10 * time.Minute, Limits: map[string]ratelimit.Limiter{"default": ratelimit.MustParseLimit("1/second")}})
	serve(t, bl.Handler(okHandler), "10.0.0.1:1")
	rec := serve(t, bl.Handler(okHandler), "10.0.0.1:1")
	// The denial blocks the key for 10 minutes: the answer already says so.
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "600" {
		t.Fatalf("denied and blocked: %d %v", rec.Code, rec.Header())
	}
}

func TestClientAddress(t *testing.T) {
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "[2001:db8:1234:5678::1]:443"
	req.Header.Set("X-Forwarded-For", "203.0.113.7, 198.51.100.2")
	if got := ratelimit.ClientAddress(req, 0, 0); got != "2001:db8:1234:5600::/56" {
		t.Fatalf("IPv6 /56: %s", got)
	}
	if got := ratelimit.ClientAddress(req, 1, 0); got != "198.51.100.2" {
		t.Fatalf("one trusted hop: %s", got)
	}
	if got := ratelimit.ClientAddress(req, 2, 0); got != "203.0.113.7" {
		t.Fatalf("two trusted hops: %s", got)
	}
}
