package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

// Through Redis Sentinel: a failover client, and a UniversalClient given a MasterName.
func TestSentinel(t *testing.T) {
	master := testserver.Start(t, testserver.Module())
	sentinel := testserver.StartSentinel(t, master.Addr)
	for _, p := range []int{2, 3} {
		clients := map[string]redis.UniversalClient{
			"failover":  redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{sentinel}, Protocol: p}),
			"universal": redis.NewUniversalClient(&redis.UniversalOptions{MasterName: "mymaster", Addrs: []string{sentinel}, Protocol: p}),
		}
		for name, rdb := range clients {
			c := ratelimit.New(rdb)
			t0 := base()
			k := fmt.Sprintf("sentinel:%s:%d", name, p)
			r, err := c.GCRA(ctx, k, 2, 1, time.Second, ratelimit.At(t0))
			check(t, name, r, err, want{true, 1, 2, 1, 0, 1000})
			r, err = c.All(ctx, []ratelimit.Spec{{Key: k, Limiter: ratelimit.GCRA{Burst: 2, Rate: 1, Period: time.Second}}}, ratelimit.At(t0))
			check(t, name+" all", r, err, want{true, 1, 2, 0, 0, 2000})
			rdb.Close()
		}
	}
}
