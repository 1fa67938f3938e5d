package test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

var ratelimitLine = regexp.MustCompile(`^(ratelimit_service_rate_limit_[a-z_]+)\{([^}]*)\} ([0-9.e+]+)$`)

// rateLimitSeries reads the per-descriptor counters of a Prometheus page as "name{labels}" ->
// value, labels sorted, zero values left out.
func rateLimitSeries(page string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(page, "\n") {
		m := ratelimitLine.FindStringSubmatch(line)
		if m == nil || m[3] == "0" {
			continue
		}
		labels := strings.Split(m[2], ",")
		sort.Strings(labels)
		out[m[1]+"{"+strings.Join(labels, ",")+"}"] = m[3]
	}
	return out
}

func get(t *testing.T, url string) string {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// TestSameMetricsAsUpstream: after the same requests, /metrics of both services hold the same
// per-descriptor counters (names, labels, values); envoyproxy/ratelimit's through its own
// Prometheus mapping (USE_PROMETHEUS).
func TestSameMetricsAsUpstream(t *testing.T) {
	r := startRedis(t)
	root, _ := configDir(t, readmeExamples(t))
	promPort := freePort(t)
	p := pair{ours: startOurs(t, r, root),
		theirs: startUpstream(t, r, root, "USE_PROMETHEUS=true", fmt.Sprintf("PROMETHEUS_ADDR=127.0.0.1:%d", promPort),
			"STATS_FLUSH_INTERVAL=100ms")}
	startOfSecond()
	for i := 0; i < 12; i++ {
		p.same(t, "shadow", "example6", D("service", "auth-service", "user", "user-a"))
		p.same(t, "ip", "edge_proxy_per_ip", D("remote_address", "10.0.0.1"))
	}
	for i := 0; i < 7; i++ {
		p.same(t, "marketing", "messaging", D("message_type", "marketing", "to_number", "1"))
		p.same(t, "azure", "internal", D("azure", "x"))
	}
	ours := rateLimitSeries(metrics(t, p.ours))
	var theirs map[string]string
	deadline := time.Now().Add(5 * time.Second)
	for {
		theirs = rateLimitSeries(get(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort)))
		if fmt.Sprint(theirs) == fmt.Sprint(ours) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if fmt.Sprint(theirs) != fmt.Sprint(ours) {
		t.Fatalf("per-descriptor counters differ:\nours:\n%s\nenvoyproxy/ratelimit:\n%s", dump(ours), dump(theirs))
	}
	if len(ours) < 10 {
		t.Fatalf("only %d series: %v", len(ours), ours)
	}
	t.Logf("%d identical series, e.g. %s", len(ours), dump(ours))
}

func dump(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s %s\n", k, m[k])
	}
	return b.String()
}
