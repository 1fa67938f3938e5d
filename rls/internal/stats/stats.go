// Package stats keeps the service's counters under envoyproxy/ratelimit's statistics names and
// writes them in the Prometheus text format, with the labels of its Prometheus mapping
// (ratelimit_service_rate_limit_<stat>{domain, key1, key2}). The number of label sets is
// bounded: past the bound, new descriptors count under key1="_overflow_".
package stats

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Names of the per-descriptor counters, as envoyproxy/ratelimit names them.
var limitStats = []string{"total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"}

// Limit holds the counters of one descriptor path.
type Limit struct {
	TotalHits, OverLimit, NearLimit, WithinLimit, ShadowMode atomic.Uint64
}

type labels struct{ domain, key1, key2 string }

// Registry is the service's set of counters.
type Registry struct {
	mu     sync.RWMutex
	limits map[string]*Limit
	byLab  map[labels]*Limit
	max    int

	RedisError, ServiceError                     atomic.Uint64
	ConfigLoadSuccess, ConfigLoadError           atomic.Uint64
	GlobalShadowMode, DomainNotFound, FailedOpen atomic.Uint64
	FailedClosed, CrossSlotRequests              atomic.Uint64
}

// New makes a registry holding at most maxSeries label sets.
func New(maxSeries int) *Registry {
	if maxSeries <= 0 {
		maxSeries = 10000
	}
	return &Registry{limits: map[string]*Limit{}, byLab: map[labels]*Limit{}, max: maxSeries}
}

var ipv4 = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

// sanitize is envoyproxy/ratelimit's stat name cleaning: ':' and '|' become '_', and the dots of
// an IPv4 address become '_' so the address stays one path element.
func sanitize(s string) string {
	s = strings.NewReplacer(":", "_", "|", "_").Replace(s)
	return ipv4.ReplaceAllStringFunc(s, func(ip string) string { return strings.ReplaceAll(ip, ".", "_") })
}

func split(key string) labels {
	parts := strings.Split(sanitize(key), ".")
	l := labels{domain: parts[0]}
	if len(parts) > 1 {
		l.key1 = parts[1]
	}
	if len(parts) > 2 {
		l.key2 = parts[2]
	}
	return l
}

// For returns the counters of a stats key (domain.key_value.key...).
func (r *Registry) For(key string) *Limit {
	r.mu.RLock()
	l := r.limits[key]
	r.mu.RUnlock()
	if l != nil {
		return l
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l = r.limits[key]; l != nil {
		return l
	}
	lab := split(key)
	if l = r.byLab[lab]; l == nil {
		if len(r.byLab) >= r.max {
			lab = labels{domain: "_overflow_", key1: "_overflow_"}
			if l = r.byLab[lab]; l == nil {
				l = &Limit{}
				r.byLab[lab] = l
			}
		} else {
			l = &Limit{}
			r.byLab[lab] = l
		}
	}
	if len(r.limits) < 4*r.max {
		r.limits[key] = l
	}
	return l
}

// Series is the number of label sets.
func (r *Registry) Series() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.byLab)
}

