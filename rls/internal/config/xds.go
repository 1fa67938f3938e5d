package config

import (
	"strings"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

func fromProtoDescriptors(ds []*rlsconf.RateLimitDescriptor) []yamlDescriptor {
	out := make([]yamlDescriptor, 0, len(ds))
	for _, d := range ds {
		y := yamlDescriptor{
			Key: d.GetKey(), Value: d.GetValue(), ShadowMode: d.GetShadowMode(),
			DetailedMetric: d.GetDetailedMetric(), Descriptors: fromProtoDescriptors(d.GetDescriptors()),
		}
		if p := d.GetRateLimit(); p != nil {
			r := &yamlRateLimit{RequestsPerUnit: p.GetRequestsPerUnit(), Unlimited: p.GetUnlimited(), Name: p.GetName()}
			if p.GetUnit() != rlsconf.RateLimitUnit_UNKNOWN {
				r.Unit = strings.ToLower(p.GetUnit().String())
			}
			for _, rep := range p.GetReplaces() {
				r.Replaces = append(r.Replaces, yamlReplaces{Name: rep.GetName()})
			}
			y.RateLimit = r
		}
		out = append(out, y)
	}
	return out
}

// FromXDS builds a Config from the RateLimitConfig resources an xDS management server sends
// (CONFIG_TYPE=GRPC_XDS_SOTW, as Envoy Gateway configures envoyproxy/ratelimit), with the same
// checks as files.
func FromXDS(resources []*rlsconf.RateLimitConfig, merge bool) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	for _, r := range resources {
		name := "xds:" + r.GetName()
		if r.GetDomain() == "" {
			return nil, &Error{name, "config file cannot have empty domain"}
		}
		d, present := c.domains[r.GetDomain()]
		if present && !merge {
			return nil, &Error{name, "duplicate domain '" + r.GetDomain() + "' in config file"}
		}
		if !present {
			d = &node{children: map[string]*node{}}
			c.domains[r.GetDomain()] = d
		}
		if err := d.load(name, r.GetDomain()+".", fromProtoDescriptors(r.GetDescriptors())); err != nil {
			return nil, err
		}
	}
	return c, nil
}
