package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// A Redsync is the lock of github.com/go-redsync/redsync/v4: Redlock over
// independent Redis nodes (a majority of them must grant; on one node, a
// quorum of one), used as most of its users do: Lock with a lease, Unlock,
// no Extend. Acquire retries every Retry until ctx ends. The lease it
// reports is the one asked for: redsync's own validity (the lease less the
// time the acquisition took and a drift allowance) is shorter, and a holder
// that trusts it does not stop sooner, which is what hiatus measures.
type Redsync struct {
	rs    *redsync.Redsync
	key   string
	lease time.Duration
	retry time.Duration
	fence fencer
}

func redsyncKind() LockKind {
	return LockKind{Name: "redsync", About: "github.com/go-redsync/redsync/v4 on one Redis, without Extend", Store: OnRedis, Failover: true,
		New: func(_ context.Context, cfg LockConfig) (Lock, error) {
			return newRedsync([]*redis.Client{cfg.node()}, cfg.Key, cfg.Lease, cfg.Retry, cfg.fencer()), nil
		}}
}

func redlockKind() LockKind {
	return LockKind{Name: "redlock", About: "redsync over --nodes independent Redis nodes, a majority of which must grant", Store: OnRedisNodes,
		New: func(_ context.Context, cfg LockConfig) (Lock, error) {
			if len(cfg.Nodes) == 0 {
				return nil, fmt.Errorf("redlock needs its nodes (LockConfig.Nodes)")
			}
			return newRedsync(cfg.Nodes, cfg.Key, cfg.Lease, cfg.Retry, cfg.fencer()), nil
		}}
}

// newRedsync returns the redsync lock named key on nodes.
func newRedsync(nodes []*redis.Client, key string, lease, retry time.Duration, fence fencer) *Redsync {
	pools := make([]redsyncredis.Pool, len(nodes))
	for i, n := range nodes {
		pools[i] = goredis.NewPool(n)
	}
	return &Redsync{rs: redsync.New(pools...), key: key, lease: lease, retry: retryOr(retry), fence: fence}
}

// Acquire implements Lock.
func (l *Redsync) Acquire(ctx context.Context) (Grant, error) {
	// Tries without bound: redsync gives up, with ErrFailed, when ctx ends.
	m := l.rs.NewMutex(l.key, redsync.WithExpiry(l.lease), redsync.WithTries(math.MaxInt32),
		redsync.WithRetryDelay(l.retry))
	if err := m.LockContext(ctx); err != nil {
		// Each attempt that was not granted is undone by redsync itself (it
		// deletes its value if there), so giving up leaves no lock behind.
		if ctx.Err() != nil {
			return Grant{}, ErrGaveUp
		}
		return Grant{}, fmt.Errorf("redsync lock %s: %w", l.key, err)
	}
	g := Grant{Token: m.Value(), Lease: l.lease}
	var err error
	if g.Fence, err = l.fence.fence(ctx); err != nil {
		return g, err
	}
	return g, nil
}

// Release implements Lock.
func (l *Redsync) Release(ctx context.Context, g Grant) error {
	m := l.rs.NewMutex(l.key, redsync.WithValue(g.Token))
	ok, err := m.UnlockContext(ctx)
	var taken *redsync.ErrTaken
	switch {
	case ok:
		return nil
	case errors.Is(err, redsync.ErrLockAlreadyExpired):
		return ErrNotHeld
	case errors.As(err, &taken):
		return ErrStolen
	case err == nil:
		return fmt.Errorf("redsync unlock %s: not released, no reason given", l.key)
	}
	return fmt.Errorf("redsync unlock %s: %w", l.key, err)
}
