package ratelimit

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var limitRE = regexp.MustCompile(`^\s*([0-9]+)\s*(?:/|per)\s*(second|minute|hour|day|s|m|h|d)\s*$`)

// ParseLimit reads a limit string, "N/second", "N/minute", "N/hour", "N/day" (also N/s, N/m,
// N/h, N/d and "N per minute"), as GCRA: a burst of N, N per one unit (N requests at once,
// then N per period).
func ParseLimit(s string) (GCRA, error) {
	m := limitRE.FindStringSubmatch(strings.ToLower(s))
	if m == nil {
		return GCRA{}, fmt.Errorf("ratelimit: invalid limit %q: use N/second, N/minute, N/hour or N/day", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n < 1 {
		return GCRA{}, fmt.Errorf("ratelimit: invalid limit %q: N must be a positive integer", s)
	}
	unit := map[string]time.Duration{"second": time.Second, "s": time.Second, "minute": time.Minute,
		"m": time.Minute, "hour": time.Hour, "h": time.Hour, "day": 24 * time.Hour, "d": 24 * time.Hour}[m[2]]
	return GCRA{Burst: n, Rate: n, Period: unit}, nil
}

// MustParseLimit is ParseLimit that panics on a malformed string (for package-level limits).
func MustParseLimit(s string) GCRA {
	g, err := ParseLimit(s)
	if err != nil {
		panic(err)
	}
	return g
}
