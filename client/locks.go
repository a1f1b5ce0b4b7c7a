package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// LockConfig is what every lock may draw on.
type LockConfig struct {
	Redis *redis.Client // the run's own Redis: the history's clock, and fencing tokens
	// Nodes are the Redis servers the lock itself is kept on, when it is
	// not kept on Redis: redlock's N independent nodes, or one node whose
	// clock or life a nemesis plays with (a jumped clock must not stamp
	// the history, nor a restart reset the fences).
	Nodes    []*redis.Client
	Postgres *pgxpool.Pool // the workload's; pg-advisory opens a session of its own on its server
	// Endpoints are the client URLs of the lock's own servers when they
	// are not Redis (etcd's, ZooKeeper's).
	Endpoints []string
	Key       string        // the lock's name
	FenceKey  string        // where fencing tokens come from, for locks that fence with INCR
	Lease     time.Duration // the lease, for locks that have one
	Retry     time.Duration // wait between attempts, for locks that poll
	Fenced    bool          // hand out fencing tokens with each grant
	// RedisURL is the server Redis holds, for an adapter (exec:) to
	// connect to; OpTimeout bounds each of its answers, and Hello its
	// start (0: adapter.HelloTimeout).
	RedisURL string
	NodeURLs []string // the lock's Redis nodes, in order, when it is kept on its own: an adapter's redis_urls
	// Sentinel is where an adapter finds the Redis its lock is kept on
	// when sentinels fail it over (RedisURL is then "").
	Sentinel adapter.Sentinel
	// PostgresURL is the run's PostgreSQL as the worker reaches it, for an
	// adapter's lock kept there.
	PostgresURL string
	OpTimeout   time.Duration
	Hello       time.Duration
	// ClientName is the name the lock's connections to its servers give
	// themselves, the worker's ("worker-3", history.WorkerName), for the
	// lock server's record; an adapter is told it in init. hiatus's own
	// locks use the clients they are handed, which the worker named.
	ClientName string
	// AdapterMark is the mark of the run's adapters (adapter.Setup.Mark),
	// whose end kills what they leave behind; "" for an adapter that
	// kills its own on Close.
	AdapterMark string
}

// node is the one Redis a lock kept on one server is kept on: the lock's
// own node, or the run's.
func (c LockConfig) node() *redis.Client {
	if len(c.Nodes) > 0 {
		return c.Nodes[0]
	}
	return c.Redis
}

// zooKeeper is the connect string of the ZooKeeper servers among
// Endpoints (zookeeper://host:port), for an adapter; "" for none.
func (c LockConfig) zooKeeper() string {
	var out []string
	for _, e := range c.Endpoints {
		if hp, ok := strings.CutPrefix(e, "zookeeper://"); ok {
			out = append(out, hp)
		}
	}
	return strings.Join(out, ",")
}

// etcd are the client URLs (http://host:port) of the etcd servers among
// Endpoints, for an adapter; nil for none.
func (c LockConfig) etcd() []string {
	var out []string
	for _, e := range c.Endpoints {
		if strings.HasPrefix(e, "http://") || strings.HasPrefix(e, "https://") {
			out = append(out, e)
		}
	}
	return out
}

// fencer hands out the fencing tokens of a lock that has none of its own.
func (c LockConfig) fencer() fencer { return fencer{Redis: c.Redis, Key: c.FenceKey, On: c.Fenced} }

// A Store is where a lock is kept: which servers the run starts for it,
// and which of the run's faults can reach it.
type Store uint8

const (
	// OnRedis: one Redis server: the run's, a node of its own (when a fault
	// acts on it, or it runs on a host of its own), or a failover's
	// primary. LockConfig.Nodes holds it when it is not the run's.
	OnRedis Store = iota + 1
	// OnRedisNodes: several independent Redis nodes, a majority of which
	// must grant (LockConfig.Nodes).
	OnRedisNodes
	// OnPostgres: the workload's own PostgreSQL.
	OnPostgres
	// OnEtcd: an etcd server of its own (LockConfig.Endpoints).
	OnEtcd
	// OnZooKeeper: a ZooKeeper ensemble of its own: one server, or
	// --nodes (LockConfig.Endpoints, host:port each).
	OnZooKeeper
	// Elsewhere: where the run knows nothing of (a lock of a program's
	// own): no fault of the lock's servers can go with it.
	Elsewhere
)

