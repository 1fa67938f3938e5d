package test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pbext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redis/go-redis/v9"

	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/store"
)

// TestCrossSlotChargesNothingOnDenial runs the Redis Cluster path (one RL.ALL per hash slot with
// HOLD, then RL.SETTLE) on a standalone server: a denial in one slot gives back what another
// slot held, and granted requests stay charged after the hold's ttl.
func TestCrossSlotChargesNothingOnDenial(t *testing.T) {
	r := startRedis(t)
	root, _ := configDir(t, readmeExamples(t))
	ours := startOurs(t, r, root, "REDIS_GROUP_BY_SLOT=true", "RL_HOLD_TTL=300ms")
	narrowKey := "rls:messaging_message_type_marketing_to_number_2061111111_fixed"
	broadKey := "rls:messaging_to_number_2061111111_fixed"
	if store.Slot(narrowKey) == store.Slot(broadKey) {
		t.Fatal("the two keys share a slot; pick other values")
	}
	narrow := D("message_type", "marketing", "to_number", "2061111111")
	broad := D("to_number", "2061111111")
	for i := 0; i < 8; i++ {
		got := codesOf(call(t, ours, "messaging", narrow, broad))
		if i < 5 && got != "OK OK OK" || i >= 5 && got != "OVER_LIMIT OVER_LIMIT OK" {
			t.Fatalf("call %d: %s", i, got)
		}
	}
	time.Sleep(500 * time.Millisecond) // past the hold's ttl: settled units must stay charged
	o := call(t, ours, "messaging", broad)
	if o.Statuses[0].LimitRemaining != 94 {
		t.Fatalf("broad limit: remaining %d, want 94 (5 granted + 1)", o.Statuses[0].LimitRemaining)
	}
	if !strings.Contains(metrics(t, ours), "ratelimit_service_cross_slot_requests 8") {
		t.Fatalf("cross-slot requests not counted: %s", metrics(t, ours))
	}
}

// TestNegativeHitsRefund: is_negative_hits gives units back with RL.REFUND.
func TestNegativeHitsRefund(t *testing.T) {
	r := startRedis(t)
	root, _ := configDir(t, readmeExamples(t))
	ours := startOurs(t, r, root)
	d := D("azure", "x")
	for i := 0; i < 5; i++ {
		call(t, ours, "internal", d)
	}
	neg := D("azure", "x")
	neg.HitsAddend = wrapperspb.UInt64(3)
	neg.IsNegativeHits = true
	if got := call(t, ours, "internal", neg).Statuses[0].LimitRemaining; got != 98 {
		t.Fatalf("after refunding 3 of 5: remaining %d, want 98", got)
	}
	neg.HitsAddend = wrapperspb.UInt64(50)
	if got := call(t, ours, "internal", neg).Statuses[0].LimitRemaining; got != 100 {
		t.Fatalf("a refund never goes below zero used: remaining %d, want 100", got)
	}
}

// TestShadowModeAndMetrics: shadow descriptors never deny, are counted under shadow_mode, and
// /metrics uses envoyproxy/ratelimit's names.
func TestShadowModeAndMetrics(t *testing.T) {
	r := startRedis(t)
	root, _ := configDir(t, readmeExamples(t))
	ours := startOurs(t, r, root)
	startOfSecond()
	for i := 0; i < 12; i++ {
		if c := call(t, ours, "example6", D("service", "auth-service", "user", "user-a")).OverallCode; c != pb.RateLimitResponse_OK {
			t.Fatalf("shadow call %d: %v", i, c)
		}
	}
	for i := 0; i < 3; i++ {
		call(t, ours, "messaging", D("to_number", "1"))
	}
	m := metrics(t, ours)
	for _, want := range []string{
		`ratelimit_service_rate_limit_total_hits{domain="example6",key1="service",key2="user_user-a"} 12`,
		`ratelimit_service_rate_limit_shadow_mode{domain="example6",key1="service",key2="user_user-a"} 2`,
		`ratelimit_service_rate_limit_over_limit{domain="example6",key1="service",key2="user_user-a"} 2`,
		`ratelimit_service_rate_limit_within_limit{domain="example6",key1="service",key2="user_user-a"} 10`,
		`ratelimit_service_rate_limit_near_limit{domain="example6",key1="service",key2="user_user-a"} 2`,
		`ratelimit_service_rate_limit_total_hits{domain="messaging",key1="to_number"} 3`,
		`ratelimit_service_config_load_success 1`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(m)
	}
}

