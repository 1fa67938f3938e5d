// Package config reads envoyproxy/ratelimit's configuration format (domains and descriptor trees
// in YAML) and answers which limit applies to a request descriptor.
//
// The format is read unchanged: domain, descriptors (key, value with a trailing `*` wildcard,
// nested descriptors), rate_limit (unit, requests_per_unit, unlimited, name, replaces),
// shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold. Optional extensions
// inside rate_limit: algorithm, unit_multiplier, burst, calendar, time_zone.
package config

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	pbext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"gopkg.in/yaml.v3"
)

// Algorithm names accepted by the `algorithm` extension.
const (
	Fixed         = "fixed"
	GCRA          = "gcra"
	TokenBucket   = "token_bucket"
	SlidingWindow = "sliding_window"
	SlidingLog    = "sliding_log"
)

// RateLimit is one configured limit, as matched for one request descriptor.
type RateLimit struct {
	// StatsKey names the limit in the statistics (domain.key_value.key...).
	StatsKey        string
	RequestsPerUnit uint32
	Unit            pb.RateLimitResponse_RateLimit_Unit
	Unlimited       bool
	ShadowMode      bool
	QuotaMode       bool
	DetailedMetric  bool
	Name            string
	Replaces        []string

	// Extensions (absent from envoyproxy/ratelimit; defaults give its behaviour).
	Algorithm      string // fixed (default), gcra, token_bucket, sliding_window, sliding_log
	UnitMultiplier uint32 // the window is UnitMultiplier units (default 1)
	Burst          uint32 // gcra/token_bucket capacity (default requests_per_unit)
	Calendar       bool   // day/week/month/year are calendar periods in TimeZone
	TimeZone       string // IANA zone or +hh:mm for calendar windows (default UTC)

	// shareThreshold holds, per request entry, the wildcard pattern whose values share one
	// counter ("" where the entry's own value is used).
	shareThreshold []string
}

// UnitSeconds is the length of a unit as envoyproxy/ratelimit counts it (month 30 days, year
// 365 days), so fixed windows start at the same instants.
func UnitSeconds(u pb.RateLimitResponse_RateLimit_Unit) int64 {
	switch u {
	case pb.RateLimitResponse_RateLimit_SECOND:
		return 1
	case pb.RateLimitResponse_RateLimit_MINUTE:
		return 60
	case pb.RateLimitResponse_RateLimit_HOUR:
		return 3600
	case pb.RateLimitResponse_RateLimit_DAY:
		return 86400
	case pb.RateLimitResponse_RateLimit_WEEK:
		return 7 * 86400
	case pb.RateLimitResponse_RateLimit_MONTH:
		return 30 * 86400
	case pb.RateLimitResponse_RateLimit_YEAR:
		return 365 * 86400
	}
	return 0
}

// WindowSeconds is the limit's window: unit length times unit_multiplier.
func (r *RateLimit) WindowSeconds() int64 {
	m := int64(r.UnitMultiplier)
	if m == 0 {
		m = 1
	}
	return UnitSeconds(r.Unit) * m
}

// Limiter is the module limiter this limit is counted with, as RL.ALL takes it
// (`FIXED 10 60s`, `GCRA 20 10 60s`, `FIXED 1000 month TZ Europe/Paris`, ...).
func (r *RateLimit) Limiter() []string {
	rpu := fmt.Sprint(r.RequestsPerUnit)
	window := fmt.Sprintf("%ds", r.WindowSeconds())
	burst := rpu
	if r.Burst > 0 {
		burst = fmt.Sprint(r.Burst)
	}
	switch r.Algorithm {
	case GCRA:
		return []string{"GCRA", burst, rpu, window}
	case TokenBucket:
		return []string{"TOKENBUCKET", burst, rpu, window}
	case SlidingWindow:
		return []string{"SLIDINGCOUNTER", rpu, window}
	case SlidingLog:
		return []string{"SLIDING", rpu, window}
	}
	if r.Calendar {
		tz := r.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		return []string{"FIXED", rpu, strings.ToLower(r.Unit.String()), "TZ", tz}
	}
	return []string{"FIXED", rpu, window}
}

// KeySuffix tells keys of different algorithms apart (a key holds one limiter type).
func (r *RateLimit) KeySuffix() string {
	switch r.Algorithm {
	case GCRA:
		return "gcra"
	case TokenBucket:
		return "tb"
	case SlidingWindow:
		return "sw"
	case SlidingLog:
		return "sl"
	}
	return "fixed"
}

