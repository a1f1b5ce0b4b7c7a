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
// local monotonic clock, so that an op is never left without a time.
type RedisClock struct {
	rdb   *redis.Client
	start time.Time // the run's start on the Redis clock

	mu        sync.Mutex
	lastRedis time.Time // last Redis reading
	lastLocal time.Time // local clock at that reading
	failed    time.Time // local clock at the last failed reading
}

// NewRedisClock returns a clock reading rdb's TIME, counting from start.
func NewRedisClock(rdb *redis.Client, start time.Time) *RedisClock {
	return &RedisClock{rdb: rdb, start: start}
}

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
// op's stamp to a timeout.
func (c *RedisClock) Now(ctx context.Context) int64 {
	c.mu.Lock()
	down := !c.failed.IsZero() && time.Since(c.failed) < 100*time.Millisecond
	c.mu.Unlock()
	var t time.Time
	err := errClockDown
	if !down {
		// The clock is read for ops that complete after the run's context ended.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 100*time.Millisecond)
		t, err = c.rdb.Time(ctx).Result()
		cancel()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if err != errClockDown {
			c.failed = time.Now()
		}
		if c.lastLocal.IsZero() {
			return time.Since(c.start).Nanoseconds()
		}
		t = c.lastRedis.Add(time.Since(c.lastLocal))
	} else {
		c.lastRedis, c.lastLocal = t, time.Now()
	}
	return t.Sub(c.start).Nanoseconds()
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
