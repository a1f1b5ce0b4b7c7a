package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Lock is a distributed lock under test.
type Lock interface {
	// Acquire blocks until the lock is held or ctx ends. A nil error means
	// the lock was granted with the returned Grant.
	Acquire(ctx context.Context) (Grant, error)
	// Release gives the lock up. It returns ErrNotHeld or ErrStolen when the
	// grant had already lapsed.
	Release(ctx context.Context, g Grant) error
}

// An Extender is a lock whose holder can ask, at any time, that its grant
// last another lease from now, and learn that it is no longer held: what
// the documentation of a renewing lock tells a careful user to ask before
// acting on it (redsync's Extend, a renewal's answer).
type Extender interface {
	// Extend returns nil when the grant was extended; ErrNotHeld,
	// ErrStolen or ErrLost when the lock says it is not the holder's any
	// more; another error when the answer is not known.
	Extend(ctx context.Context, g Grant) error
}

// A Freezer is a lock that works on its own while a grant is held — a
// watchdog renewing the lease, an adapter's process, a client's
// keep-alives — as a stopped process does not. Freeze stops that work, as
// a SIGSTOP of the holder's whole process would, and thaw resumes what can
// be resumed: a test that blocks a holder in its section and freezes its
// lock has stopped the holder, though it runs in the test's own process.
type Freezer interface {
	Freeze() (thaw func())
}

// ErrLost is returned by Extend when the lock says the grant is not the
// holder's any more, and cannot say whether it expired or was taken.
var ErrLost = errors.New("lock: no longer held")

// A Grant is what an acquisition returns.
type Grant struct {
	Token string        // the holder's random token
	Fence int64         // the fencing token, 0 when the lock gives none
	Lease time.Duration // how long the grant lasts unless renewed; 0 for none
}

// Errors a Release reports. They are facts about the lock, not failures of
// the call: the history records them as the release's :error.
var (
	ErrNotHeld = errors.New("lock: released after the lease expired: no one held it")
	ErrStolen  = errors.New("lock: released after the lease expired: another holder had it")
)

// ErrGaveUp is returned by Acquire when ctx ended before the lock was had.
var ErrGaveUp = errors.New("lock: gave up waiting")

// A SetNX is the reference lease lock: SET key token NX PX lease, retried
// every Retry until it succeeds; with Fenced, an INCR of FenceKey right after
// each acquisition gives a fencing token. Release is a compare-and-delete
// Lua script.
type SetNX struct {
	Redis    *redis.Client
	Fences   *redis.Client // where FenceKey is; nil for Redis
	Key      string
	FenceKey string
	Lease    time.Duration
	Retry    time.Duration // default 5 ms
	Fenced   bool
}

func setnxKind() LockKind {
	return LockKind{Name: "setnx", About: "SET NX PX with a compare-and-delete release, the reference", Store: OnRedis, Failover: true,
		New: func(_ context.Context, cfg LockConfig) (Lock, error) { return newSetNX(cfg), nil }}
}

// newSetNX is the SetNX lock cfg describes.
func newSetNX(cfg LockConfig) *SetNX {
	return &SetNX{Redis: cfg.node(), Fences: cfg.Redis, Key: cfg.Key, FenceKey: cfg.FenceKey, Lease: cfg.Lease,
		Retry: cfg.Retry, Fenced: cfg.Fenced}
}

// release deletes the key only if it still holds our token, and says what it
// found otherwise: 1 deleted, 0 no key, -1 another token.
var release = redis.NewScript(`
local v = redis.call("GET", KEYS[1])
if v == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1
elseif v then
  return -1
end
return 0`)

// Acquire implements Lock.
func (l *SetNX) Acquire(ctx context.Context) (Grant, error) {
	token, err := newToken()
	if err != nil {
		return Grant{}, err
	}
	g := Grant{Token: token, Lease: l.Lease}
	retry := l.Retry
	if retry <= 0 {
		retry = 5 * time.Millisecond
	}
	for {
		if ctx.Err() != nil {
			return Grant{}, ErrGaveUp
		}
		// An attempt under way is not cut short when ctx ends: that would
		// make its outcome unknown. The client's own timeouts bound it.
		ok, err := l.Redis.SetNX(context.WithoutCancel(ctx), l.Key, g.Token, l.Lease).Result()
		if err != nil {
			return Grant{}, fmt.Errorf("SET %s NX PX: %w", l.Key, err)
		}
		if ok {
			break
		}
		if !wait(ctx, retry) {
			return Grant{}, ErrGaveUp
		}
	}
	fences := l.Fences
	if fences == nil {
		fences = l.Redis
	}
	g.Fence, err = fencer{Redis: fences, Key: l.FenceKey, On: l.Fenced}.fence(ctx)
	return g, err
}

// sentErr reports whether err came back from a request that reached the
// wire; go-redis returns ctx errors before writing when ctx had already ended.
func sentErr(err error) bool {
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// Release implements Lock.
func (l *SetNX) Release(ctx context.Context, g Grant) error {
	n, err := release.Run(ctx, l.Redis, []string{l.Key}, g.Token).Int()
	if err != nil {
		return fmt.Errorf("release %s: %w", l.Key, err)
	}
	switch n {
	case 1:
		return nil
	case -1:
		return ErrStolen
	}
	return ErrNotHeld
}