// CacheKey is the part of the Redis key that names this descriptor's counter:
// domain_key_value_key_value_ (share_threshold entries use their wildcard pattern).
func (r *RateLimit) CacheKey(domain string, d *pbext.RateLimitDescriptor) string {
	var b bytes.Buffer
	b.WriteString(domain)
	b.WriteByte('_')
	for i, e := range d.Entries {
		b.WriteString(e.Key)
		b.WriteByte('_')
		v := e.Value
		if i < len(r.shareThreshold) && r.shareThreshold[i] != "" {
			v = r.shareThreshold[i]
		}
		b.WriteString(v)
		b.WriteByte('_')
	}
	return b.String()
}

// Error is a configuration error, naming the file.
type Error struct {
	File string
	Msg  string
}

func (e *Error) Error() string { return e.File + ": " + e.Msg }

type node struct {
	children      map[string]*node
	wildcards     []string // keys of children whose value ends with '*', in file order
	limit         *RateLimit
	valueToMetric bool
	shareThresh   bool
	pattern       string // key_value* of a share_threshold wildcard
}

// Config is a loaded set of domains. It is immutable once built.
type Config struct {
	domains map[string]*node
}

// File is one configuration file's name and content.
type File struct {
	Name    string
	Content []byte
}

var validKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
	"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true,
	"quota_mode": true, "name": true, "replaces": true, "detailed_metric": true,
	"value_to_metric": true, "share_threshold": true,
	// extensions
	"algorithm": true, "unit_multiplier": true, "burst": true, "calendar": true, "time_zone": true,
}

type yamlReplaces struct {
	Name string `yaml:"name"`
}

type yamlRateLimit struct {
	RequestsPerUnit uint32         `yaml:"requests_per_unit"`
	Unit            string         `yaml:"unit"`
	Unlimited       bool           `yaml:"unlimited"`
	Name            string         `yaml:"name"`
	Replaces        []yamlReplaces `yaml:"replaces"`
	Algorithm       string         `yaml:"algorithm"`
	UnitMultiplier  uint32         `yaml:"unit_multiplier"`
	Burst           uint32         `yaml:"burst"`
	Calendar        bool           `yaml:"calendar"`
	TimeZone        string         `yaml:"time_zone"`
}

type yamlDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value"`
	RateLimit      *yamlRateLimit   `yaml:"rate_limit"`
	Descriptors    []yamlDescriptor `yaml:"descriptors"`
	ShadowMode     bool             `yaml:"shadow_mode"`
	QuotaMode      bool             `yaml:"quota_mode"`
	DetailedMetric bool             `yaml:"detailed_metric"`
	ValueToMetric  bool             `yaml:"value_to_metric"`
	ShareThreshold bool             `yaml:"share_threshold"`
}

type yamlRoot struct {
	Domain      string           `yaml:"domain"`
	Descriptors []yamlDescriptor `yaml:"descriptors"`
}

