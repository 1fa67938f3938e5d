//go:build tools

// Package tools pins the redis_exporter that `make test-metrics` builds (go.mod, go.sum).
package tools

import _ "github.com/oliver006/redis_exporter"
