package config

import (
	"strings"
	"testing"

	pbext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

func d(kv ...string) *pbext.RateLimitDescriptor {
	out := &pbext.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Entries = append(out.Entries, &pbext.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func load(t *testing.T, files ...string) *Config {
	t.Helper()
	fs := []File{}
	for i, f := range files {
		fs = append(fs, File{Name: string(rune('a'+i)) + ".yaml", Content: []byte(f)})
	}
	c, err := Load(fs, false)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const messaging = `
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
  - key: path
    value: /api/*
    rate_limit:
      unit: minute
      requests_per_unit: 7
  - key: path
    value: /api/special
    rate_limit:
      unit: second
      requests_per_unit: 1
  - key: files
    value: f/*
    share_threshold: true
    detailed_metric: true
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: ip
    value_to_metric: true
    rate_limit:
      unit: second
      requests_per_unit: 3
`

func TestLookup(t *testing.T) {
	c := load(t, messaging)
	cases := []struct {
		desc      *pbext.RateLimitDescriptor
		rpu       uint32
		statsKey  string
		cacheKey  string
		noMatches bool
	}{
		{desc: d("message_type", "marketing", "to_number", "1"), rpu: 5, statsKey: "messaging.message_type_marketing.to_number", cacheKey: "messaging_message_type_marketing_to_number_1_"},
		{desc: d("to_number", "1"), rpu: 100, statsKey: "messaging.to_number", cacheKey: "messaging_to_number_1_"},
		// depth must match: one entry does not reach the nested limit
		{desc: d("message_type", "marketing"), noMatches: true},
		// more entries than the tree: no limit
		{desc: d("to_number", "1", "x", "y"), noMatches: true},
		{desc: d("path", "/api/x"), rpu: 7, statsKey: "messaging.path_/api/*", cacheKey: "messaging_path_/api/x_"},
		// exact value before wildcard
		{desc: d("path", "/api/special"), rpu: 1, statsKey: "messaging.path_/api/special"},
		{desc: d("path", "/other"), noMatches: true},
		// share_threshold: one counter for the wildcard; detailed metric keeps the pattern
		{desc: d("files", "f/a.pdf"), rpu: 10, statsKey: "messaging.files_f/*", cacheKey: "messaging_files_f/*_"},
		{desc: d("ip", "10.0.0.1"), rpu: 3, statsKey: "messaging.ip_10.0.0.1", cacheKey: "messaging_ip_10.0.0.1_"},
		{desc: d("unknown", "1"), noMatches: true},
	}
	for _, tc := range cases {
		l := c.Lookup("messaging", tc.desc)
		if tc.noMatches {
			if l != nil {
				t.Errorf("%v: matched %+v", tc.desc, l)
			}
			continue
		}
		if l == nil {
			t.Errorf("%v: no match", tc.desc)
			continue
		}
		if l.RequestsPerUnit != tc.rpu || l.StatsKey != tc.statsKey {
			t.Errorf("%v: rpu %d stats %q, want %d %q", tc.desc, l.RequestsPerUnit, l.StatsKey, tc.rpu, tc.statsKey)
		}
		if tc.cacheKey != "" && l.CacheKey("messaging", tc.desc) != tc.cacheKey {
			t.Errorf("%v: cache key %q, want %q", tc.desc, l.CacheKey("messaging", tc.desc), tc.cacheKey)
		}
	}
	if c.Lookup("nope", d("to_number", "1")) != nil {
		t.Error("unknown domain matched")
	}
}

func TestLimiterSpecs(t *testing.T) {
	c := load(t, `
domain: x
descriptors:
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: month
    rate_limit: {unit: month, requests_per_unit: 10}
  - key: mult
    rate_limit: {unit: second, requests_per_unit: 10, unit_multiplier: 30}
  - key: gcra
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra}
  - key: tb
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: token_bucket, burst: 50}
  - key: sw
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window}
  - key: sl
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_log}
  - key: cal
    rate_limit: {unit: month, requests_per_unit: 10, time_zone: Europe/Paris}
`)
	want := map[string]string{
		"fixed": "FIXED 10 60s", "month": "FIXED 10 2592000s", "mult": "FIXED 10 30s",
		"gcra": "GCRA 10 10 1s", "tb": "TOKENBUCKET 50 10 3600s", "sw": "SLIDINGCOUNTER 10 60s",
		"sl": "SLIDING 10 60s", "cal": "FIXED 10 month TZ Europe/Paris",
	}
	for k, w := range want {
		l := c.Lookup("x", d(k, "v"))
		if got := strings.Join(l.Limiter(), " "); got != w {
			t.Errorf("%s: %q, want %q", k, got, w)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	bad := map[string]string{
		"domain: x\ndescriptors:\n  - key: k\n    bogus: 1\n":                                                         "unknown key 'bogus'",
		"descriptors:\n  - key: k\n":                                                                                  "empty domain",
		"domain: x\ndescriptors:\n  - value: v\n":                                                                     "empty key",
		"domain: x\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n":              "invalid rate limit unit 'fortnight'",
		"domain: x\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n":                      "should not specify rate limit unit when unlimited",
		"domain: x\ndescriptors:\n  - key: k\n  - key: k\n":                                                           "duplicate descriptor composite key 'x.k'",
		"domain: x\ndescriptors:\n  - key: k\n    share_threshold: true\n":                                            "share_threshold can only be used with wildcard",
		"domain: x\ndescriptors:\n  - key: k\n    rate_limit: {name: a, replaces: [{name: a}], unit: second}\n":       "replaces should not contain name of same descriptor",
		"domain: x\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: x}\n":   "unknown algorithm 'x'",
		"domain: x\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, calendar: true}\n": "calendar windows need unit day",
		"domain: x\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 3}\n":       "burst applies to gcra and token_bucket only",
		"domain: x\ndescriptors: [1]\n":                                                                               "list of type other than map",
	}
	for in, want := range bad {
		_, err := Load([]File{{Name: "f.yaml", Content: []byte(in)}}, false)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
	two := []File{{Name: "a.yaml", Content: []byte("domain: x\ndescriptors:\n  - key: a\n")}, {Name: "b.yaml", Content: []byte("domain: x\ndescriptors:\n  - key: b\n")}}
	if _, err := Load(two, false); err == nil || !strings.Contains(err.Error(), "duplicate domain 'x'") {
		t.Errorf("duplicate domain: %v", err)
	}
	if _, err := Load(two, true); err != nil {
		t.Errorf("MERGE_DOMAIN_CONFIG: %v", err)
	}
}

func TestOverrideAndUnits(t *testing.T) {
	c := load(t, "domain: x\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	desc := d("k", "v")
	desc.Limit = &pbext.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 42, Unit: 2}
	l := c.Lookup("x", desc)
	if l == nil || l.RequestsPerUnit != 42 || l.Unit != pb.RateLimitResponse_RateLimit_MINUTE {
		t.Fatalf("override: %+v", l)
	}
	if UnitSeconds(pb.RateLimitResponse_RateLimit_DAY) != 86400 || UnitSeconds(pb.RateLimitResponse_RateLimit_MONTH) != 30*86400 {
		t.Fatal("unit lengths differ from envoyproxy/ratelimit's")
	}
}
