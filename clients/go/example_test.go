package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

func ExampleClient_GCRA() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c := ratelimit.New(rdb)

	// 10 requests at once, then 5 per second.
	r, err := c.GCRA(ctx, "example:user:42", 10, 5, time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Allowed, r.Remaining, r.RetryAfter, r.ResetAfter)
	// Output: true 9 0s 200ms
}

func ExampleClient_All() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c := ratelimit.New(rdb)

	// Requests per minute and tokens per minute in one atomic call: all or nothing.
	r, err := c.All(ctx, []ratelimit.Spec{
		{Key: "{example:org:7}:rpm", Limiter: ratelimit.GCRA{Burst: 60, Rate: 60, Period: time.Minute, Name: "rpm"}},
		{Key: "{example:org:7}:tpm", Limiter: ratelimit.TokenBucket{Capacity: 90000, Refill: 1500, Period: time.Second,
			Charge: ratelimit.Units(3000), Name: "tpm"}},
	}, ratelimit.Detail())
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Allowed, r.Reason)
	for _, l := range r.Limiters {
		fmt.Println(l.Name, l.Cost, l.Remaining)
	}
	// Output:
	// true granted
	// rpm 1 59
	// tpm 3000 87000
}

func ExampleClient_Settle() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c := ratelimit.New(rdb)

	// Reserve 4000 tokens for an LLM call, then settle with the 3150 it really used.
	key := "example:tokens:42"
	r, err := c.TokenBucket(ctx, key, 100000, 1000, time.Second, ratelimit.Cost(4000),
		ratelimit.Dedup("call-1"), ratelimit.Hold(time.Minute))
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Allowed, r.Remaining)
	rs, err := c.Settle(ctx, []string{key}, "call-1", []int64{3150})
	if err != nil {
		panic(err)
	}
	fmt.Println(rs[0].Granted, rs[0].Remaining >= 96850)
	// Output:
	// true 96000
	// 3150 true
}

func ExampleNewMiddleware() {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	limits, err := ratelimit.NewMiddleware(ratelimit.New(rdb), ratelimit.HTTPOptions{
		Name:    "api",
		Timeout: 2 * time.Second, // the bound on one limiter call (500ms by default)
		Limits: map[string]ratelimit.Limiter{
			"burst": ratelimit.MustParseLimit("10/second"),
			"daily": ratelimit.Fixed{Limit: 10000, Calendar: ratelimit.Day, TZ: "UTC"},
		},
	})
	if err != nil {
		panic(err)
	}
	defer limits.Close()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	handler := limits.Handler(hello) // http.ListenAndServe(":8080", handler)

	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "192.0.2.1:5000"
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get("RateLimit-Policy"))
	// Output: 200 "burst";q=10;w=1, "daily";q=10000;w=86400
}
