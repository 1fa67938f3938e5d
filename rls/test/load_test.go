package test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pbext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

const loadConfig = `domain: load
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 1000000
    descriptors:
      - key: path
        rate_limit:
          unit: second
          requests_per_unit: 1000
`

type loadResult struct {
	name          string
	sent, errors  int64
	rps           float64
	p50, p99, max time.Duration
	lat           []time.Duration
	elapsed       time.Duration
}

// merge joins the runs of one service: requests over the total time, percentiles over all.
func merge(rs []loadResult) loadResult {
	out := loadResult{name: rs[0].name}
	for _, r := range rs {
		out.sent += r.sent
		out.errors += r.errors
		out.lat = append(out.lat, r.lat...)
		out.elapsed += r.elapsed
	}
	sort.Slice(out.lat, func(a, b int) bool { return out.lat[a] < out.lat[b] })
	out.rps = float64(len(out.lat)) / out.elapsed.Seconds()
	if n := len(out.lat); n > 0 {
		out.p50, out.p99, out.max = out.lat[n/2], out.lat[n*99/100], out.lat[n-1]
	}
	return out
}

// drive sends requests at rate per second for d from a pool of workers (open loop: requests are
// due at fixed times; a service that falls behind shows as a lower rate and longer latencies).
func drive(s *Service, rate int, d time.Duration) loadResult {
	const workers = 64
	due := make(chan *pb.RateLimitRequest, rate)
	var mu sync.Mutex
	lat := make([]time.Duration, 0, int(float64(rate)*d.Seconds())+16)
	var errs, sent atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := []time.Duration{}
			for req := range due {
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := s.GRPC.ShouldRateLimit(ctx, req)
				cancel()
				if err != nil {
					errs.Add(1)
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	i := 0
	for now := range tick.C {
		if now.Sub(start) >= d {
			break
		}
		target := int(float64(rate) * now.Sub(start).Seconds())
		for ; i < target; i++ {
			ip := "10.0." + strconv.Itoa(i%7) + "." + strconv.Itoa(i%251)
			due <- &pb.RateLimitRequest{Domain: "load", Descriptors: []*pbext.RateLimitDescriptor{
				D("remote_address", ip), D("remote_address", ip, "path", "/p"+strconv.Itoa(i%13)),
			}}
			sent.Add(1)
		}
	}
	tick.Stop()
	close(due)
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	r := loadResult{name: s.Name, sent: sent.Load(), errors: errs.Load(), rps: float64(len(lat)) / elapsed.Seconds(), lat: lat, elapsed: elapsed}
	if n := len(lat); n > 0 {
		r.p50, r.p99, r.max = lat[n/2], lat[n*99/100], lat[n-1]
	}
	return r
}

// TestLoad runs both services on one Redis with the same configuration and the same request
// stream (two descriptors per request), one after the other, for RLS_LOAD_SECONDS each at
// RLS_LOAD_RPS (default 3000) and reports requests per second and latency percentiles.
func TestLoad(t *testing.T) {
	secs, _ := strconv.ParseFloat(os.Getenv("RLS_LOAD_SECONDS"), 64)
	if secs <= 0 {
		if os.Getenv("RLS_REQUIRE") == "1" {
			t.Fatal("RLS_LOAD_SECONDS is not set")
		}
		t.Skip("RLS_LOAD_SECONDS is not set")
	}
	rate := 3000
	if v, err := strconv.Atoi(os.Getenv("RLS_LOAD_RPS")); err == nil && v > 0 {
		rate = v
	}
	r := startRedis(t)
	root, _ := configDir(t, map[string]string{"load.yaml": loadConfig})
	ours := startOurs(t, r, root, "REDIS_POOL_SIZE=16")
	theirs := startUpstream(t, r, root, "REDIS_POOL_SIZE=16")
	d := time.Duration(secs * float64(time.Second))
	loadBefore := "?"
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		loadBefore = strings.Join(strings.Fields(string(la))[:3], " ")
	}
	for _, s := range []*Service{ours, theirs} {
		drive(s, rate/4, d/4) // warm up connections
	}
	// Two halves in the order ours, theirs, theirs, ours, so that a change of load on the
	// machine weighs on both alike.
	halves := map[string][]loadResult{}
	for _, s := range []*Service{ours, theirs, theirs, ours} {
		halves[s.Name] = append(halves[s.Name], drive(s, rate, d/2))
	}
	results := []loadResult{merge(halves[ours.Name]), merge(halves[theirs.Name])}
	out := fmt.Sprintf("load: %d requests/s offered for %v per service (two halves, alternating), 2 descriptors per request, one Redis, %d CPUs\n", rate, d, numCPU())
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		out += "load average before: " + loadBefore + ", after: " + strings.Join(strings.Fields(string(la))[:3], " ") + "\n"
	}
	out += fmt.Sprintf("%-22s %8s %8s %10s %10s %10s\n", "service", "sent", "errors", "rps", "p50", "p99")
	for _, x := range results {
		out += fmt.Sprintf("%-22s %8d %8d %10.0f %10v %10v\n", x.name, x.sent, x.errors, x.rps, x.p50.Round(time.Microsecond), x.p99.Round(time.Microsecond))
	}
	t.Log("\n" + out)
	if f := os.Getenv("RLS_LOAD_OUT"); f != "" {
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range results {
		if x.errors > 0 || x.rps < float64(rate)*0.5 {
			t.Errorf("%s: %d errors, %.0f rps of %d offered", x.name, x.errors, x.rps, rate)
		}
	}
}
