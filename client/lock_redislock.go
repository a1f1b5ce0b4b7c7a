package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// A RedisLock is the lock of github.com/bsm/redislock, used as most of its
// users do: Obtain with a lease and a linear retry every Retry, Release, no
// Refresh.
type RedisLock struct {
	client *redislock.Client
	key    string
	lease  time.Duration
	retry  time.Duration
	fence  fencer

	mu   sync.Mutex
	held map[string]*redislock.Lock // by token: Release needs the library's handle
}

func redisLockKind() LockKind {
	return LockKind{Name: "redislock", About: "github.com/bsm/redislock, without Refresh", Store: OnRedis, Failover: true,
		New: func(_ context.Context, cfg LockConfig) (Lock, error) {
			return newRedisLock(cfg.node(), cfg.Key, cfg.Lease, cfg.Retry, cfg.fencer()), nil
		}}
}

// newRedisLock returns the redislock lock named key on rdb.
func newRedisLock(rdb *redis.Client, key string, lease, retry time.Duration, fence fencer) *RedisLock {
	return &RedisLock{client: redislock.New(rdb), key: key, lease: lease, retry: retryOr(retry),
		fence: fence, held: map[string]*redislock.Lock{}}
}

// Acquire implements Lock.
func (l *RedisLock) Acquire(ctx context.Context) (Grant, error) {
	opt := &redislock.Options{RetryStrategy: redislock.LinearBackoff(l.retry)}
	for {
		// Obtain retries until ctx's deadline; a ctx without one it bounds
		// by the lease, hence the loop.
		lk, err := l.client.Obtain(ctx, l.key, l.lease, opt)
		switch {
		case err == nil:
			g := Grant{Token: lk.Token(), Lease: l.lease}
			if g.Fence, err = l.fence.fence(ctx); err != nil {
				return g, err // the worker will not release it: the lease frees it
			}
			l.mu.Lock()
			l.held[g.Token] = lk
			l.mu.Unlock()
			return g, nil
		case ctx.Err() != nil && !sentErr(err):
			return Grant{}, ErrGaveUp
		case errors.Is(err, redislock.ErrNotObtained), !sentErr(err):
			continue // Obtain's own deadline, not ours
		}
		return Grant{}, fmt.Errorf("redislock obtain %s: %w", l.key, err)
	}
}

// Release implements Lock. redislock does not say whether an expired lock
// was taken by another holder: either is ErrNotHeld.
func (l *RedisLock) Release(ctx context.Context, g Grant) error {
	l.mu.Lock()
	lk := l.held[g.Token]
	delete(l.held, g.Token)
	l.mu.Unlock()
	if lk == nil {
		return fmt.Errorf("redislock release %s: no grant with token %s", l.key, g.Token)
	}
	err := lk.Release(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redislock.ErrLockNotHeld):
		return ErrNotHeld
	}
	return fmt.Errorf("redislock release %s: %w", l.key, err)
}
