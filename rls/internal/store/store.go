// Package store holds every Redis call of the service: RL.ALL (with NAME, CHARGE, DETAIL, SHADOW,
// PEEK, DEDUP and HOLD), RL.SETTLE and RL.REFUND, made with the project's Go client
// (github.com/redis-ratelimit/redis-ratelimit/clients/go) over a go-redis UniversalClient
// (standalone, Sentinel or Cluster). Nothing else in the service talks to Redis.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
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
	rdb redis.UniversalClient
	c   *ratelimit.Client
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
	return &Store{rdb: c, c: ratelimit.New(c), bySlot: cluster, holdTTL: holdTTL}
}

// Ping checks the connection.
func (s *Store) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// Close closes the client.
func (s *Store) Close() error { return s.rdb.Close() }

// words is a limiter already written as RL.ALL takes it, for the client's Limiter interface.
type words struct {
	w      []string
	charge uint64
	name   string
}

func (l words) Command() string               { return "RL." + l.w[0] }
func (l words) Word() string                  { return l.w[0] }
func (l words) Quota() int64                  { return 0 }
func (l words) WindowDuration() time.Duration { return 0 }
func (l words) ID() string                    { return strings.Join(l.w, "-") }
func (l words) Params() ([]any, error) {
	out := make([]any, 0, len(l.w))
	for _, a := range l.w[1:] {
		out = append(out, a)
	}
	return out, nil
}
func (l words) Spec() ([]any, error) {
	out := make([]any, 0, len(l.w)+4)
	for _, a := range l.w {
		out = append(out, a)
	}
	return append(out, "NAME", l.name, "CHARGE", l.charge), nil
}

func (s *Store) all(ctx context.Context, ls []Limiter, opts ...ratelimit.Option) (bool, []Reply, error) {
	specs := make([]ratelimit.Spec, len(ls))
	for i, l := range ls {
		specs[i] = ratelimit.Spec{Key: l.Key, Limiter: words{w: l.Spec, charge: l.Cost, name: fmt.Sprintf("d%d", i)}}
	}
	r, err := s.c.All(ctx, specs, append(opts, ratelimit.Detail())...)
	if err != nil {
		return false, nil, err
	}
	if len(r.Limiters) != len(ls) {
		return false, nil, fmt.Errorf("RL.ALL replied %d limiters for %d", len(r.Limiters), len(ls))
	}
	out := make([]Reply, len(ls))
	for i, d := range r.Limiters {
		out[i] = Reply{Granted: d.Granted, Limit: d.Limit, Remaining: d.Remaining, RetryAfterMs: d.RetryAfterMs, ResetAfterMs: d.ResetAfterMs}
	}
	return r.Reason == "granted" || r.Reason == "shadow", out, nil
}

// Slot is the Redis Cluster hash slot of a key (CRC16 of the key or of its {hash tag}).
func Slot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
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
	var opts []ratelimit.Option
	if shadow {
		opts = append(opts, ratelimit.Shadow())
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
	}
	if len(groups) <= 1 {
		return s.all(ctx, ls, opts...)
	}
	return s.chargeSlots(ctx, ls, groups, opts)
}

func requestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// parallel runs f(i) for i < n at once and waits.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); f(i) }(i)
	}
	wg.Wait()
}

func (s *Store) chargeSlots(ctx context.Context, ls []Limiter, groups [][]int, opts []ratelimit.Option) (bool, []Reply, error) {
	id := requestID()
	opts = append(opts, ratelimit.Dedup(id), ratelimit.Hold(s.holdTTL))
	sub := make([][]Limiter, len(groups))
	for g, idx := range groups {
		for _, i := range idx {
			sub[g] = append(sub[g], ls[i])
		}
	}
	oks := make([]bool, len(groups))
	rss := make([][]Reply, len(groups))
	errs := make([]error, len(groups))
	parallel(len(groups), func(g int) { oks[g], rss[g], errs[g] = s.all(ctx, sub[g], opts...) })
	out := make([]Reply, len(ls))
	allGranted := true
	var firstErr error
	for g, idx := range groups {
		if errs[g] != nil {
			firstErr = errors.Join(firstErr, errs[g])
			allGranted = false
			continue
		}
		if !oks[g] {
			allGranted = false
		}
		for j, i := range idx {
			out[i] = rss[g][j]
		}
	}
	// Settle: the held units are charged when every slot granted, given back otherwise.
	settleErrs := make([]error, len(groups))
	parallel(len(groups), func(g int) {
		if errs[g] != nil || !oks[g] {
			return
		}
		keys := make([]string, len(sub[g]))
		units := make([]int64, len(sub[g]))
		for j, l := range sub[g] {
			keys[j] = l.Key
			if allGranted {
				units[j] = int64(l.Cost)
			}
		}
		if _, err := s.c.Settle(ctx, keys, id, units); err != nil {
			// An unsettled hold gives its units back after holdTTL: never an over-charge.
			settleErrs[g] = fmt.Errorf("RL.SETTLE: %w", err)
		}
	})
	for _, e := range settleErrs {
		firstErr = errors.Join(firstErr, e)
	}
	if firstErr != nil {
		return false, out, firstErr
	}
	if !allGranted {
		// Slots that granted and were given back report as not charged.
		for g, idx := range groups {
			if oks[g] {
				for _, i := range idx {
					out[i].Remaining += int64(ls[i].Cost)
					out[i].Granted = 0
				}
			}
		}
	}
	return allGranted, out, nil
}

// Each evaluates every limiter on its own (one single-key RL.ALL each, sent at once): for
// shadow-mode descriptors (shadow true: SHADOW) or to report a limiter's state without charging
// it (peek true: PEEK).
func (s *Store) Each(ctx context.Context, ls []Limiter, shadow, peek bool) ([]Reply, error) {
	var opts []ratelimit.Option
	if shadow {
		opts = append(opts, ratelimit.Shadow())
	}
	if peek {
		opts = append(opts, ratelimit.Peek())
	}
	out := make([]Reply, len(ls))
	errs := make([]error, len(ls))
	parallel(len(ls), func(i int) {
		_, rs, err := s.all(ctx, ls[i:i+1], opts...)
		if err == nil {
			out[i] = rs[0]
		}
		errs[i] = err
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Refund gives units back (Envoy's is_negative_hits), one RL.REFUND per limiter, sent at once; a
// key that does not exist is left alone (Missing).
func (s *Store) Refund(ctx context.Context, ls []Limiter) ([]Reply, error) {
	out := make([]Reply, len(ls))
	errs := make([]error, len(ls))
	parallel(len(ls), func(i int) {
		if ls[i].Cost == 0 {
			out[i] = Reply{Missing: true}
			return
		}
		r, err := s.c.Refund(ctx, ls[i].Key, int64(ls[i].Cost))
		switch {
		case err != nil:
			errs[i] = err
		case r == nil:
			out[i] = Reply{Missing: true}
		default:
			out[i] = Reply{Granted: r.Granted, Limit: r.Limit, Remaining: r.Remaining, RetryAfterMs: r.RetryAfterMs, ResetAfterMs: r.ResetAfterMs}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// SetBySlot makes Charge group keys by hash slot even on a standalone server (tests of the
// cross-slot path).
func (s *Store) SetBySlot(v bool) { s.bySlot = v }
