package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A PGAdvisory is a PostgreSQL session advisory lock: pg_try_advisory_lock
// polled every Retry, on a session of the lock's own, which the holder keeps
// until pg_advisory_unlock. It has no lease: the lock lasts as long as the
// session, so a paused holder keeps it and everyone else waits.
type PGAdvisory struct {
	db      *pgxpool.Pool // the lock's own: one session, apart from the workload's
	key     int64         // the advisory lock's bigint key
	name    string
	retry   time.Duration
	timeout time.Duration // bounds each attempt
	fence   fencer

	mu   sync.Mutex
	held map[string]*pgxpool.Conn // by token: the session that holds the lock
}

func pgAdvisoryKind() LockKind {
	return LockKind{Name: "pg-advisory", About: "a PostgreSQL session advisory lock, with no lease, on a session of its own",
		Store: OnPostgres, Sessions: 1,
		New: func(_ context.Context, cfg LockConfig) (Lock, error) {
			return newPGAdvisory(cfg.Postgres, cfg.Key, cfg.Retry, cfg.OpTimeout, cfg.fencer())
		}}
}

// newPGAdvisory returns the advisory lock named name on the server of db.
// The lock has a session of its own, opened when first needed: the
// workload's sessions stay free for the work done under the lock. Close ends
// it.
func newPGAdvisory(db *pgxpool.Pool, name string, retry, timeout time.Duration, fence fencer) (*PGAdvisory, error) {
	if db == nil {
		return nil, fmt.Errorf("advisory lock %s: no PostgreSQL", name)
	}
	cfg := db.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0
	own, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	if err != nil {
		return nil, fmt.Errorf("advisory lock %s: %w", name, err)
	}
	if timeout <= 0 {
		timeout = DefaultOpTimeout
	}
	return &PGAdvisory{db: own, key: advisoryKey(name), name: name, retry: retryOr(retry), timeout: timeout, fence: fence,
		held: map[string]*pgxpool.Conn{}}, nil
}

// Close ends the lock's session, and with it any lock still held.
func (l *PGAdvisory) Close() { l.db.Close() }

// Acquire implements Lock.
func (l *PGAdvisory) Acquire(ctx context.Context) (Grant, error) {
	token, err := newToken()
	if err != nil {
		return Grant{}, err
	}
	conn, err := l.db.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Grant{}, ErrGaveUp
		}
		return Grant{}, fmt.Errorf("advisory lock %s: connection: %w", l.name, err)
	}
	for {
		ok, err := l.try(ctx, conn)
		if err != nil {
			// The lock may have been granted on this session without our
			// knowing: end the session, which ends its locks.
			discard(conn)
			return Grant{}, fmt.Errorf("advisory lock %s: %w", l.name, err)
		}
		if ok {
			break
		}
		if !wait(ctx, l.retry) {
			conn.Release()
			return Grant{}, ErrGaveUp
		}
	}
	g := Grant{Token: token}
	if g.Fence, err = l.fence.fence(ctx); err != nil {
		// Unlike a lease, this lock would never lapse: give it back.
		discard(conn)
		return Grant{}, err
	}
	l.mu.Lock()
	l.held[token] = conn
	l.mu.Unlock()
	return g, nil
}

// try asks once for the lock on conn's session. An attempt under way is
// not cut short when ctx ends: the server may have granted it by then, and
// an acquire reported failed whose grant lived on in the session until
// discard ended it was an orphan in the record (a run's end cut one
// short, and another worker was refused meanwhile). The op timeout bounds
// it instead, and a timeout is an acquire of unknown outcome.
func (l *PGAdvisory) try(ctx context.Context, conn *pgxpool.Conn) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	var ok bool
	err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, l.key).Scan(&ok)
	return ok, err
}

// discard closes conn's session and drops it from the pool.
func discard(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn.Conn().Close(ctx) // a session that will not close cleanly is gone anyway
	conn.Release()         // the pool destroys a closed connection
}

// Release implements Lock. ErrNotHeld means the session no longer held the
// lock, which happens only when the session was lost and replaced.
func (l *PGAdvisory) Release(ctx context.Context, g Grant) error {
	l.mu.Lock()
	conn := l.held[g.Token]
	delete(l.held, g.Token)
	l.mu.Unlock()
	if conn == nil {
		return fmt.Errorf("advisory unlock %s: no grant with token %s", l.name, g.Token)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, l.key).Scan(&ok); err != nil {
		discard(conn) // ending the session releases the lock, whatever became of the unlock
		return fmt.Errorf("advisory unlock %s: %w", l.name, err)
	}
	conn.Release()
	if !ok {
		return ErrNotHeld
	}
	return nil
}
