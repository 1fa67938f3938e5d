// Package store holds every Redis call of the service: RL.ALL (with NAME, CHARGE, DETAIL, SHADOW,
// PEEK, DEDUP and HOLD), RL.SETTLE and RL.REFUND, sent through a go-redis UniversalClient
// (standalone, Sentinel or Cluster). Nothing else in the service talks to Redis, so moving to
// another client changes this file only.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter is one limit to charge: its key, its limiter as RL.ALL takes it (`FIXED 10 60s`), and
// the units this request asks of it.
type Limiter struct {
	Key  string
	Spec []string
	Cost uint64
}

// Reply is one limiter's state as the module reports it in the detailed reply.
type Reply struct {
	Granted      int64
	Limit        int64
	Remaining    int64
	RetryAfterMs int64 // 0 when this limiter would grant; -1 when it never can
	ResetAfterMs int64
	Missing      bool // RL.REFUND on a key that does not exist
}

// Denies tells whether this limiter denied (or, under SHADOW, would have denied) the call.
func (r Reply) Denies() bool { return r.RetryAfterMs != 0 }

// Store sends the module's commands.
type Store struct {
	c redis.UniversalClient
	// bySlot groups limiters by hash slot (set for Redis Cluster; tests set it on a standalone
	// server to run the cross-slot path).
	bySlot  bool
	holdTTL time.Duration
}

// New wraps a client. cluster makes requests whose keys fall in several hash slots use one
// RL.ALL per slot with HOLD, settled once every slot has answered.
func New(c redis.UniversalClient, cluster bool, holdTTL time.Duration) *Store {
	if holdTTL <= 0 {
		holdTTL = 10 * time.Second
	}
	return &Store{c: c, bySlot: cluster, holdTTL: holdTTL}
}

// Ping checks the connection.
func (s *Store) Ping(ctx context.Context) error { return s.c.Ping(ctx).Err() }

// Close closes the client.
func (s *Store) Close() error { return s.c.Close() }

func rlAll(ctx context.Context, ls []Limiter, opts ...string) *redis.Cmd {
	args := make([]any, 0, 2+len(ls)*8+len(opts))
	args = append(args, "RL.ALL", len(ls))
	for _, l := range ls {
		args = append(args, l.Key)
	}
	for i, l := range ls {
		for _, a := range l.Spec {
			args = append(args, a)
		}
		args = append(args, "NAME", fmt.Sprintf("d%d", i), "CHARGE", l.Cost)
	}
	for _, o := range opts {
		args = append(args, o)
	}
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(2)
	return cmd
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("unexpected reply element %T", v)
}

// parseDetail reads RL.ALL's RESP2 detailed reply: [granted limit remaining retry reset denied_by
// reason [[name key cost granted limit remaining retry reset window policy] ...]].
func parseDetail(v any, n int) (granted bool, out []Reply, err error) {
	top, ok := v.([]any)
	if !ok || len(top) != 8 {
		return false, nil, fmt.Errorf("unexpected RL.ALL reply %v", v)
	}
	reason, _ := top[6].(string)
	ls, ok := top[7].([]any)
	if !ok || len(ls) != n {
		return false, nil, fmt.Errorf("unexpected RL.ALL limiter list %v", top[7])
	}
	out = make([]Reply, n)
	for i, e := range ls {
		f, ok := e.([]any)
		if !ok || len(f) < 9 {
			return false, nil, fmt.Errorf("unexpected RL.ALL limiter entry %v", e)
		}
		var vals [5]int64
		for j := 0; j < 5; j++ {
			if vals[j], err = toInt(f[3+j]); err != nil {
				return false, nil, err
			}
		}
		out[i] = Reply{Granted: vals[0], Limit: vals[1], Remaining: vals[2], RetryAfterMs: vals[3], ResetAfterMs: vals[4]}
	}
	return reason == "granted" || reason == "shadow", out, nil
}

func parseLimiterReply(v any) (Reply, error) {
	if v == nil {
		return Reply{Missing: true}, nil
	}
	a, ok := v.([]any)
	if !ok || len(a) != 5 {
		return Reply{}, fmt.Errorf("unexpected limiter reply %v", v)
	}
	var vals [5]int64
	for j := range vals {
		x, err := toInt(a[j])
		if err != nil {
			return Reply{}, err
		}
		vals[j] = x
	}
	return Reply{Granted: vals[0], Limit: vals[1], Remaining: vals[2], RetryAfterMs: vals[3], ResetAfterMs: vals[4]}, nil
}

