package ratelimit_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
	redis_rate "github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"
)

// A local Redis Cluster of 3 masters and 3 replicas, the module on every node.
func TestCluster(t *testing.T) {
	cl := testserver.StartCluster(t, testserver.Module())
	for _, p := range []int{2, 3} {
		p := p
		t.Run(fmt.Sprintf("RESP%d", p), func(t *testing.T) {
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs, Protocol: p})
			defer rdb.Close()
			c := ratelimit.New(rdb)
			t0 := base()
			// Keys in every slot range: each lands on its own master.
			for i := 0; i < 30; i++ {
				k := fmt.Sprintf("cl%d:user:%d", p, i)
				r, err := c.GCRA(ctx, k, 2, 1, time.Second, ratelimit.At(t0))
				check(t, k, r, err, want{true, 1, 2, 1, 0, 1000})
			}
			tag := fmt.Sprintf("{cl%d:u}", p)
			specs := []ratelimit.Spec{
				{Key: tag + ":s", Limiter: ratelimit.GCRA{Burst: 1, Rate: 1, Period: time.Second, Name: "s"}},
				{Key: tag + ":h", Limiter: ratelimit.Fixed{Limit: 100, Window: time.Hour, Name: "h"}},
			}
			r, err := c.All(ctx, specs, ratelimit.Detail(), ratelimit.Dedup("res"), ratelimit.Hold(time.Minute), ratelimit.Cost(1))
			if err != nil || !r.Allowed || len(r.Limiters) != 2 {
				t.Fatalf("RL.ALL: %+v %v", r, err)
			}
			rs, err := c.Settle(ctx, []string{tag + ":s", tag + ":h"}, "res", []int64{0, 0})
			if err != nil || len(rs) != 2 || rs[1].Remaining != 100 {
				t.Fatalf("RL.SETTLE: %+v %v", rs, err)
			}
			_, err = c.All(ctx, []ratelimit.Spec{
				{Key: fmt.Sprintf("cl%d:a", p), Limiter: ratelimit.GCRA{Burst: 1, Rate: 1, Period: time.Second}},
				{Key: fmt.Sprintf("cl%d:b", p), Limiter: ratelimit.GCRA{Burst: 1, Rate: 1, Period: time.Second}},
			})
			if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
				t.Fatalf("keys in two slots: %v", err)
			}
			// A policy is set on every master: keys of every slot find it.
			name := fmt.Sprintf("cluster_p%d", p)
			if _, err := c.PolicySet(ctx, name, []ratelimit.Limiter{ratelimit.GCRA{Burst: 5, Rate: 5, Period: time.Second}}, ratelimit.PolicyOptions{}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 30; i++ {
				if r, err := c.Limit(ctx, fmt.Sprintf("cl%d:pol:%d", p, i), name); err != nil || r.Remaining != 4 {
					t.Fatalf("policy on key %d: %+v %v", i, r, err)
				}
			}
			if ok, err := c.PolicyDel(ctx, name); !ok || err != nil {
				t.Fatalf("del: %v %v", ok, err)
			}
			// The drop-in and the middleware on the cluster.
			rl := redis_rate.NewLimiter(rdb)
			for i := 0; i < 10; i++ {
				res, err := rl.Allow(ctx, fmt.Sprintf("cl%d:rr:%d", p, i), redis_rate.PerSecond(3))
				if err != nil || res.Allowed != 1 || res.Remaining != 2 {
					t.Fatalf("drop-in: %+v %v", res, err)
				}
			}
			m := newMW(t, c, ratelimit.HTTPOptions{Name: fmt.Sprintf("cluster%d", p), Limits: map[string]ratelimit.Limiter{
				"burst": ratelimit.MustParseLimit("2/second"), "hourly": ratelimit.MustParseLimit("100/hour")}})
			for i := 0; i < 10; i++ {
				rec := serve(t, m.Handler(okHandler), fmt.Sprintf("10.1.0.%d:1", i))
				if rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("RateLimit"), `"hourly";r=99`) {
					t.Fatalf("middleware: %d %v", rec.Code, rec.Header())
				}
			}
		})
	}
}
