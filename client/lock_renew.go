package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Renew is the SetNX lease lock with a watchdog: from the acquisition to
// the release, a goroutine of the holder's process extends the lease every
// Every by a compare-and-pexpire, as Redisson's watchdog does. A holder that
// blocks in its section keeps the lock as long as its process runs; a holder
// whose whole process stops (SIGSTOP, a stop-the-world pause) stops renewing
// too, and loses the lock when the lease runs out.
type Renew struct {
	SetNX
	Every time.Duration // between renewals; default Lease/3

	mu       sync.Mutex
	watching map[string]*watchdog // by grant token

	// frozen is held by tests that stand for a stopped process: while it is
	// held no renewal is sent (see export_test.go).
	frozen sync.RWMutex
}

func renewKind() LockKind {
	return LockKind{Name: "renew", About: "setnx's lease, extended every lease/3 by a watchdog goroutine", Store: OnRedis, Failover: true,
		New: func(_ context.Context, cfg LockConfig) (Lock, error) { return &Renew{SetNX: *newSetNX(cfg)}, nil }}
}

// A watchdog is the renewal goroutine of one grant.
type watchdog struct {
	stop context.CancelFunc
	done chan struct{}
}

// extend sets the key's expiry only if it still holds our token: 1 extended,
// 0 not ours (expired, or another holder's).
var extend = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)

// Acquire implements Lock.
func (l *Renew) Acquire(ctx context.Context) (Grant, error) {
	g, err := l.SetNX.Acquire(ctx)
	if err != nil {
		return g, err
	}
	every := l.Every
	if every <= 0 {
		every = l.Lease / 3
	}
	// The watchdog outlives ctx, which ends with the run: a section begun is
	// finished, and its lock is kept until released.
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w := &watchdog{stop: stop, done: make(chan struct{})}
	l.mu.Lock()
	if l.watching == nil {
		l.watching = map[string]*watchdog{}
	}
	l.watching[g.Token] = w
	l.mu.Unlock()
	go func() {
		defer close(w.done)
		l.renew(wctx, g.Token, every)
	}()
	return g, nil
}

// renew extends the lease every every until ctx ends or the key is found no
// longer ours: a lapsed lease is never taken back.
func (l *Renew) renew(ctx context.Context, token string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.frozen.RLock()
		rctx, cancel := context.WithTimeout(ctx, every)
		n, err := extend.Run(rctx, l.Redis, []string{l.Key}, token, l.Lease.Milliseconds()).Int()
		cancel()
		l.frozen.RUnlock()
		if err == nil && n == 0 {
			return
		}
		// An error is a renewal that may not have happened: try again at the
		// next tick, as long as the lease may still be ours.
	}
}

// Release implements Lock. The watchdog is stopped, and has sent its last
// renewal, before the key is deleted.
func (l *Renew) Release(ctx context.Context, g Grant) error {
	l.mu.Lock()
	w := l.watching[g.Token]
	delete(l.watching, g.Token)
	l.mu.Unlock()
	if w == nil {
		return fmt.Errorf("release %s: no grant with token %s", l.Key, g.Token)
	}
	w.stop()
	<-w.done
	return l.SetNX.Release(ctx, g)
}
