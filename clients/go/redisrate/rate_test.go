package redis_rate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	orig "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	redis_rate "github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"
)

func TestDropIn(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	l := redis_rate.NewLimiter(rdb)
	lim := redis_rate.PerMinute(2)
	for i := 1; i >= 0; i-- {
		res, err := l.Allow(ctx, "dropin", lim)
		if err != nil || res.Allowed != 1 || res.Remaining != i || res.RetryAfter != -1 || res.Limit != lim {
			t.Fatalf("allow: %+v %v", res, err)
		}
	}
	res, err := l.Allow(ctx, "dropin", lim)
	if err != nil || res.Allowed != 0 || res.Remaining != 0 || res.RetryAfter <= 29*time.Second || res.RetryAfter > 30*time.Second {
		t.Fatalf("denied: %+v %v", res, err)
	}
	// AllowN above the burst: redis_rate's RetryAfter, backlog + (n - burst)·T.
	res, err = l.AllowN(ctx, "dropin-n", lim, 3)
	if err != nil || res.Allowed != 0 || res.RetryAfter != 30*time.Second {
		t.Fatalf("above the burst: %+v %v", res, err)
	}
	res, err = l.AllowAtMost(ctx, "dropin", lim, 5)
	if err != nil || res.Allowed != 0 || res.RetryAfter <= 29*time.Second {
		t.Fatalf("at most, nothing left: %+v %v", res, err)
	}
	if err := l.Reset(ctx, "dropin"); err != nil {
		t.Fatal(err)
	}
	if res, err = l.AllowAtMost(ctx, "dropin", lim, 5); err != nil || res.Allowed != 2 || res.Remaining != 0 {
		t.Fatalf("at most after reset: %+v %v", res, err)
	}
	if n, _ := rdb.Exists(ctx, "rate:dropin").Result(); n != 1 {
		t.Fatal("the drop-in's keys are redis_rate's: rate:<key>")
	}
	// A period with a fraction of a ms keeps its emission interval exactly.
	res, err = l.Allow(ctx, "frac", redis_rate.Limit{Rate: 1, Burst: 1, Period: 1500 * time.Microsecond})
	if err != nil || res.Allowed != 1 || res.ResetAfter != 2*time.Millisecond {
		t.Fatalf("1.5ms: %+v %v", res, err)
	}
	if _, err := l.Allow(ctx, "zero", redis_rate.Limit{Rate: 0, Burst: 1, Period: time.Second}); err == nil {
		t.Fatal("Rate 0 is refused")
	}
	// A key redis_rate wrote holds a string: WRONGTYPE until it expires, or another prefix.
	if _, err := orig.NewLimiter(rdb).Allow(ctx, "old", orig.PerSecond(5)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(ctx, "old", redis_rate.PerSecond(5)); !errors.Is(err, ratelimit.ErrWrongType) {
		t.Fatalf("old key: %v", err)
	}
	if res, err := redis_rate.NewLimiterPrefix(rdb, "rl:rate:").Allow(ctx, "old", redis_rate.PerSecond(5)); err != nil || res.Allowed != 1 {
		t.Fatalf("another prefix: %+v %v", res, err)
	}
	if s := redis_rate.PerHour(3).String(); s != "3 req/h (burst 3)" || !(redis_rate.Limit{}).IsZero() {
		t.Fatalf("String %q", s)
	}
}