// TestMetricsCardinalityIsBounded: detailed_metric values past STATS_MAX_SERIES count together.
func TestMetricsCardinalityIsBounded(t *testing.T) {
	r := startRedis(t)
	root, _ := configDir(t, readmeExamples(t))
	ours := startOurs(t, r, root, "STATS_MAX_SERIES=5")
	for i := 0; i < 20; i++ {
		call(t, ours, "example8", D("key1", fmt.Sprint("v", i)))
	}
	m := metrics(t, ours)
	if n := strings.Count(m, "ratelimit_service_rate_limit_total_hits{"); n != 6 {
		t.Fatalf("%d total_hits series, want 5 + the overflow one:\n%s", n, m)
	}
	if !strings.Contains(m, `ratelimit_service_rate_limit_total_hits{domain="_overflow_",key1="_overflow_"} 15`) {
		t.Fatalf("overflow series missing:\n%s", m)
	}
}

// TestReloadOnChange: a changed file applies without a restart; a broken one keeps the last.
func TestReloadOnChange(t *testing.T) {
	r := startRedis(t)
	conf := "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: %d\n"
	root, dir := configDir(t, map[string]string{"d.yaml": fmt.Sprintf(conf, 2)})
	ours := startOurs(t, r, root)
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		if c := call(t, ours, "d", D("k", "v")).OverallCode; c != want {
			t.Fatalf("call %d: %v", i, c)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(fmt.Sprintf(conf, 5)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new limit", func() bool {
		return call(t, ours, "d", D("k", "w")).Statuses[0].CurrentLimit.GetRequestsPerUnit() == 5
	})
	if c := call(t, ours, "d", D("k", "v")).OverallCode; c != pb.RateLimitResponse_OK {
		t.Fatalf("raised limit still denies: %v", c)
	}
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    bogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "config_load_error", func() bool { return strings.Contains(metrics(t, ours), "ratelimit_service_config_load_error 1\n") })
	if l := call(t, ours, "d", D("k", "w")).Statuses[0].CurrentLimit.GetRequestsPerUnit(); l != 5 {
		t.Fatalf("a broken file replaced the configuration: limit %d", l)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisDown: with Redis gone, each FAILURE_MODE answers within the bounded timeout.
func TestRedisDown(t *testing.T) {
	r := startRedis(t)
	root, _ := configDir(t, readmeExamples(t))
	modes := map[string]*Service{}
	for _, m := range []string{"error", "open", "closed"} {
		modes[m] = startOurs(t, r, root, "FAILURE_MODE="+m, "REDIS_TIMEOUT=300ms")
		call(t, modes[m], "internal", D("azure", "x"))
	}
	checked := startOurs(t, r, root, "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION=true", "REDIS_TIMEOUT=300ms")
	r.proc.stop()
	waitFor(t, "/healthcheck to fail with Redis down", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthcheck", checked.HTTPPort))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusInternalServerError
	})
	for m, s := range modes {
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := s.GRPC.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "internal", Descriptors: []*pbext.RateLimitDescriptor{D("azure", "x")}})
		cancel()
		took := time.Since(t0)
		if took > 2*time.Second {
			t.Errorf("%s: answered after %v", m, took)
		}
		switch m {
		case "error":
			if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded {
				t.Errorf("error mode: %v %v", resp, err)
			}
		case "open":
			if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
				t.Errorf("open mode: %v %v", resp, err)
			}
		case "closed":
			if err != nil || resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
				t.Errorf("closed mode: %v %v", resp, err)
			}
		}
		if !strings.Contains(metrics(t, s), `ratelimit_service_should_rate_limit_error{err_type="redis_error"} 1`) {
			t.Errorf("%s: redis_error not counted", m)
		}
	}
}

// TestHTTPAndGracefulShutdown: /json and /healthcheck as envoyproxy/ratelimit serves them, and
// SIGTERM drains and exits cleanly.
func TestHTTPAndGracefulShutdown(t *testing.T) {
	r := startRedis(t)
	root, _ := configDir(t, readmeExamples(t))
	ours := startOurs(t, r, root, "SHUTDOWN_GRACE=2s")
	body := `{"domain": "edge_proxy_per_ip", "descriptors": [{"entries": [{"key": "remote_address", "value": "50.0.0.5"}]}]}`
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/json", ours.HTTPPort), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), `"overallCode":"OVER_LIMIT"`) {
		t.Fatalf("/json: %d %s", resp.StatusCode, b)
	}
	t0 := time.Now()
	if err := ours.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ours.proc.done:
	case <-time.After(5 * time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
	if code := ours.proc.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM: %s", code, ours.Logs())
	}
	t.Logf("stopped %v after SIGTERM", time.Since(t0))
}

