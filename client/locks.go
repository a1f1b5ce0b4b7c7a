package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// LockConfig is what every lock adapter may draw on.
type LockConfig struct {
	Redis    *redis.Client
	Postgres *pgxpool.Pool // the workload's; pg-advisory opens a session of its own on its server
	Key      string        // the lock's name
	FenceKey string        // where fencing tokens come from, for locks that fence with INCR
	Lease    time.Duration // the lease, for locks that have one
	Retry    time.Duration // wait between attempts, for locks that poll
	Fenced   bool          // hand out fencing tokens with each grant
	// RedisURL is the server Redis holds, for an adapter (exec:) to
	// connect to; OpTimeout bounds each of its answers.
	RedisURL  string
	OpTimeout time.Duration
}

// LockNames lists the locks NewLock builds.
func LockNames() []string {
	return []string{"setnx", "renew", "redsync", "redislock", "pg-advisory"}
}

// NewLock returns the lock called name:
//
//   - setnx: SET NX PX with a compare-and-delete release (SetNX), the reference;
//   - renew: the same lease, extended every lease/3 by a watchdog goroutine (Renew);
//   - redsync: github.com/go-redsync/redsync/v4 on one Redis, without Extend (Redsync);
//   - redislock: github.com/bsm/redislock, without Refresh (RedisLock);
//   - pg-advisory: a PostgreSQL session advisory lock, with no lease (PGAdvisory),
//     on a session of its own that lasts as long as the lock value.
//
// Every one of them, fenced, takes its fencing token by an INCR of FenceKey
// right after it acquired: none of them hands one out itself.
func NewLock(name string, cfg LockConfig) (Lock, error) {
	setnx := SetNX{Redis: cfg.Redis, Key: cfg.Key, FenceKey: cfg.FenceKey, Lease: cfg.Lease,
		Retry: cfg.Retry, Fenced: cfg.Fenced}
	fence := fencer{Redis: cfg.Redis, Key: cfg.FenceKey, On: cfg.Fenced}
	switch name {
	case "setnx":
		return &setnx, nil
	case "renew":
		return &Renew{SetNX: setnx}, nil
	case "redsync":
		return newRedsync(cfg.Redis, cfg.Key, cfg.Lease, cfg.Retry, fence), nil
	case "redislock":
		return newRedisLock(cfg.Redis, cfg.Key, cfg.Lease, cfg.Retry, fence), nil
	case "pg-advisory":
		return newPGAdvisory(cfg.Postgres, cfg.Key, cfg.Retry, fence)
	}
	return nil, fmt.Errorf("no lock %q (want one of %v)", name, LockNames())
}

// A fencer hands out fencing tokens for locks that have none of their own:
// an INCR of Key, taken right after the lock was acquired. It is a real fence
// only when no other holder can have acquired between the acquisition and the
// INCR — true of a lock with no lease, but not of a lease lock whose holder
// stalls in that one round trip.
type fencer struct {
	Redis *redis.Client
	Key   string
	On    bool
}

// fence returns the next fencing token, or 0 when fencing is off.
func (f fencer) fence(ctx context.Context) (int64, error) {
	if !f.On {
		return 0, nil
	}
	// The lock is held: the INCR is not cut short when ctx ends, or the
	// grant would end with an unknown outcome.
	n, err := f.Redis.Incr(context.WithoutCancel(ctx), f.Key).Result()
	if err != nil {
		return 0, fmt.Errorf("INCR %s: %w", f.Key, err)
	}
	return n, nil
}

// newToken returns a random holder token.
func newToken() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lock token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// wait waits d, and reports false when ctx ended first.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryOr returns d, or 5 ms when d is not positive.
func retryOr(d time.Duration) time.Duration {
	if d <= 0 {
		return 5 * time.Millisecond
	}
	return d
}

// advisoryKey maps a lock name to the bigint key of a PostgreSQL advisory
// lock.
func advisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}
