// Package service implements envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit over the
// module: a request's descriptors are matched against the configuration and charged all or
// nothing (store.Charge).
package service

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/config"
	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/stats"
	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/store"
)

// FailureMode says what a request gets when Redis fails or does not answer in time.
type FailureMode int

const (
	// FailError returns a gRPC error (UNAVAILABLE); Envoy's failure_mode_deny decides, as with
	// envoyproxy/ratelimit.
	FailError FailureMode = iota
	// FailOpen answers OK.
	FailOpen
	// FailClosed answers OVER_LIMIT.
	FailClosed
)

func (f FailureMode) String() string {
	switch f {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return "error"
}

// Options configure the service.
type Options struct {
	KeyPrefix      string        // CACHE_KEY_PREFIX
	HashTag        bool          // put the domain in a {hash tag}: a request's keys share one slot
	NearLimitRatio float64       // NEAR_LIMIT_RATIO (0.8)
	GlobalShadow   bool          // SHADOW_MODE
	Timeout        time.Duration // REDIS_TIMEOUT: the bound on one request's Redis work
	Failure        FailureMode
	Log            *slog.Logger
	// Headers names the RateLimit-Limit, -Remaining and -Reset response headers
	// (LIMIT_RESPONSE_HEADERS_ENABLED with LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER,
	// LIMIT_RESET_HEADER); nil: no headers.
	Headers *[3]string
}

// Service is the rate limit service.
type Service struct {
	pb.UnimplementedRateLimitServiceServer
	cfg   atomic.Pointer[config.Config]
	store *store.Store
	stats *stats.Registry
	opt   Options
	// lastLog is when a Redis failure was last logged (unix ns).
	lastLog atomic.Int64
}

// New makes a service; SetConfig must be called before it limits anything.
func New(st *store.Store, reg *stats.Registry, opt Options) *Service {
	if opt.NearLimitRatio <= 0 {
		opt.NearLimitRatio = 0.8
	}
	if opt.Timeout <= 0 {
		opt.Timeout = time.Second
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	return &Service{store: st, stats: reg, opt: opt}
}

// SetConfig swaps the configuration in (requests in flight keep the one they started with).
func (s *Service) SetConfig(c *config.Config) { s.cfg.Store(c) }

// Config is the current configuration (nil before the first load).
func (s *Service) Config() *config.Config { return s.cfg.Load() }

type item struct {
	index int
	limit *config.RateLimit
	cost  uint64
	stats *stats.Limit
}

func hitsAddends(req *pb.RateLimitRequest) []uint64 {
	out := make([]uint64, len(req.Descriptors))
	for i, d := range req.Descriptors {
		if d.HitsAddend != nil {
			out[i] = d.HitsAddend.Value
		} else {
			out[i] = max(1, uint64(req.HitsAddend))
		}
		// The module takes costs up to 2^63-1 (more than any limit: such a request is over it).
		out[i] = min(out[i], math.MaxInt64)
	}
	return out
}

func (s *Service) key(domain string, l *config.RateLimit, cacheKey string) string {
	if s.opt.HashTag {
		// {domain}_key_value_..._alg: every key of a domain in one slot, so a request is one RL.ALL
		// even in Redis Cluster (at the price of one shard per domain).
		return s.opt.KeyPrefix + "{" + domain + "}" + cacheKey[len(domain):] + l.KeySuffix()
	}
	return s.opt.KeyPrefix + cacheKey + l.KeySuffix()
}

func ceilSeconds(ms int64) *durationpb.Duration {
	if ms < 0 {
		ms = 0
	}
	return &durationpb.Duration{Seconds: (ms + 999) / 1000}
}

func currentLimit(l *config.RateLimit) *pb.RateLimitResponse_RateLimit {
	cl := &pb.RateLimitResponse_RateLimit{RequestsPerUnit: l.RequestsPerUnit, Unit: l.Unit, Name: l.Name}
	if l.UnitMultiplier > 1 {
		cl.UnitMultiplier = wrapperspb.UInt32(l.UnitMultiplier)
	}
	return cl
}

// count adds a descriptor's outcome to its counters as envoyproxy/ratelimit counts them: hits
// past floor(limit·NEAR_LIMIT_RATIO) are near_limit, hits past the limit over_limit.
func (s *Service) count(it item, r store.Reply, over, shadow bool) {
	lim := uint64(max(r.Limit, 0))
	used := uint64(max(r.Limit-r.Remaining, 0))
	before, after := used, used+min(it.cost, math.MaxInt64)
	if !over && r.Granted > 0 {
		before, after = used-min(used, it.cost), used
	}
	near := uint64(math.Floor(float64(lim) * s.opt.NearLimitRatio))
	st := it.stats
	if over {
		if before >= lim {
			st.OverLimit.Add(it.cost)
		} else {
			st.OverLimit.Add(sub(after, lim))
			st.NearLimit.Add(sub(lim, max(near, before)))
		}
		if shadow {
			if before >= lim {
				st.ShadowMode.Add(it.cost)
			} else {
				st.ShadowMode.Add(sub(after, lim))
			}
		}
		return
	}
	if after > near {
		if before >= near {
			st.NearLimit.Add(it.cost)
		} else {
			st.NearLimit.Add(sub(after, near))
		}
	}
	st.WithinLimit.Add(it.cost)
}

func sub(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

func (s *Service) status(it item, r store.Reply, over bool) *pb.RateLimitResponse_DescriptorStatus {
	st := &pb.RateLimitResponse_DescriptorStatus{
		Code:               pb.RateLimitResponse_OK,
		CurrentLimit:       currentLimit(it.limit),
		DurationUntilReset: ceilSeconds(r.ResetAfterMs),
	}
	if over {
		st.Code = pb.RateLimitResponse_OVER_LIMIT
	} else {
		st.LimitRemaining = uint32(min(max(r.Remaining, 0), math.MaxUint32))
	}
	return st
}

// ShouldRateLimit answers Envoy.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if req.Domain == "" {
		s.stats.ServiceError.Add(1)
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	}
	if len(req.Descriptors) == 0 {
		s.stats.ServiceError.Add(1)
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	}
	cfg := s.cfg.Load()
	if cfg == nil {
		s.stats.ServiceError.Add(1)
		return nil, status.Error(codes.Unavailable, "no rate limit configuration loaded")
	}
	if !cfg.HasDomain(req.Domain) {
		s.stats.DomainNotFound.Add(1)
	}
	hits := hitsAddends(req)
	limits := make([]*config.RateLimit, len(req.Descriptors))
	unlimited := make([]bool, len(req.Descriptors))
	replacing := map[string]bool{}
	for i, d := range req.Descriptors {
		l := cfg.Lookup(req.Domain, d)
		if l == nil {
			continue
		}
		for _, r := range l.Replaces {
			replacing[r] = true
		}
		if l.Unlimited {
			unlimited[i] = true
			continue
		}
		limits[i] = l
	}
	resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(req.Descriptors))}
	var enforced, shadowed, refunds []item
	for i, l := range limits {
		switch {
		case unlimited[i]:
			resp.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			continue
		case l == nil || (l.Name != "" && replacing[l.Name]):
			resp.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
			continue
		}
		it := item{index: i, limit: l, cost: hits[i], stats: s.stats.For(l.StatsKey)}
		switch {
		case req.Descriptors[i].IsNegativeHits:
			refunds = append(refunds, it)
		case l.ShadowMode || l.QuotaMode:
			it.stats.TotalHits.Add(it.cost)
			shadowed = append(shadowed, it)
		default:
			it.stats.TotalHits.Add(it.cost)
			enforced = append(enforced, it)
		}
	}
	if len(enforced)+len(shadowed)+len(refunds) == 0 {
		s.headers(resp)
		return resp, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	if err := s.limit(ctx, req, resp, enforced, shadowed, refunds); err != nil {
		s.stats.RedisError.Add(1)
		// At most one line a second: a Redis outage at thousands of requests a second must not
		// flood the log (the counter has every failure).
		if now := time.Now().UnixNano(); now-s.lastLog.Load() >= int64(time.Second) {
			s.lastLog.Store(now)
			s.opt.Log.Error("redis call failed", "domain", req.Domain, "error", err,
				"failures", s.stats.RedisError.Load(), "failure_mode", s.opt.Failure.String())
		}
		switch s.opt.Failure {
		case FailOpen:
			s.stats.FailedOpen.Add(1)
			return failed(req, pb.RateLimitResponse_OK), nil
		case FailClosed:
			s.stats.FailedClosed.Add(1)
			return failed(req, pb.RateLimitResponse_OVER_LIMIT), nil
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, status.Error(codes.DeadlineExceeded, "redis did not answer in time: "+err.Error())
		}
		return nil, status.Error(codes.Unavailable, "redis: "+err.Error())
	}
	s.headers(resp)
	return resp, nil
}

