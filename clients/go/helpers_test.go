package ratelimit_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

// shared is one server with the module for the package's tests and examples.
var shared *testserver.Server

// addr is the address of the examples' server.
var addr string

func server(t *testing.T) *testserver.Server { return shared }

func TestMain(m *testing.M) {
	s, err := testserver.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "no server with the module:", err)
		os.Exit(1)
	}
	shared, addr = s, s.Addr
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

// protocols runs f once with RESP2 and once with RESP3, each on its own keys.
func protocols(t *testing.T, f func(t *testing.T, c *ratelimit.Client, rdb *redis.Client, key func(string) string)) {
	s := server(t)
	for _, p := range []int{2, 3} {
		p := p
		t.Run(fmt.Sprintf("RESP%d", p), func(t *testing.T) {
			rdb := s.Client(t, p)
			// The reply's shape proves the protocol: a map under RESP3, an array under RESP2.
			v, err := rdb.Do(ctx, "RL.CHECK", "protocol-probe", "GCRA", 1, 1, "1s").Result()
			if _, isMap := v.(map[any]any); err != nil || isMap != (p == 3) {
				t.Fatalf("RESP%d: the reply is a %T (%v)", p, v, err)
			}
			key := func(k string) string { return fmt.Sprintf("%s:%s:resp%d", t.Name(), k, p) }
			f(t, ratelimit.New(rdb), rdb, key)
		})
	}
}

var ctx = context.Background()

// base is a time 30 s behind the server's clock (AT may be up to 60 s behind), in whole ms.
func base() time.Time { return time.Now().Add(-30 * time.Second).Truncate(time.Millisecond) }

type want struct {
	allowed             bool
	granted, limit, rem int64
	retryMs, resetMs    int64
}

func check(t *testing.T, what string, r *ratelimit.Result, err error, w want) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	got := want{r.Allowed, r.Granted, r.Limit, r.Remaining, r.RetryAfterMs, r.ResetAfterMs}
	if got != w {
		t.Fatalf("%s: got %+v, want %+v", what, got, w)
	}
	if r.Never != (w.retryMs == -1) {
		t.Fatalf("%s: Never %v with retry_after_ms %d", what, r.Never, w.retryMs)
	}
	if !r.Never && (r.RetryAfter != time.Duration(w.retryMs)*time.Millisecond || r.ResetAfter != time.Duration(w.resetMs)*time.Millisecond) {
		t.Fatalf("%s: durations %v %v do not match the ms", what, r.RetryAfter, r.ResetAfter)
	}
}
