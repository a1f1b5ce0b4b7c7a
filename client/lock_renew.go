package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hiatus-dev/hiatus/history"
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
	dogs  watchdogs
}

func renewKind() LockKind {
	return LockKind{Name: "renew", About: "setnx's lease, extended every lease/3 by a watchdog goroutine", Store: OnRedis, Failover: true, Extends: true,
		New: func(_ context.Context, cfg LockConfig) (Lock, error) { return &Renew{SetNX: *newSetNX(cfg)}, nil }}
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
	l.dogs.start(ctx, g, every, func(ctx context.Context) error { return l.Extend(ctx, g) })
	return g, nil
}

// Extend implements Extender: the watchdog's compare-and-pexpire, asked
// once more.
func (l *Renew) Extend(ctx context.Context, g Grant) error {
	n, err := extend.Run(ctx, l.Redis, []string{l.Key}, g.Token, l.Lease.Milliseconds()).Int()
	switch {
	case err != nil:
		return err
	case n != 1:
		return ErrLost
	}
	return nil
}

// Release implements Lock. The watchdog is stopped, and has sent its last
// renewal, before the key is deleted.
func (l *Renew) Release(ctx context.Context, g Grant) error {
	if !l.dogs.stop(g.Token) {
		return fmt.Errorf("release %s: no grant with token %s", l.Key, g.Token)
	}
	return l.SetNX.Release(ctx, g)
}

// watchdogs renew a lock's grants, a goroutine each, from the acquisition
// to the release.
type watchdogs struct {
	mu       sync.Mutex
	watching map[string]*watchdog // by grant token
	// frozen is held while the lock is frozen (Freezer): no renewal is
	// sent meanwhile.
	frozen sync.RWMutex
}

// A watchdog is the renewal goroutine of one grant.
type watchdog struct {
	stop context.CancelFunc
	done chan struct{}
}

// start renews grant g every every, by extend, until stop or until extend
// says the lock is no longer ours (ErrLost, ErrNotHeld, ErrStolen): a
// lapsed lease is never taken back. Another error is a renewal that may
// not have happened: it is tried again at the next tick. Each renewal is
// recorded (RecordRenewal) as ctx, the Acquire's, says. The watchdog outlives ctx,
// which ends with the run: a section begun is finished, and its lock is
// kept until released.
func (d *watchdogs) start(ctx context.Context, g Grant, every time.Duration, extend func(context.Context) error) {
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w := &watchdog{stop: stop, done: make(chan struct{})}
	d.mu.Lock()
	if d.watching == nil {
		d.watching = map[string]*watchdog{}
	}
	d.watching[g.Token] = w
	d.mu.Unlock()
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			d.frozen.RLock()
			rctx, cancel := context.WithTimeout(wctx, every)
			err := RecordRenewal(rctx, history.ByWatchdog, g, extend)
			cancel()
			d.frozen.RUnlock()
			if lost(err) {
				return
			}
		}
	}()
}

// lost says err is a lock's word that the grant is not the holder's any
// more.
func lost(err error) bool {
	return errors.Is(err, ErrLost) || errors.Is(err, ErrNotHeld) || errors.Is(err, ErrStolen)
}

// stop stops the watchdog of token and waits until it has sent its last
// renewal; false when token has none.
func (d *watchdogs) stop(token string) bool {
	d.mu.Lock()
	w := d.watching[token]
	delete(d.watching, token)
	d.mu.Unlock()
	if w == nil {
		return false
	}
	w.stop()
	<-w.done
	return true
}

// freeze holds back every renewal until thaw.
func (d *watchdogs) freeze() (thaw func()) {
	d.frozen.Lock()
	return d.frozen.Unlock
}

// Freeze implements Freezer: no renewal is sent until thaw.
func (l *Renew) Freeze() (thaw func()) { return l.dogs.freeze() }