// TestStatsd: USE_STATSD sends the same counters as statsd datagrams under envoyproxy/ratelimit's
// names (what Envoy Gateway's statsd exporter sidecar reads).
func TestStatsd(t *testing.T) {
	r := startRedis(t)
	root, _ := configDir(t, readmeExamples(t))
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	ours := startOurs(t, r, root, "USE_STATSD=true", "STATSD_HOST=127.0.0.1",
		fmt.Sprintf("STATSD_PORT=%d", udp.LocalAddr().(*net.UDPAddr).Port), "STATS_FLUSH_INTERVAL=100ms")
	for i := 0; i < 3; i++ {
		call(t, ours, "messaging", D("to_number", "1"))
	}
	sum := map[string]int{}
	buf := make([]byte, 2048)
	deadline := time.Now().Add(5 * time.Second)
	for (sum["ratelimit.service.rate_limit.messaging.to_number.total_hits"] < 3 || sum["ratelimit.service.rate_limit.messaging.to_number.within_limit"] < 3) && time.Now().Before(deadline) {
		_ = udp.SetReadDeadline(time.Now().Add(time.Second))
		n, _, err := udp.ReadFrom(buf)
		if err != nil {
			continue
		}
		line := string(buf[:n])
		name, rest, _ := strings.Cut(line, ":")
		var v int
		if _, err := fmt.Sscanf(rest, "%d|c", &v); err != nil {
			t.Fatalf("bad datagram %q", line)
		}
		sum[name] += v
	}
	if sum["ratelimit.service.rate_limit.messaging.to_number.total_hits"] != 3 || sum["ratelimit.service.rate_limit.messaging.to_number.within_limit"] != 3 {
		t.Fatalf("statsd counters: %v", sum)
	}
}

// TestRedisSentinel: REDIS_TYPE=sentinel with REDIS_URL=master_name,sentinel:port finds the master
// through a sentinel.
func TestRedisSentinel(t *testing.T) {
	r := startRedis(t)
	server := requireEnv(t, "RL_SERVER", "redis-server")
	sp := freePort(t)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor rlmaster 127.0.0.1 %d 1\n", sp, r.Port)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, server, nil, conf, "--sentinel")
	sc := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", sp)})
	defer sc.Close()
	waitFor(t, "the sentinel", func() bool {
		_, err := sc.GetMasterAddrByName(context.Background(), "rlmaster").Result()
		return err == nil
	})
	root, _ := configDir(t, readmeExamples(t))
	ours := startOurs(t, r, root, "REDIS_TYPE=sentinel", fmt.Sprintf("REDIS_URL=rlmaster,127.0.0.1:%d", sp))
	for i := 0; i < 2; i++ {
		call(t, ours, "internal", D("azure", "s"))
	}
	if got := call(t, ours, "internal", D("azure", "s")).Statuses[0].LimitRemaining; got != 97 {
		t.Fatalf("through the sentinel: remaining %d", got)
	}
	n, err := r.Client.Exists(context.Background(), "rls:internal_azure_s_fixed").Result()
	if err != nil || n != 1 {
		t.Fatalf("the key is not on the master: %v %v", n, err)
	}
}

// TestHitsAddendEdges: hits_addend 0 checks without charging; one above any limit (up to
// 2^64-1) is over the limit, never an error that a FAILURE_MODE could turn into a grant.
func TestHitsAddendEdges(t *testing.T) {
	r := startRedis(t)
	root, _ := configDir(t, readmeExamples(t))
	ours := startOurs(t, r, root, "FAILURE_MODE=open")
	zero := D("azure", "e")
	zero.HitsAddend = wrapperspb.UInt64(0)
	for i := 0; i < 3; i++ {
		if got := call(t, ours, "internal", zero).Statuses[0]; got.Code != pb.RateLimitResponse_OK || got.LimitRemaining != 100 {
			t.Fatalf("hits_addend 0: %v", got)
		}
	}
	huge := D("azure", "e")
	huge.HitsAddend = wrapperspb.UInt64(^uint64(0))
	if got := call(t, ours, "internal", huge); got.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("hits_addend 2^64-1: %v", got)
	}
	if m := metrics(t, ours); !strings.Contains(m, `err_type="redis_error"} 0`) {
		t.Fatalf("an error was counted: %s", m)
	}
}