func checkKeys(file string, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			if n.Kind == yaml.SequenceNode && c.Kind != yaml.MappingNode {
				return &Error{file, fmt.Sprintf("config error, yaml file contains list of type other than map: %s", c.Value)}
			}
			if err := checkKeys(file, c); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || !validKeys[k.Value] {
				return &Error{file, fmt.Sprintf("config error, unknown key '%s'", k.Value)}
			}
			if err := checkKeys(file, n.Content[i+1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Load builds a Config from files. Two files with the same domain are an error unless merge is
// set (MERGE_DOMAIN_CONFIG), as in envoyproxy/ratelimit.
func Load(files []File, merge bool) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	for _, f := range files {
		var doc yaml.Node
		if err := yaml.Unmarshal(f.Content, &doc); err != nil {
			return nil, &Error{f.Name, "error loading config file: " + err.Error()}
		}
		if err := checkKeys(f.Name, &doc); err != nil {
			return nil, err
		}
		var root yamlRoot
		if err := doc.Decode(&root); err != nil && len(doc.Content) > 0 {
			return nil, &Error{f.Name, "error loading config file: " + err.Error()}
		}
		if root.Domain == "" {
			return nil, &Error{f.Name, "config file cannot have empty domain"}
		}
		d, present := c.domains[root.Domain]
		if present && !merge {
			return nil, &Error{f.Name, fmt.Sprintf("duplicate domain '%s' in config file", root.Domain)}
		}
		if !present {
			d = &node{children: map[string]*node{}}
			c.domains[root.Domain] = d
		}
		if err := d.load(f.Name, root.Domain+".", root.Descriptors); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func parseUnit(s string) (pb.RateLimitResponse_RateLimit_Unit, bool) {
	v, ok := pb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(s)]
	if !ok || v == int32(pb.RateLimitResponse_RateLimit_UNKNOWN) {
		return 0, false
	}
	return pb.RateLimitResponse_RateLimit_Unit(v), true
}

func buildLimit(file, key string, d *yamlDescriptor) (*RateLimit, error) {
	y := d.RateLimit
	unit, validUnit := parseUnit(y.Unit)
	if y.Unlimited {
		if validUnit {
			return nil, &Error{file, "should not specify rate limit unit when unlimited"}
		}
	} else if !validUnit {
		return nil, &Error{file, fmt.Sprintf("invalid rate limit unit '%s'", y.Unit)}
	}
	r := &RateLimit{
		StatsKey: key, RequestsPerUnit: y.RequestsPerUnit, Unit: unit, Unlimited: y.Unlimited,
		ShadowMode: d.ShadowMode, QuotaMode: d.QuotaMode, DetailedMetric: d.DetailedMetric,
		Name: y.Name, Algorithm: strings.ToLower(y.Algorithm), UnitMultiplier: y.UnitMultiplier,
		Burst: y.Burst, Calendar: y.Calendar || y.TimeZone != "", TimeZone: y.TimeZone,
	}
	for _, rep := range y.Replaces {
		if rep.Name == "" {
			return nil, &Error{file, "should not have an empty replaces entry"}
		}
		if rep.Name == y.Name {
			return nil, &Error{file, "replaces should not contain name of same descriptor"}
		}
		r.Replaces = append(r.Replaces, rep.Name)
	}
	if r.Unlimited {
		return r, nil
	}
	if r.RequestsPerUnit == 0 {
		// envoyproxy/ratelimit accepts 0 (every request is over the limit); so do we.
		r.RequestsPerUnit = 0
	}
	switch r.Algorithm {
	case "", Fixed:
		r.Algorithm = Fixed
	case GCRA, TokenBucket, SlidingWindow, SlidingLog:
		if r.RequestsPerUnit == 0 {
			return nil, &Error{file, fmt.Sprintf("%s: algorithm %s needs requests_per_unit > 0", key, r.Algorithm)}
		}
	default:
		return nil, &Error{file, fmt.Sprintf("%s: unknown algorithm '%s' (fixed, gcra, token_bucket, sliding_window, sliding_log)", key, y.Algorithm)}
	}
	if r.WindowSeconds() > 100*365*86400 {
		return nil, &Error{file, fmt.Sprintf("%s: a window of more than 100 years", key)}
	}
	if r.Algorithm == GCRA || r.Algorithm == TokenBucket {
		// The module keeps the time a full limiter takes to refill in ms below 2^63/1000.
		burst := uint64(r.Burst)
		if burst == 0 {
			burst = uint64(r.RequestsPerUnit)
		}
		if float64(burst)*float64(r.WindowSeconds())*1000/float64(r.RequestsPerUnit) > 9e15 {
			return nil, &Error{file, fmt.Sprintf("%s: burst * window / requests_per_unit is too long a time for %s", key, r.Algorithm)}
		}
	}
	if r.Burst > 0 && r.Algorithm != GCRA && r.Algorithm != TokenBucket {
		return nil, &Error{file, fmt.Sprintf("%s: burst applies to gcra and token_bucket only", key)}
	}
	if r.Calendar {
		if r.Algorithm != Fixed {
			return nil, &Error{file, fmt.Sprintf("%s: calendar windows apply to the fixed algorithm only", key)}
		}
		switch unit {
		case pb.RateLimitResponse_RateLimit_DAY, pb.RateLimitResponse_RateLimit_WEEK,
			pb.RateLimitResponse_RateLimit_MONTH, pb.RateLimitResponse_RateLimit_YEAR:
		default:
			return nil, &Error{file, fmt.Sprintf("%s: calendar windows need unit day, week, month or year", key)}
		}
		if r.UnitMultiplier > 1 {
			return nil, &Error{file, fmt.Sprintf("%s: unit_multiplier cannot be used with calendar windows", key)}
		}
	}
	return r, nil
}

func (n *node) load(file, parent string, ds []yamlDescriptor) error {
	for i := range ds {
		d := &ds[i]
		if d.Key == "" {
			return &Error{file, "descriptor has empty key"}
		}
		final := d.Key
		if d.Value != "" {
			final += "_" + d.Value
		}
		full := parent + final
		if _, dup := n.children[final]; dup {
			return &Error{file, fmt.Sprintf("duplicate descriptor composite key '%s'", full)}
		}
		child := &node{children: map[string]*node{}, valueToMetric: d.ValueToMetric, shareThresh: d.ShareThreshold}
		if d.RateLimit != nil {
			l, err := buildLimit(file, full, d)
			if err != nil {
				return err
			}
			child.limit = l
		}
		wild := strings.HasSuffix(final, "*")
		if d.ShareThreshold {
			if !wild {
				return &Error{file, fmt.Sprintf("share_threshold can only be used with wildcard values (ending with '*'), but found key '%s'", final)}
			}
			child.pattern = final
		}
		if wild {
			n.wildcards = append(n.wildcards, final)
		}
		if err := child.load(file, full+".", d.Descriptors); err != nil {
			return err
		}
		n.children[final] = child
	}
	return nil
}

// Domains lists the loaded domains, sorted.
func (c *Config) Domains() []string {
	out := make([]string, 0, len(c.domains))
	for d := range c.domains {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// HasDomain tells whether a domain is configured.
func (c *Config) HasDomain(domain string) bool { return c.domains[domain] != nil }

// Lookup finds the limit for one request descriptor, as envoyproxy/ratelimit does: each entry
// matches key_value exactly, else a wildcard key_prefix*, else the bare key; a limit applies only
// when it sits at the descriptor's last entry. A descriptor's own `limit` override (from Envoy's
// route configuration) wins. nil when nothing matches.
func (c *Config) Lookup(domain string, d *pbext.RateLimitDescriptor) *RateLimit {
	if ov := d.GetLimit(); ov != nil {
		key := domain
		for _, e := range d.Entries {
			key += "." + e.Key
			if e.Value != "" {
				key += "_" + e.Value
			}
		}
		unit := pb.RateLimitResponse_RateLimit_Unit(ov.GetUnit())
		if UnitSeconds(unit) == 0 {
			return nil
		}
		r := &RateLimit{StatsKey: key, RequestsPerUnit: ov.GetRequestsPerUnit(), Unit: unit, Algorithm: Fixed}
		if m := ov.GetUnitMultiplier(); m != nil && m.Value > 1 {
			r.UnitMultiplier = m.Value
		}
		return r
	}
	n := c.domains[domain]
	if n == nil {
		return nil
	}
	var found *RateLimit
	var share []string
	detailed := domain
	valued := domain
	for i, e := range d.Entries {
		final := e.Key + "_" + e.Value
		detailed += "." + final
		next := n.children[final]
		matchedWild := ""
		if next == nil {
			for _, w := range n.wildcards {
				if strings.HasPrefix(final, strings.TrimSuffix(w, "*")) {
					next, matchedWild = n.children[w], w
					break
				}
			}
		}
		byValue := next != nil
		if next == nil {
			next = n.children[e.Key]
		}
		valued += "."
		if next == nil {
			valued += e.Key
		} else {
			v := ""
			switch {
			case matchedWild != "" && next.shareThresh:
				v = strings.TrimPrefix(next.pattern, e.Key+"_")
				if share == nil {
					share = make([]string, len(d.Entries))
				}
				share[i] = v
			case matchedWild != "" && next.valueToMetric:
				v = e.Value
			case matchedWild != "":
				v = strings.TrimPrefix(matchedWild, e.Key+"_")
			case byValue:
				v = e.Value
			case next.valueToMetric:
				v = e.Value
			}
			valued += e.Key
			if v != "" {
				valued += "_" + v
			}
		}
		if next != nil && next.limit != nil && i == len(d.Entries)-1 {
			cp := *next.limit
			found = &cp
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		n = next
	}
	if found == nil {
		return nil
	}
	found.shareThreshold = share
	if found.DetailedMetric {
		if share != nil {
			key := domain
			for i, e := range d.Entries {
				key += "." + e.Key
				if share[i] != "" {
					key += "_" + share[i]
				} else if e.Value != "" {
					key += "_" + e.Value
				}
			}
			found.StatsKey = key
		} else {
			found.StatsKey = detailed
		}
	} else {
		found.StatsKey = valued
	}
	return found
}
