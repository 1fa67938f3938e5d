package ratelimit

import (
	"context"
	"fmt"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MetricsObserver receives what MetricsHook counts, named after OpenTelemetry's rate-limiting
// conventions (ratelimit.requests, ratelimit.request.time_in_queue): feed it to
// prometheus/client_golang or an OpenTelemetry meter. Labels are the command and the named
// policy, never the key, so cardinality stays bounded. Calls come from the goroutine that ran
// the command; an observer must be safe for concurrent use and must not block.
type MetricsObserver interface {
	// Request is one limiter call decided: command ("rl.gcra", "rl.limit", ...), the named
	// policy ("" without one), acquired (granted in full) or limited, and near: granted with
	// remaining below the hook's near-limit percent of the limit.
	Request(ctx context.Context, command, policy string, acquired, near bool)
	// TimeInQueue is how long an RL.ACQUIRE ... WAIT call took (its wait plus a round trip).
	TimeInQueue(ctx context.Context, d time.Duration, acquired bool)
}

// MetricsHook is a go-redis hook that reports every limiter reply (RL.GCRA, RL.TOKENBUCKET,
// RL.LEAKYBUCKET, RL.FIXED, RL.SLIDING, RL.SLIDINGCOUNTER, RL.ALL, RL.CHECK, RL.CHECKALL,
// RL.LIMIT, RL.ACQUIRE) to o, whichever API sent it (this package's Client, redisrate, or Do):
//
//	rdb.AddHook(ratelimit.MetricsHook(observer, 20))
//
// nearLimitPercent (0 to 100) should match the server's ratelimit.near-limit-percent (default
// 20). A call that fails is not reported. The server counts the same decisions (RL.METRICS).
func MetricsHook(o MetricsObserver, nearLimitPercent int64) redis.Hook {
	if nearLimitPercent < 0 {
		nearLimitPercent = 0
	}
	if nearLimitPercent > 100 {
		nearLimitPercent = 100
	}
	return metricsHook{o: o, percent: nearLimitPercent}
}

// NearLimit reports whether remaining is below percent% of limit, exactly
// (remaining·100 < limit·percent, the module's rule).
func NearLimit(remaining, limit, percent int64) bool {
	if remaining < 0 || limit < 0 || percent < 0 {
		r := new(big.Int).Mul(big.NewInt(remaining), big.NewInt(100))
		l := new(big.Int).Mul(big.NewInt(limit), big.NewInt(percent))
		return r.Cmp(l) < 0
	}
	rh, rl := bits.Mul64(uint64(remaining), 100)
	lh, ll := bits.Mul64(uint64(limit), uint64(percent))
	return rh < lh || (rh == lh && rl < ll)
}

// limiterCommands are the commands whose reply is the limiter reply.
var limiterCommands = map[string]bool{
	"rl.gcra": true, "rl.tokenbucket": true, "rl.leakybucket": true, "rl.fixed": true,
	"rl.sliding": true, "rl.slidingcounter": true, "rl.all": true, "rl.check": true,
	"rl.checkall": true, "rl.limit": true, "rl.acquire": true,
}

type metricsHook struct {
	o       MetricsObserver
	percent int64
}

func (h metricsHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h metricsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.observe(ctx, cmd, time.Since(start), true)
		return err
	}
}

func (h metricsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.observe(ctx, cmd, 0, false)
		}
		return err
	}
}

// word is argument a as text.
func word(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}

// scriptedCommand is the limiter command an EVALSHA/EVAL of the script backend runs (its name
// and its arguments from the name on), so that its replies are reported as the module's are.
func scriptedCommand(name string, args []any) (string, []any) {
	if len(args) < 3 {
		return name, args
	}
	if (name == "evalsha" && word(args[1]) != Script.Hash()) || (name == "eval" && word(args[1]) != scriptSource) {
		return name, args
	}
	n, err := strconv.Atoi(word(args[2]))
	if err != nil || n < 0 || 3+n >= len(args) {
		return name, args
	}
	return strings.ToLower(word(args[3+n])), args[3+n:]
}

func (h metricsHook) observe(ctx context.Context, cmd redis.Cmder, took time.Duration, timed bool) {
	name := strings.ToLower(cmd.Name())
	args := cmd.Args()
	if name == "evalsha" || name == "eval" {
		name, args = scriptedCommand(name, args)
	}
	if !limiterCommands[name] || cmd.Err() != nil {
		return
	}
	c, ok := cmd.(*redis.Cmd)
	if !ok {
		return
	}
	cost, policy, waited := int64(1), "", false
	for i := 1; i < len(args); i++ {
		switch strings.ToUpper(word(args[i])) {
		case "COST":
			if i+1 < len(args) {
				if n, err := strconv.ParseInt(word(args[i+1]), 10, 64); err == nil {
					cost = n
				}
			}
		case "POLICY":
			if (name == "rl.all" || name == "rl.checkall") && i+1 < len(args) {
				policy = word(args[i+1])
			}
		case "WAIT":
			waited = name == "rl.acquire"
		}
	}
	if name == "rl.limit" && len(args) > 2 {
		policy = word(args[2])
	}
	r, err := ParseResult(c.Val(), cost)
	if err != nil {
		return
	}
	near := r.Allowed && NearLimit(r.Remaining, r.Limit, h.percent)
	h.o.Request(ctx, name, policy, r.Allowed, near)
	if waited && timed {
		h.o.TimeInQueue(ctx, took, r.Allowed)
	}
}