// A LockKind is a kind of lock hiatus can test, declared once: its name,
// where it is kept, what else it holds of the run, and how it is built.
// hiatus's own are each declared in their lock_*.go, and LockKinds lists
// them; a program's own it hands to harness.Lab.
type LockKind struct {
	Name  string
	About string // what it is, for --help
	Store Store
	// Sessions are the PostgreSQL sessions each worker holds for the lock,
	// beyond its counter's one.
	Sessions int
	// Failover says the lock can be kept on a primary its sentinels fail
	// over (--nemesis failover): it takes one Redis, and follows it.
	Failover bool
	// Extends says its locks are Extenders: a holder can ask before its
	// write whether it still holds the lock (Worker.ExtendBeforeWrite).
	// An adapter's are when its hello says renewal.
	Extends bool
	// New builds one worker's lock from what the run hands every lock;
	// ctx bounds what it does to start (etcd's first answer).
	New func(ctx context.Context, cfg LockConfig) (Lock, error)
}

// LockKinds are hiatus's own locks.
func LockKinds() []LockKind {
	return []LockKind{setnxKind(), renewKind(), redsyncKind(), redisLockKind(), pgAdvisoryKind(), redlockKind(), etcdKind(), redsyncExtendKind(), redsyncExtendSetNXKind(), etcdLockRPCKind(), zooKeeperKind()}
}

// LockNames lists hiatus's own locks.
func LockNames() []string {
	var names []string
	for _, k := range LockKinds() {
		names = append(names, k.Name)
	}
	return names
}

// LockKindOf returns the lock called name: one of own (a program's), an
// adapter's (exec:COMMAND), or one of hiatus's.
func LockKindOf(name string, own []LockKind) (LockKind, bool) {
	if cmd, ok := strings.CutPrefix(name, ExecPrefix); ok {
		return execKind(name, cmd), true
	}
	for _, k := range append(slices.Clone(own), LockKinds()...) {
		if k.Name == name {
			return k, true
		}
	}
	return LockKind{}, false
}

// NewLock returns the lock called name, one of hiatus's or an adapter's
// (LockKindOf). Fenced, each of them but etcd takes its fencing token by
// an INCR of FenceKey right after it acquired (none of them hands one out
// itself); etcd's is the lock key's creation revision.
func NewLock(ctx context.Context, name string, cfg LockConfig) (Lock, error) {
	k, ok := LockKindOf(name, nil)
	if !ok {
		return nil, fmt.Errorf("no lock %q (want one of %v)", name, LockNames())
	}
	return k.New(ctx, cfg)
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

// retryTries calls try until it returns a grant or ctx ends, waiting
// retry after each that failed; then it returns ErrGaveUp, with the last
// try's error. Each try undoes what it did unless it returns a grant.
func retryTries(ctx context.Context, retry time.Duration, try func(context.Context) (Grant, error)) (Grant, error) {
	for {
		if ctx.Err() != nil {
			return Grant{}, ErrGaveUp
		}
		g, err := try(ctx)
		if err == nil {
			return g, nil
		}
		if ctx.Err() != nil || !wait(ctx, retry) {
			return Grant{}, fmt.Errorf("%w (%v)", ErrGaveUp, err)
		}
	}
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

// AdvisoryKey is the bigint key of the PostgreSQL advisory lock the
// pg-advisory lock named name takes.
func AdvisoryKey(name string) int64 { return advisoryKey(name) }

// advisoryKey maps a lock name to the bigint key of a PostgreSQL advisory
// lock.
func advisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}