// Slot is the Redis Cluster hash slot of a key (CRC16 of the key or of its {hash tag}).
func Slot(key string) int {
	if s := indexByte(key, '{'); s >= 0 {
		if e := indexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// Charge evaluates the limiters all or nothing: every limiter is charged its cost only if every
// one grants. With shadow, a call that enforcement would deny is let through and charges nothing
// (the module's SHADOW). The replies are in the order of ls.
//
// Keys in one hash slot (always, on a standalone server) go in ONE RL.ALL: atomic. Keys in several
// slots (Redis Cluster) go in one RL.ALL per slot, sent together, each with HOLD under one
// request id; when every slot granted, RL.SETTLE charges the held units on each slot; when any
// slot denied, RL.SETTLE 0 gives the held units back on the slots that granted. A service that
// dies between the two steps leaves holds that give their units back by themselves after holdTTL.
func (s *Store) Charge(ctx context.Context, ls []Limiter, shadow bool) (bool, []Reply, error) {
	if len(ls) == 0 {
		return true, nil, nil
	}
	opts := []string{"DETAIL"}
	if shadow {
		opts = append(opts, "SHADOW")
	}
	groups := [][]int{}
	if s.bySlot {
		index := map[int]int{}
		for i, l := range ls {
			sl := Slot(l.Key)
			g, ok := index[sl]
			if !ok {
				g = len(groups)
				index[sl] = g
				groups = append(groups, nil)
			}
			groups[g] = append(groups[g], i)
		}
	} else {
		all := make([]int, len(ls))
		for i := range all {
			all[i] = i
		}
		groups = append(groups, all)
	}
	if len(groups) == 1 {
		cmd := rlAll(ctx, ls, opts...)
		_ = s.c.Process(ctx, cmd)
		v, err := cmd.Result()
		if err != nil {
			return false, nil, err
		}
		return parseDetail(v, len(ls))
	}
	return s.chargeSlots(ctx, ls, groups, opts)
}

func requestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Store) chargeSlots(ctx context.Context, ls []Limiter, groups [][]int, opts []string) (bool, []Reply, error) {
	id := requestID()
	hold := fmt.Sprintf("%dms", s.holdTTL.Milliseconds())
	opts = append(opts, "DEDUP", id, "HOLD", hold)
	sub := make([][]Limiter, len(groups))
	cmds := make([]*redis.Cmd, len(groups))
	pipe := s.c.Pipeline()
	for g, idx := range groups {
		for _, i := range idx {
			sub[g] = append(sub[g], ls[i])
		}
		cmds[g] = rlAll(ctx, sub[g], opts...)
		_ = pipe.Process(ctx, cmds[g])
	}
	_, _ = pipe.Exec(ctx)
	out := make([]Reply, len(ls))
	allGranted := true
	held := make([]bool, len(groups))
	var firstErr error
	for g, idx := range groups {
		v, err := cmds[g].Result()
		if err != nil {
			firstErr = errors.Join(firstErr, err)
			allGranted = false
			continue
		}
		ok, rs, err := parseDetail(v, len(idx))
		if err != nil {
			firstErr = errors.Join(firstErr, err)
			allGranted = false
			continue
		}
		held[g] = ok
		if !ok {
			allGranted = false
		}
		for j, i := range idx {
			out[i] = rs[j]
		}
	}
	// Settle: the held units are charged when every slot granted, given back otherwise.
	settle := s.c.Pipeline()
	scmds := []*redis.Cmd{}
	for g := range groups {
		if !held[g] {
			continue
		}
		args := []any{"RL.SETTLE", len(sub[g])}
		for _, l := range sub[g] {
			args = append(args, l.Key)
		}
		args = append(args, id)
		for _, l := range sub[g] {
			if allGranted {
				args = append(args, l.Cost)
			} else {
				args = append(args, 0)
			}
		}
		cmd := redis.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(2)
		scmds = append(scmds, cmd)
		_ = settle.Process(ctx, cmd)
	}
	if len(scmds) > 0 {
		_, _ = settle.Exec(ctx)
		for _, c := range scmds {
			if err := c.Err(); err != nil {
				// An unsettled hold gives its units back after holdTTL: never an over-charge.
				firstErr = errors.Join(firstErr, fmt.Errorf("RL.SETTLE: %w", err))
			}
		}
	}
	if firstErr != nil {
		return false, out, firstErr
	}
	if !allGranted {
		// Slots that granted and were given back report as not charged.
		for g, idx := range groups {
			if held[g] {
				for _, i := range idx {
					out[i].Remaining += int64(ls[i].Cost)
					out[i].Granted = 0
				}
			}
		}
	}
	return allGranted, out, nil
}

// Each evaluates every limiter on its own (one single-key RL.ALL each, sent in one pipeline):
// for shadow-mode descriptors (shadow true: SHADOW) or to report a limiter's state without
// charging it (peek true: PEEK).
func (s *Store) Each(ctx context.Context, ls []Limiter, shadow, peek bool) ([]Reply, error) {
	opts := []string{"DETAIL"}
	if shadow {
		opts = append(opts, "SHADOW")
	}
	if peek {
		opts = append(opts, "PEEK")
	}
	cmds := make([]*redis.Cmd, len(ls))
	pipe := s.c.Pipeline()
	for i := range ls {
		cmds[i] = rlAll(ctx, ls[i:i+1], opts...)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	out := make([]Reply, len(ls))
	for i, c := range cmds {
		v, err := c.Result()
		if err != nil {
			return nil, err
		}
		_, rs, err := parseDetail(v, 1)
		if err != nil {
			return nil, err
		}
		out[i] = rs[0]
	}
	return out, nil
}

// Refund gives units back (Envoy's is_negative_hits), one RL.REFUND per limiter in one
// pipeline; a key that does not exist is left alone (Missing).
func (s *Store) Refund(ctx context.Context, ls []Limiter) ([]Reply, error) {
	cmds := make([]*redis.Cmd, len(ls))
	pipe := s.c.Pipeline()
	for i, l := range ls {
		if l.Cost == 0 {
			continue
		}
		cmds[i] = redis.NewCmd(ctx, "RL.REFUND", l.Key, l.Cost)
		cmds[i].SetFirstKeyPos(1)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	out := make([]Reply, len(ls))
	for i, c := range cmds {
		if c == nil {
			out[i] = Reply{Missing: true}
			continue
		}
		v, err := c.Result()
		if err == redis.Nil {
			out[i] = Reply{Missing: true}
			continue
		}
		if err != nil {
			return nil, err
		}
		if out[i], err = parseLimiterReply(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SetBySlot makes Charge group keys by hash slot even on a standalone server (tests of the
// cross-slot path).
func (s *Store) SetBySlot(v bool) { s.bySlot = v }
