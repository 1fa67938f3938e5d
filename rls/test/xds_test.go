package test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cache "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	xdsserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// xdsServer is a management server serving RateLimitConfig resources over ADS, as Envoy Gateway
// serves them to its rate limit deployment.
type xdsServer struct {
	addr  string
	cache cache.SnapshotCache
}

func startXDS(t *testing.T) *xdsServer {
	t.Helper()
	sc := cache.NewSnapshotCache(true, cache.IDHash{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	srv := xdsserver.NewServer(ctx, sc, nil)
	gs := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(func() { gs.Stop(); cancel() })
	return &xdsServer{addr: l.Addr().String(), cache: sc}
}

func (x *xdsServer) set(t *testing.T, version string, cfgs ...*rlsconf.RateLimitConfig) {
	t.Helper()
	rs := make([]types.Resource, len(cfgs))
	for i, c := range cfgs {
		rs[i] = c
	}
	snap, err := cache.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: rs})
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"envoy-ratelimit"} {
		if err := x.cache.SetSnapshot(context.Background(), node, snap); err != nil {
			t.Fatal(err)
		}
	}
}

func perMinute(name, domain, key string, n uint32) *rlsconf.RateLimitConfig {
	return &rlsconf.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlsconf.RateLimitDescriptor{{
		Key:       key,
		RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: n},
	}}}
}

// TestXDSConfigSideBySide: configuration from an xDS management server (CONFIG_TYPE=GRPC_XDS_SOTW,
// what Envoy Gateway uses), for both services; an update applies, an invalid one is refused.
func TestXDSConfigSideBySide(t *testing.T) {
	r := startRedis(t)
	x := startXDS(t)
	x.set(t, "1", perMinute("eg-config", "eg", "client", 3))
	env := []string{"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL=" + x.addr, "CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit"}
	root, _ := configDir(t, nil)
	p := pair{ours: startOurs(t, r, root, env...), theirs: startUpstream(t, r, root, env...)}
	for i := 0; i < 4; i++ {
		got := p.same(t, fmt.Sprint("xds call ", i), "eg", D("client", "a"))
		if want := i < 3; (got.OverallCode == pb.RateLimitResponse_OK) != want {
			t.Fatalf("call %d: %v", i, got.OverallCode)
		}
	}
	x.set(t, "2", perMinute("eg-config", "eg", "client", 10))
	waitFor(t, "the updated limit on both", func() bool {
		return call(t, p.ours, "eg", D("client", "z")).Statuses[0].CurrentLimit.GetRequestsPerUnit() == 10 &&
			call(t, p.theirs, "eg", D("client", "z")).Statuses[0].CurrentLimit.GetRequestsPerUnit() == 10
	})
	// 3 granted before (the denied 4th is not counted by ours; envoyproxy/ratelimit counts it).
	if got := call(t, p.ours, "eg", D("client", "a")).Statuses[0]; got.Code != pb.RateLimitResponse_OK || got.LimitRemaining != 6 {
		t.Fatalf("after update: %v", got)
	}
	// Two resources for one domain without MERGE_DOMAIN_CONFIG: refused, version 2 stays.
	x.set(t, "3", perMinute("a", "eg", "client", 1), perMinute("b", "eg", "other", 1))
	waitFor(t, "config_load_error", func() bool { return strings.Contains(metrics(t, p.ours), "ratelimit_service_config_load_error 1\n") })
	time.Sleep(2500 * time.Millisecond) // the server sends the refused version again: counted once
	if m := metrics(t, p.ours); !strings.Contains(m, "ratelimit_service_config_load_error 1\n") {
		t.Fatalf("a refused version counted more than once:\n%s", m)
	}
	time.Sleep(100 * time.Millisecond)
	if l := call(t, p.ours, "eg", D("client", "y")).Statuses[0].CurrentLimit.GetRequestsPerUnit(); l != 10 {
		t.Fatalf("a refused update replaced the configuration: limit %d", l)
	}
}
