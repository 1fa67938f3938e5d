package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/redis/go-redis/v9"
)

type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

var policyNameRE = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// PolicyOptions are the options of RL.POLICY SET: Shadow (no call under the policy is denied;
// each is charged as enforced and counted as shadow_denied when it would have been) and Desc.
type PolicyOptions struct {
	Shadow bool
	Desc   string
}

// onEveryMaster runs fn on every master of a cluster client, else once on the client.
func (c *Client) onEveryMaster(ctx context.Context, fn func(ctx context.Context, rdb doer) error) error {
	if b, err := c.Backend(ctx); err == nil && b == BackendLua {
		_, _, err := scriptCall([]any{"RL.POLICY"})
		return err
	}
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return fn(ctx, node) })
	}
	return fn(ctx, c.rdb)
}

func doOn(ctx context.Context, rdb doer, args ...any) (any, error) {
	v, err := rdb.Do(ctx, args...).Result()
	return v, classify(err)
}

// PolicySet is RL.POLICY SET name limiter [limiter ...] [SHADOW] [DESC text]: define or replace
// the policy name (1-64 of a-z, 0-9, _); returns its version. Keys under a replaced policy keep
// the units they used. On a *redis.ClusterClient it is set on every master (each shard holds its
// own copy) and the version is the largest.
func (c *Client) PolicySet(ctx context.Context, name string, limiters []Limiter, opt PolicyOptions) (int64, error) {
	if !policyNameRE.MatchString(name) {
		return 0, fmt.Errorf("ratelimit: a policy name is 1-64 of a-z, 0-9, _, not %q", name)
	}
	if len(limiters) == 0 {
		return 0, errors.New("ratelimit: a policy needs at least one limiter")
	}
	args := []any{"RL.POLICY", "SET", name}
	for _, l := range limiters {
		sp, err := l.Spec()
		if err != nil {
			return 0, err
		}
		args = append(args, sp...)
	}
	if opt.Shadow {
		args = append(args, "SHADOW")
	}
	if opt.Desc != "" {
		args = append(args, "DESC", opt.Desc)
	}
	var mu sync.Mutex
	var version int64
	err := c.onEveryMaster(ctx, func(ctx context.Context, rdb doer) error {
		v, err := doOn(ctx, rdb, args...)
		if err != nil {
			return err
		}
		n, err := integer(v)
		mu.Lock()
		version = max(version, n)
		mu.Unlock()
		return err
	})
	return version, err
}

// PolicyGet is RL.POLICY GET: the policy's definition; nil for an unknown name.
func (c *Client) PolicyGet(ctx context.Context, name string) (*PolicyDefinition, error) {
	v, err := c.Do(ctx, 0, "RL.POLICY", "GET", name)
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parsePolicy(name, v)
}

// PolicyDel is RL.POLICY DEL: true if the policy existed (on a cluster: on any master). Later
// calls under it fail naming it (ErrUnknownPolicy).
func (c *Client) PolicyDel(ctx context.Context, name string) (bool, error) {
	var mu sync.Mutex
	found := false
	err := c.onEveryMaster(ctx, func(ctx context.Context, rdb doer) error {
		v, err := doOn(ctx, rdb, "RL.POLICY", "DEL", name)
		if err != nil {
			return err
		}
		n, err := integer(v)
		mu.Lock()
		found = found || n == 1
		mu.Unlock()
		return err
	})
	return found, err
}

// PolicyList is RL.POLICY LIST: every policy's name and version (a number that grows with each
// change).
func (c *Client) PolicyList(ctx context.Context) (map[string]int64, error) {
	v, err := c.Do(ctx, 0, "RL.POLICY", "LIST")
	if err != nil {
		return nil, err
	}
	ps, err := pairs(v)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(ps))
	for _, p := range ps {
		k, err := text(p[0])
		if err != nil {
			return nil, err
		}
		if out[k], err = integer(p[1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PolicyDump is RL.POLICY DUMP: every policy as one binary payload, for PolicyRestore.
func (c *Client) PolicyDump(ctx context.Context) ([]byte, error) {
	v, err := c.Do(ctx, 0, "RL.POLICY", "DUMP")
	if err != nil {
		return nil, err
	}
	s, err := text(v)
	return []byte(s), err
}

// PolicyRestore is RL.POLICY RESTORE payload [MERGE]: replace every policy with the payload's
// (versions included), or with merge add or replace only the payload's. On a
// *redis.ClusterClient it runs on every master.
func (c *Client) PolicyRestore(ctx context.Context, payload []byte, merge bool) error {
	args := []any{"RL.POLICY", "RESTORE", payload}
	if merge {
		args = append(args, "MERGE")
	}
	return c.onEveryMaster(ctx, func(ctx context.Context, rdb doer) error {
		_, err := doOn(ctx, rdb, args...)
		return err
	})
}

// CheckModule reports whether the server has the module loaded (COMMAND INFO rl.gcra): nil, or
// an error for which errors.Is(err, ErrModuleNotLoaded) says how to load it.
func (c *Client) CheckModule(ctx context.Context) error {
	if b, err := c.Backend(ctx); err == nil && b == BackendLua {
		return nil // the script backend needs no module
	}
	v, err := c.Do(ctx, 0, "COMMAND", "INFO", "rl.gcra")
	if err != nil {
		return err
	}
	if list, ok := v.([]any); ok && len(list) == 1 && list[0] != nil {
		return nil
	}
	return &Error{kind: ErrModuleNotLoaded, Err: errors.New("COMMAND INFO rl.gcra: unknown command")}
}

func randomID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
