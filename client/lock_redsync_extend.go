package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"
)

// A RedsyncExtend is redsync's lock as its documentation tells a careful
// user to keep one past its expiry: the holder extends it every lease/3
// with Extend, and heeds the answer — once Extend says the lock is no
// longer its own, it stops extending. Like renew, it keeps the lock
// through a pause of the holder's goroutine, not through a stop of its
// whole process, and it is as safe as redsync's Extend says true only of
// a lock still held: without setNX, a lapsed lock is never taken back;
// with it, an Extend that finds the key gone sets it again and says true.
type RedsyncExtend struct {
	*Redsync
	dogs watchdogs
	// setNX is redsync's WithSetNXOnExtend: an Extend that finds the key
	// gone sets it again, and says true.
	setNX bool
}

func redsyncExtendKind() LockKind {
	return LockKind{Name: "redsync-extend", About: "redsync on one Redis, extended every lease/3 with Extend until Extend says the lock is gone",
		Store: OnRedis, Failover: true, Extends: true,
		New: func(_ context.Context, cfg LockConfig) (Lock, error) { return newRedsyncExtend(cfg, false), nil }}
}

func newRedsyncExtend(cfg LockConfig, setNX bool) *RedsyncExtend {
	return &RedsyncExtend{Redsync: newRedsync([]*redis.Client{cfg.node()}, cfg.Key, cfg.Lease, cfg.Retry, cfg.fencer()), setNX: setNX}
}

// redsyncExtendSetNXKind is redsync-extend with WithSetNXOnExtend(), which
// redsync documents as setting the key again when it is gone, "useful if
// your redises restart often and you want to reduce the chances of losing
// the lock" (redsync.go): a holder frozen past its lease whose key another
// holder took and released meanwhile is told by Extend that it still holds
// the lock.
func redsyncExtendSetNXKind() LockKind {
	k := redsyncExtendKind()
	k.Name, k.About = "redsync-extend-setnx", "redsync-extend with WithSetNXOnExtend(): an Extend of a key that is gone sets it again"
	k.New = func(_ context.Context, cfg LockConfig) (Lock, error) { return newRedsyncExtend(cfg, true), nil }
	return k
}

// Acquire implements Lock.
func (l *RedsyncExtend) Acquire(ctx context.Context) (Grant, error) {
	g, err := l.Redsync.Acquire(ctx)
	if err != nil {
		return g, err
	}
	l.dogs.start(ctx, g, l.lease/3, func(ctx context.Context) error { return l.Extend(ctx, g) })
	return g, nil
}

// Extend implements Extender: redsync's Extend, heeded.
func (l *RedsyncExtend) Extend(ctx context.Context, g Grant) error {
	opts := []redsync.Option{redsync.WithExpiry(l.lease), redsync.WithValue(g.Token)}
	if l.setNX {
		opts = append(opts, redsync.WithSetNXOnExtend())
	}
	m := l.rs.NewMutex(l.key, opts...)
	ok, err := m.ExtendContext(ctx)
	var unreached *redsync.RedisError
	switch {
	case ok:
		return nil
	case errors.As(err, &unreached):
		return err // a node not reached: the lock may still be ours
	}
	return ErrLost // redsync says the lock is not ours: taken, expired, or extended too late
}

// Release implements Lock. The watchdog has sent its last Extend before
// the lock is released.
func (l *RedsyncExtend) Release(ctx context.Context, g Grant) error {
	if !l.dogs.stop(g.Token) {
		return fmt.Errorf("release %s: no grant with token %s", l.key, g.Token)
	}
	return l.Redsync.Release(ctx, g)
}

// Freeze implements Freezer: no Extend is sent until thaw.
func (l *RedsyncExtend) Freeze() (thaw func()) { return l.dogs.freeze() }
