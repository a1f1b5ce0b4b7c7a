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
	Redis *redis.Client // the run's own Redis: the history's clock, and fencing tokens
	// Nodes are the Redis servers the lock itself is kept on, when it is
	// not kept on Redis: redlock's N independent nodes, or one node whose
	// clock or life a nemesis plays with (a jumped clock must not stamp
	// the history, nor a restart reset the fences).
	Nodes    []*redis.Client
	Postgres *pgxpool.Pool // the workload's; pg-advisory opens a session of its own on its server
	Etcd     []string      // the etcd cluster's client endpoints, for the etcd lock
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
	return []string{"setnx", "renew", "redsync", "redislock", "pg-advisory", "redlock", "etcd"}
}

// NewLock returns the lock called name:
//
//   - setnx: SET NX PX with a compare-and-delete release (SetNX), the reference;
//   - renew: the same lease, extended every lease/3 by a watchdog goroutine (Renew);
//   - redsync: github.com/go-redsync/redsync/v4 on one Redis, without Extend (Redsync);
//   - redislock: github.com/bsm/redislock, without Refresh (RedisLock);
//   - pg-advisory: a PostgreSQL session advisory lock, with no lease (PGAdvisory),
//     on a session of its own that lasts as long as the lock value;
//   - redlock: redsync over every one of Nodes (Redlock: a majority of
//     independent nodes), without Extend;
//   - etcd: etcd's concurrency.Mutex on a session whose lease its client
//     keeps alive (Etcd); fenced, by the lock key's creation revision.
//
// Fenced, each of them but etcd takes its fencing token by an INCR of
// FenceKey right after it acquired (none of them hands one out itself);
// etcd's is the lock key's creation revision. ctx bounds what the lock
// does to start (etcd's first answer).
func NewLock(ctx context.Context, name string, cfg LockConfig) (Lock, error) {
	node := cfg.Redis
	if len(cfg.Nodes) > 0 {
		node = cfg.Nodes[0]
	}
	setnx := SetNX{Redis: node, Fences: cfg.Redis, Key: cfg.Key, FenceKey: cfg.FenceKey, Lease: cfg.Lease,
		Retry: cfg.Retry, Fenced: cfg.Fenced}
	fence := fencer{Redis: cfg.Redis, Key: cfg.FenceKey, On: cfg.Fenced}
	switch name {
	case "setnx":
		return &setnx, nil
	case "renew":
		return &Renew{SetNX: setnx}, nil
	case "redsync":
		return newRedsync([]*redis.Client{node}, cfg.Key, cfg.Lease, cfg.Retry, fence), nil
	case "redlock":
		if len(cfg.Nodes) == 0 {
			return nil, fmt.Errorf("redlock needs its nodes (LockConfig.Nodes)")
		}
		return newRedsync(cfg.Nodes, cfg.Key, cfg.Lease, cfg.Retry, fence), nil
	case "redislock":
		return newRedisLock(node, cfg.Key, cfg.Lease, cfg.Retry, fence), nil
	case "etcd":
		return NewEtcd(ctx, cfg.Etcd, cfg.Key, cfg.Lease, cfg.Retry, cfg.Fenced)
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
