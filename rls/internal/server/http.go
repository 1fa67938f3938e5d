// Package server holds the HTTP side of the service: /healthcheck, /json and /metrics, as
// envoyproxy/ratelimit serves them on its HTTP port.
package server

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/stats"
)

// Health is the service's health: OK once a configuration is loaded, failing while it shuts down.
type Health struct {
	ready     atomic.Bool
	stopping  atomic.Bool
	redisDown atomic.Bool
}

// SetRedisDown records whether the Redis health check fails
// (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION).
func (h *Health) SetRedisDown(down bool) { h.redisDown.Store(down) }

// SetReady marks a configuration as loaded.
func (h *Health) SetReady() { h.ready.Store(true) }

// Stop makes /healthcheck fail, so load balancers drain the instance before it exits.
func (h *Health) Stop() { h.stopping.Store(true) }

// OK tells whether the service should receive traffic.
func (h *Health) OK() bool { return h.ready.Load() && !h.stopping.Load() && !h.redisDown.Load() }

// Handler serves /healthcheck, /json (a RateLimitRequest as JSON in, the response as JSON out:
// 200, or 429 when over the limit) and /metrics.
func Handler(svc pb.RateLimitServiceServer, h *Health, reg *stats.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthcheck", func(w http.ResponseWriter, _ *http.Request) {
		if !h.OK() {
			http.Error(w, "not ready", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "OK")
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "Bad Request", http.StatusBadRequest)
			return
		}
		var req pb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			http.Error(w, "Bad Request", http.StatusBadRequest)
			return
		}
		resp, err := svc.ShouldRateLimit(context.Background(), &req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, "Internal Server Error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(out)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		reg.Write(w)
	})
	return mux
}
