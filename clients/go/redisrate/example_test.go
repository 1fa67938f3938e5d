package redis_rate_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
	redis_rate "github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"
)

var addr string

func TestMain(m *testing.M) {
	s, err := testserver.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "no server with the module:", err)
		os.Exit(1)
	}
	addr = s.Addr
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

func ExampleNewLimiter() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	_ = rdb.FlushDB(ctx).Err()

	limiter := redis_rate.NewLimiter(rdb)
	res, err := limiter.Allow(ctx, "project:123", redis_rate.PerSecond(10))
	if err != nil {
		panic(err)
	}
	fmt.Println("allowed", res.Allowed, "remaining", res.Remaining)
	// Output: allowed 1 remaining 9
}
