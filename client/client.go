// Package client owns the workload under test: the lock (a Redis lease lock,
// SET NX PX and a compare-and-delete release), the resource it protects (a
// Postgres counter, written with or without a fencing token), and the worker
// loop that runs critical sections and records every step as history ops.
// It records; it never judges.
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
)

// A Clock tells the time on the clock the whole history is stamped with.
type Clock interface {
	// Now returns nanoseconds since the run's start.
	Now(ctx context.Context) int64
}

// RedisClock reads the Redis server's clock (TIME), so that ops of every
// worker process are stamped by one clock. When TIME cannot be had (the
// server is paused or gone) it extrapolates from the last reading with the
// local monotonic clock, so that an op is never left without a time. A
// stamp carried forward so is early by that reading's answer's way back
// at most, never late: an invocation's stamp, read before its call, must
// not come after what the call did (carried from the middle of the round
// trip, beside two CPU burners, one came 132 µs after its SET). A stamp
// read afresh is the server's clock between the op's call and the
// reading's answer. TestRedisClockStamps shows each case. (A run's
// lock-server check once said false-ok of a release stamped 4 ms before
// its DEL, 74 ms after its worker's SIGSTOP ended: most likely a reading
// frozen with the worker, taken for a stalled server, and a stamp carried
// forward from the end of a slow round trip.)
type RedisClock struct {
	read  func(context.Context) (time.Time, error) // the server's TIME
	start time.Time                                // the run's start on the Redis clock

	mu        sync.Mutex
	lastRedis time.Time // last Redis reading
	lastLocal time.Time // local clock at that reading's answer
	failed    time.Time // local clock at the last failed reading
}

// NewRedisClock returns a clock reading rdb's TIME, counting from start.
func NewRedisClock(rdb *redis.Client, start time.Time) *RedisClock {
	return &RedisClock{read: func(ctx context.Context) (time.Time, error) { return ServerTime(ctx, rdb) }, start: start}
}

// timeWait bounds a reading of the server's clock.
const timeWait = 100 * time.Millisecond

// ServerTime returns the Redis server's clock.
func ServerTime(ctx context.Context, rdb *redis.Client) (time.Time, error) {
	t, err := rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis TIME: %w", err)
	}
	return t, nil
}

// Now implements Clock. A server that does not answer TIME within 100 ms
// is not asked again for the next 100 ms: a paused Redis must not slow every
// op's stamp to a timeout. Meanwhile the stamps are the last reading carried
// forward by the local clock from its answer.
func (c *RedisClock) Now(ctx context.Context) int64 {
	c.mu.Lock()
	down := !c.failed.IsZero() && time.Since(c.failed) < timeWait
	c.mu.Unlock()
	var t, answered time.Time
	var took time.Duration
	err := errClockDown
	if !down {
		t, answered, took, err = c.reading(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && err != errClockDown {
		c.failed = time.Now()
	}
	switch {
	case err != nil && c.lastLocal.IsZero():
		return time.Since(c.start).Nanoseconds()
	case err != nil:
		t = c.lastRedis.Add(time.Since(c.lastLocal))
	case took <= timeWait:
		// A reading that took longer (answered across a pause of the
		// worker's) stamps its op, but would carry its uncertainty forward.
		c.lastRedis, c.lastLocal = t, answered
	}
	return t.Sub(c.start).Nanoseconds()
}

// reading reads the server's clock, and says when it was answered, on
// the local clock, and how long the round trip took. A reading
// that outlived its wait by far was frozen with its process (a pause of
// the worker's, not a slow server), and says nothing of the server: it is
// made again at once.
func (c *RedisClock) reading(ctx context.Context) (t, answered time.Time, took time.Duration, err error) {
	// The clock is read for ops that complete after the run's context ended.
	ctx = context.WithoutCancel(ctx)
	for try := 0; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, timeWait)
		begin := time.Now()
		t, err = c.read(rctx)
		took = time.Since(begin)
		cancel()
		if err == nil || try > 0 || took < 2*timeWait {
			return t, begin.Add(took), took, err
		}
	}
}

var errClockDown = errors.New("clock: Redis did not answer TIME just now")

// outcome classifies an error of a step into the op type that completes it:
// :fail when the step provably did not take effect, :info when it may have.
// go-redis and pgx errors are classified with their own predicates, never by
// their text.
func outcome(err error) history.Type {
	switch {
	case err == nil:
		return history.Ok
	case errors.Is(err, redis.Nil):
		return history.Fail
	case errors.As(err, new(*Refused)):
		return history.Fail // the lock said no, or was never asked
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		// The server refused the statement, or it was never sent.
		return history.Fail
	}
	var rErr redis.Error
	if errors.As(err, &rErr) {
		return history.Fail // the server answered with an error: nothing was done
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return history.Fail // no connection, so no request
	}
	return history.Info
}