func esc(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// Write writes every counter in the Prometheus text format.
func (r *Registry) Write(w io.Writer) {
	r.mu.RLock()
	labs := make([]labels, 0, len(r.byLab))
	for k := range r.byLab {
		labs = append(labs, k)
	}
	lims := make([]*Limit, 0, len(labs))
	sort.Slice(labs, func(i, j int) bool {
		a, b := labs[i], labs[j]
		if a.domain != b.domain {
			return a.domain < b.domain
		}
		if a.key1 != b.key1 {
			return a.key1 < b.key1
		}
		return a.key2 < b.key2
	})
	for _, k := range labs {
		lims = append(lims, r.byLab[k])
	}
	r.mu.RUnlock()
	for si, s := range limitStats {
		name := "ratelimit_service_rate_limit_" + s
		fmt.Fprintf(w, "# HELP %s envoyproxy/ratelimit's ratelimit.service.rate_limit.<descriptor>.%s\n# TYPE %s counter\n", name, s, name)
		for i, k := range labs {
			v := [...]*atomic.Uint64{&lims[i].TotalHits, &lims[i].OverLimit, &lims[i].NearLimit, &lims[i].WithinLimit, &lims[i].ShadowMode}[si].Load()
			lab := fmt.Sprintf(`domain="%s",key1="%s"`, esc(k.domain), esc(k.key1))
			if k.key2 != "" {
				lab += fmt.Sprintf(`,key2="%s"`, esc(k.key2))
			}
			fmt.Fprintf(w, "%s{%s} %d\n", name, lab, v)
		}
	}
	fmt.Fprintf(w, "# TYPE ratelimit_service_should_rate_limit_error counter\n")
	fmt.Fprintf(w, "ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"} %d\n", r.RedisError.Load())
	fmt.Fprintf(w, "ratelimit_service_should_rate_limit_error{err_type=\"service_error\"} %d\n", r.ServiceError.Load())
	for _, c := range []struct {
		name string
		v    *atomic.Uint64
		help string
	}{
		{"ratelimit_service_config_load_success", &r.ConfigLoadSuccess, "configuration loads that succeeded"},
		{"ratelimit_service_config_load_error", &r.ConfigLoadError, "configuration loads that failed (the previous configuration stays)"},
		{"ratelimit_service_global_shadow_mode", &r.GlobalShadowMode, "requests let through by SHADOW_MODE that would have been denied"},
		{"ratelimit_service_domain_not_found", &r.DomainNotFound, "requests for a domain no configuration names"},
		{"ratelimit_service_failed_open", &r.FailedOpen, "requests answered OK because Redis failed (FAILURE_MODE=open)"},
		{"ratelimit_service_failed_closed", &r.FailedClosed, "requests answered OVER_LIMIT because Redis failed (FAILURE_MODE=closed)"},
		{"ratelimit_service_cross_slot_requests", &r.CrossSlotRequests, "requests whose keys fell in several Redis Cluster slots (HOLD then RL.SETTLE)"},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", c.name, c.help, c.name, c.name, c.v.Load())
	}
}

// Statsd sends the counters' increases since the last call as statsd counters under
// envoyproxy/ratelimit's names (ratelimit.service.rate_limit.<domain>.<key1>[.<key2>].<stat>,
// ratelimit.service.call.should_rate_limit.<err>), for deployments that scrape a statsd exporter
// (USE_STATSD, as Envoy Gateway runs it). One datagram per line, each under 1 KB.
type Statsd struct {
	reg  *Registry
	w    io.Writer
	last map[string]uint64
}

// NewStatsd writes to w (a UDP connection).
func NewStatsd(reg *Registry, w io.Writer) *Statsd {
	return &Statsd{reg: reg, w: w, last: map[string]uint64{}}
}

func (s *Statsd) send(name string, v uint64) {
	if d := v - s.last[name]; d > 0 {
		s.last[name] = v
		_, _ = fmt.Fprintf(s.w, "%s:%d|c", name, d)
	}
}

// Flush sends what changed since the last Flush.
func (s *Statsd) Flush() {
	s.reg.mu.RLock()
	type entry struct {
		l labels
		v *Limit
	}
	es := make([]entry, 0, len(s.reg.byLab))
	for k, v := range s.reg.byLab {
		es = append(es, entry{k, v})
	}
	s.reg.mu.RUnlock()
	for _, e := range es {
		base := "ratelimit.service.rate_limit." + e.l.domain + "." + e.l.key1
		if e.l.key2 != "" {
			base += "." + e.l.key2
		}
		for i, v := range []*atomic.Uint64{&e.v.TotalHits, &e.v.OverLimit, &e.v.NearLimit, &e.v.WithinLimit, &e.v.ShadowMode} {
			s.send(base+"."+limitStats[i], v.Load())
		}
	}
	s.send("ratelimit.service.call.should_rate_limit.redis_error", s.reg.RedisError.Load())
	s.send("ratelimit.service.call.should_rate_limit.service_error", s.reg.ServiceError.Load())
	s.send("ratelimit.service.config_load_success", s.reg.ConfigLoadSuccess.Load())
	s.send("ratelimit.service.config_load_error", s.reg.ConfigLoadError.Load())
	s.send("ratelimit.service.global_shadow_mode", s.reg.GlobalShadowMode.Load())
}