// headers adds RateLimit-Limit/-Remaining/-Reset for the descriptor with the fewest remaining
// (the last one over the limit, when one is), as envoyproxy/ratelimit does.
func (s *Service) headers(resp *pb.RateLimitResponse) {
	if s.opt.Headers == nil {
		return
	}
	var min *pb.RateLimitResponse_DescriptorStatus
	over := false
	for _, st := range resp.Statuses {
		switch {
		case st.CurrentLimit == nil:
		case st.Code == pb.RateLimitResponse_OVER_LIMIT:
			min, over = st, true // the last one over the limit
		case !over && (min == nil || st.LimitRemaining < min.LimitRemaining):
			min = st
		}
	}
	if min == nil {
		return
	}
	h := s.opt.Headers
	resp.ResponseHeadersToAdd = []*core.HeaderValue{
		{Key: h[0], Value: strconv.FormatUint(uint64(min.CurrentLimit.RequestsPerUnit), 10)},
		{Key: h[1], Value: strconv.FormatUint(uint64(min.LimitRemaining), 10)},
		{Key: h[2], Value: strconv.FormatInt(min.DurationUntilReset.GetSeconds(), 10)},
	}
}

func failed(req *pb.RateLimitRequest, code pb.RateLimitResponse_Code) *pb.RateLimitResponse {
	r := &pb.RateLimitResponse{OverallCode: code, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(req.Descriptors))}
	for i := range r.Statuses {
		r.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{Code: code}
	}
	return r
}

