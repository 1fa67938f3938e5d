package test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	bootstrap "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"

	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/config"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

func readmeSection(t *testing.T, path, heading string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if heading == "" {
		return s
	}
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s: no section %q", path, heading)
	}
	s = s[i+len(heading)+2:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

func yamlToJSON(t *testing.T, y string) []byte {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(y), &v); err != nil {
		t.Fatalf("yaml: %v\n%s", err, y)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestReadmeEnvoySnippets: the main README's Envoy bootstrap and Istio filter parse as Envoy's
// protos (field names, types, and every typed_config), and the Envoy Gateway snippets are YAML.
func TestReadmeEnvoySnippets(t *testing.T) {
	blocks := yamlBlock.FindAllStringSubmatch(readmeSection(t, "../../README.md", "## Envoy, Istio and Envoy Gateway"), -1)
	if len(blocks) != 4 {
		t.Fatalf("%d yaml blocks, want 4 (Envoy, Istio, EnvoyGateway, BackendTrafficPolicy)", len(blocks))
	}
	var b bootstrap.Bootstrap
	if err := protojson.Unmarshal(yamlToJSON(t, blocks[0][1]), &b); err != nil {
		t.Fatalf("Envoy bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("Envoy bootstrap: %v", err)
	}
	var filter struct {
		Spec struct {
			ConfigPatches []struct {
				Patch struct {
					Value any `yaml:"value"`
				} `yaml:"patch"`
			} `yaml:"configPatches"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal([]byte(blocks[1][1]), &filter); err != nil || len(filter.Spec.ConfigPatches) != 1 {
		t.Fatalf("Istio EnvoyFilter: %v", err)
	}
	value, _ := yaml.Marshal(filter.Spec.ConfigPatches[0].Patch.Value)
	var hf hcm.HttpFilter
	if err := protojson.Unmarshal(yamlToJSON(t, string(value)), &hf); err != nil {
		t.Fatalf("Istio filter patch: %v", err)
	}
	if err := hf.ValidateAll(); err != nil {
		t.Fatalf("Istio filter patch: %v", err)
	}
	for _, blk := range blocks[2:] {
		yamlToJSON(t, blk[1])
	}
}

// TestReadmeConfigSnippets: every rate limit configuration in rls/README.md loads.
func TestReadmeConfigSnippets(t *testing.T) {
	n := 0
	for _, blk := range yamlBlock.FindAllStringSubmatch(readmeSection(t, "../README.md", ""), -1) {
		if !strings.HasPrefix(blk[1], "domain:") {
			continue
		}
		n++
		if _, err := config.Load([]config.File{{Name: "README", Content: []byte(blk[1])}}, false); err != nil {
			t.Errorf("rls/README.md configuration does not load: %v\n%s", err, blk[1])
		}
	}
	if n < 2 {
		t.Fatalf("%d configurations in rls/README.md", n)
	}
}
