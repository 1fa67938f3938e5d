package ratelimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The script backend: lua/ratelimit.lua of the repository, embedded (a copy made by
// scripts/sync-lua.sh; a test checks it byte for byte), for servers that cannot load the module.
//
//go:embed ratelimit.lua
var scriptSource string

// Script is the script backend as go-redis runs it (EVALSHA, then EVAL after NOSCRIPT).
var Script = redis.NewScript(scriptSource)

// ScriptSource is the text of the script backend (lua/ratelimit.lua).
func ScriptSource() string { return scriptSource }

// Backend chooses what runs the limiter commands.
type Backend string

const (
	// BackendAuto (the default) uses the module when COMMAND INFO finds it on the server, else
	// the script; decided once per Client (at its first command) and logged.
	BackendAuto Backend = "auto"
	// BackendModule uses the module's commands only.
	BackendModule Backend = "module"
	// BackendLua uses the script only (managed Redis: ElastiCache, Memorystore, Upstash, ...).
	BackendLua Backend = "lua"
)

// ErrModuleRequired: the Client runs the script backend, which cannot do what was asked
// (policies, Dedup, Hold/Settle, Delay, Shadow, Block, leases, calendar windows, the leaky
// bucket, the sliding log, StreamCount, Info, Refund, Throttle, At).
var ErrModuleRequired = errors.New("ratelimit: this needs the redis-ratelimit module " +
	"(loadmodule /path/to/libredis_ratelimit.so); the script backend does not support it")

// KeySuffix is what the script backend adds to a key: the module's keys and the script's are
// never the same key (the suffix keeps a key's hash tag, so RL.ALL stays in one slot).
const KeySuffix = ":lua"

// ClientOption configures a Client (New).
type ClientOption func(*Client)

// WithBackend sets the backend (BackendAuto by default).
func WithBackend(b Backend) ClientOption { return func(c *Client) { c.choice = b } }

// WithLogger sets the logger of the backend's choice (slog.Default() by default).
func WithLogger(l *slog.Logger) ClientOption { return func(c *Client) { c.logger = l } }

type backendState struct {
	choice   Backend
	logger   *slog.Logger
	mu       sync.Mutex
	resolved Backend
}

var (
	scriptOneKey  = map[string]bool{"RL.GCRA": true, "RL.TOKENBUCKET": true, "RL.FIXED": true, "RL.SLIDINGCOUNTER": true, "RL.CHECK": true}
	scriptNumKeys = map[string]bool{"RL.ALL": true, "RL.CHECKALL": true}
)

// Backend returns the backend that runs this Client's limiter commands, asking the server
// (COMMAND INFO rl.gcra) the first time under BackendAuto.
func (c *Client) Backend(ctx context.Context) (Backend, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resolved != "" {
		return c.resolved, nil
	}
	switch c.choice {
	case "", BackendAuto:
	case BackendModule, BackendLua:
		c.resolved = c.choice
		return c.resolved, nil
	default:
		return "", fmt.Errorf("ratelimit: backend %q is not auto, module or lua", c.choice)
	}
	v, err := c.rdb.Do(ctx, "COMMAND", "INFO", "rl.gcra").Result()
	if err != nil {
		return "", err
	}
	logger := c.logger
	if logger == nil {
		logger = slog.Default()
	}
	if list, ok := v.([]any); ok && len(list) == 1 && list[0] != nil {
		c.resolved = BackendModule
		logger.Info("ratelimit: backend auto: the redis-ratelimit module is loaded, using it")
	} else {
		c.resolved = BackendLua
		logger.Info("ratelimit: backend auto: no redis-ratelimit module on this server, using the " +
			"script backend (lua/ratelimit.lua): RL.GCRA, RL.TOKENBUCKET, RL.FIXED, RL.SLIDINGCOUNTER, RL.ALL only")
	}
	return c.resolved, nil
}

func isLimiterCommand(name string) bool {
	return strings.HasPrefix(name, "RL.") || name == "CL.THROTTLE"
}

// scriptCall is the module command args as the script's keys and arguments.
func scriptCall(args []any) ([]string, []any, error) {
	name := strings.ToUpper(fmt.Sprint(args[0]))
	switch {
	case scriptOneKey[name] && len(args) >= 2:
		return []string{fmt.Sprint(args[1]) + KeySuffix}, append([]any{name}, args[2:]...), nil
	case scriptNumKeys[name] && len(args) >= 2:
		n, err := strconv.Atoi(fmt.Sprint(args[1]))
		if err != nil || n < 1 || len(args) < 2+n {
			return nil, nil, fmt.Errorf("ratelimit: %s needs numkeys and its keys", name)
		}
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprint(args[2+i]) + KeySuffix
		}
		return keys, append([]any{name}, args[2+n:]...), nil
	case name == "RL.POLICY" || name == "RL.LIMIT":
		return nil, nil, &Error{kind: ErrModuleRequired, Err: fmt.Errorf("%w: policies (RL.POLICY, RL.LIMIT)", ErrModuleRequired)}
	}
	return nil, nil, &Error{kind: ErrModuleRequired, Err: fmt.Errorf("%w: %s", ErrModuleRequired, name)}
}

// doScript runs a module command through the script backend.
func (c *Client) doScript(ctx context.Context, args []any) (any, error) {
	keys, argv, err := scriptCall(args)
	if err != nil {
		return nil, err
	}
	v, err := Script.Run(ctx, c.rdb, keys, argv...).Result()
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) && strings.Contains(re.Error(), "redis-ratelimit module") {
			return nil, &Error{kind: ErrModuleRequired, Err: err}
		}
		return nil, classify(err)
	}
	return v, nil
}