func (s *Service) limiters(domain string, req *pb.RateLimitRequest, its []item) []store.Limiter {
	out := make([]store.Limiter, len(its))
	for j, it := range its {
		out[j] = store.Limiter{
			Key:  s.key(domain, it.limit, it.limit.CacheKey(domain, req.Descriptors[it.index])),
			Spec: it.limit.Limiter(),
			Cost: it.cost,
		}
	}
	return out
}

func (s *Service) limit(ctx context.Context, req *pb.RateLimitRequest, resp *pb.RateLimitResponse, enforced, shadowed, refunds []item) error {
	granted := true
	blocked := false
	for _, it := range enforced {
		if it.limit.RequestsPerUnit == 0 {
			// requests_per_unit 0 (a block list) denies every request without a counter.
			blocked = true
			w := it.limit.WindowSeconds() * 1000
			r := store.Reply{RetryAfterMs: -1, ResetAfterMs: w - time.Now().UnixMilli()%w}
			s.count(it, r, true, false)
			resp.Statuses[it.index] = s.status(it, r, true)
		}
	}
	if blocked {
		enforced = nonZero(enforced)
		if s.opt.GlobalShadow {
			s.stats.GlobalShadowMode.Add(1)
		} else {
			// Denied: the other limiters are only read, never charged.
			rs, err := s.store.Each(ctx, s.limiters(req.Domain, req, enforced), false, true)
			if err != nil {
				return err
			}
			for j, it := range enforced {
				resp.Statuses[it.index] = s.status(it, rs[j], false)
			}
			resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
			granted = false
			enforced = nil
		}
	}
	if len(enforced) > 0 {
		ls := s.limiters(req.Domain, req, enforced)
		if s.crossSlot(ls) {
			s.stats.CrossSlotRequests.Add(1)
		}
		ok, rs, err := s.store.Charge(ctx, ls, s.opt.GlobalShadow)
		if err != nil {
			return err
		}
		wouldDeny := false
		for j, it := range enforced {
			over := rs[j].Denies()
			wouldDeny = wouldDeny || over
			if ok || over {
				// A limiter that would have granted a denied request was not charged: only
				// total_hits counts it.
				s.count(it, rs[j], over, false)
			}
			resp.Statuses[it.index] = s.status(it, rs[j], over)
			if over {
				resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
			}
		}
		if s.opt.GlobalShadow && wouldDeny && !blocked {
			s.stats.GlobalShadowMode.Add(1)
			resp.OverallCode = pb.RateLimitResponse_OK
		}
		granted = ok
	}
	if len(shadowed) > 0 {
		// Shadow-mode descriptors never deny. They are charged (each on its own, SHADOW) only when
		// the request goes through; when enforcement denied it, their state is only read (PEEK).
		ls := s.limiters(req.Domain, req, shadowed)
		rs, err := s.store.Each(ctx, ls, granted, !granted)
		if err != nil {
			return err
		}
		for j, it := range shadowed {
			over := rs[j].Denies()
			if granted {
				s.count(it, rs[j], over, it.limit.ShadowMode)
			}
			st := s.status(it, rs[j], false)
			resp.Statuses[it.index] = st
		}
	}
	if len(refunds) > 0 {
		ls := s.limiters(req.Domain, req, refunds)
		rs, err := s.store.Refund(ctx, ls)
		if err != nil {
			return err
		}
		for j, it := range refunds {
			r := rs[j]
			if r.Missing {
				r = store.Reply{Limit: int64(it.limit.RequestsPerUnit), Remaining: int64(it.limit.RequestsPerUnit)}
			}
			resp.Statuses[it.index] = s.status(it, r, false)
		}
	}
	return nil
}

func (s *Service) crossSlot(ls []store.Limiter) bool {
	for _, l := range ls[1:] {
		if store.Slot(l.Key) != store.Slot(ls[0].Key) {
			return true
		}
	}
	return false
}

func nonZero(its []item) []item {
	out := []item{}
	for _, it := range its {
		if it.limit.RequestsPerUnit > 0 {
			out = append(out, it)
		}
	}
	return out
}
