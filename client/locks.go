package client

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// LockConfig is what every lock adapter may draw on.
type LockConfig struct {
	Redis    *redis.Client
	Postgres *pgxpool.Pool
	Key      string        // the lock's name
	FenceKey string        // where fencing tokens come from, for locks that fence with INCR
	Lease    time.Duration // the lease, for locks that have one
	Retry    time.Duration // wait between attempts, for locks that poll
	Fenced   bool          // hand out fencing tokens with each grant
}

// LockNames lists the locks NewLock builds.
func LockNames() []string { return []string{"setnx"} }

// NewLock returns the lock called name.
func NewLock(name string, cfg LockConfig) (Lock, error) {
	switch name {
	case "setnx":
		return &SetNX{Redis: cfg.Redis, Key: cfg.Key, FenceKey: cfg.FenceKey, Lease: cfg.Lease,
			Retry: cfg.Retry, Fenced: cfg.Fenced}, nil
	}
	return nil, fmt.Errorf("no lock %q (want one of %v)", name, LockNames())
}
