// Package xds receives the service's configuration from an xDS management server over ADS
// (state of the world), as envoyproxy/ratelimit does with CONFIG_TYPE=GRPC_XDS_SOTW: resources
// of type ratelimit.config.ratelimit.v3.RateLimitConfig, acknowledged when they load and refused
// (NACK, the previous configuration staying in force) when they do not.
package xds

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/config"
)

// TypeURL is the type of the configuration resources.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// Options configure the subscription.
type Options struct {
	NodeID string
	Merge  bool          // MERGE_DOMAIN_CONFIG
	Retry  time.Duration // wait before reconnecting (CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL)
	Log    *slog.Logger
}

// Watch subscribes on conn until ctx ends, reconnecting after errors, and calls apply with each
// configuration that loads and fail with each that does not.
func Watch(ctx context.Context, conn *grpc.ClientConn, o Options, apply func(*config.Config), fail func(error)) {
	if o.Retry <= 0 {
		o.Retry = 3 * time.Second
	}
	client := discovery.NewAggregatedDiscoveryServiceClient(conn)
	for ctx.Err() == nil {
		err := stream(ctx, client, o, apply, fail)
		if ctx.Err() != nil {
			return
		}
		o.Log.Warn("xds stream ended; reconnecting", "error", err, "in", o.Retry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(o.Retry):
		}
	}
}

func stream(ctx context.Context, client discovery.AggregatedDiscoveryServiceClient, o Options,
	apply func(*config.Config), fail func(error)) error {
	s, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	node := &core.Node{Id: o.NodeID}
	version, refused := "", ""
	if err := s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: TypeURL}); err != nil {
		return err
	}
	for {
		resp, err := s.Recv()
		if err != nil {
			return err
		}
		ack := &discovery.DiscoveryRequest{Node: node, TypeUrl: TypeURL, ResponseNonce: resp.GetNonce()}
		c, err := decode(resp, o.Merge)
		if err != nil {
			ack.VersionInfo = version
			ack.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
			if resp.GetVersionInfo() == refused {
				// A management server may send a refused version again at once after each NACK:
				// count and log it once, and answer the repeats no faster than once a second.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Second):
				}
			} else {
				refused = resp.GetVersionInfo()
				fail(err)
			}
		} else {
			apply(c)
			version = resp.GetVersionInfo()
			ack.VersionInfo = version
		}
		if err := s.Send(ack); err != nil {
			return err
		}
	}
}

func decode(resp *discovery.DiscoveryResponse, merge bool) (*config.Config, error) {
	rs := make([]*rlsconf.RateLimitConfig, 0, len(resp.GetResources()))
	for _, a := range resp.GetResources() {
		r := &rlsconf.RateLimitConfig{}
		if err := a.UnmarshalTo(r); err != nil {
			return nil, fmt.Errorf("xds resource %s: %w", a.GetTypeUrl(), err)
		}
		rs = append(rs, r)
	}
	return config.FromXDS(rs, merge)
}
