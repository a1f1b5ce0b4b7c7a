package harness

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// The run's connections to its servers, and what it asks of them before
// it starts: how many sessions PostgreSQL has free, which versions run.

// redisClient connects with retries off: a retried SET NX could be granted
// twice and the history would never know. Every request is bounded by
// timeout, and by its context's deadline, so that a paused server makes a
// bounded wait, never a hang. Its connections call themselves name
// (CLIENT SETNAME): a worker's, or the run's own (history.ClientRun), which
// the lock server's record gives their commands.
func redisClient(rawURL, name string, pool int, timeout time.Duration) (*redis.Client, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--redis-url %s: %v", Redact(rawURL), redactErr(err))
	}
	opt.MaxRetries, opt.ClientName = -1, name
	opt.PoolSize = pool + 2
	opt.ReadTimeout, opt.WriteTimeout, opt.DialTimeout = timeout, timeout, timeout
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// postgresPool connects to PostgreSQL; app names the sessions
// (application_name) so that the run can tell when its workers' are gone;
// params are more of their runtime parameters, if any.
func postgresPool(ctx context.Context, rawURL string, conns int32, app string, params map[string]string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--postgres-url %s: %v", Redact(rawURL), redactErr(err))
	}
	pc.MaxConns = conns
	maps.Copy(pc.ConnConfig.RuntimeParams, params)
	pc.ConnConfig.RuntimeParams["application_name"] = app
	db, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL at %s: %v", Redact(rawURL), err)
	}
	return db, nil
}

// seats refuses a run whose workers PostgreSQL cannot all seat: each holds
// a session for the counter (and pg-advisory one more for its lock), and a
// worker that cannot connect would leave the run with fewer workers than
// asked for, and a verdict on a run nobody asked for.
func seats(ctx context.Context, db *pgxpool.Pool, cfg runPlan) error {
	// Only client sessions take connection slots (not the checkpointer and
	// the like), and a superuser may use the reserved ones too.
	var max, reserved, open int
	var super bool
	err := db.QueryRow(ctx, `SELECT current_setting('max_connections')::int,
		current_setting('superuser_reserved_connections')::int,
		(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int,
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)`).Scan(&max, &reserved, &open, &super)
	if err != nil {
		return fmt.Errorf("count its free sessions: %w", err)
	}
	free := max - open
	if !super {
		free -= reserved
	}
	per := 1 + cfg.lock.Sessions
	// The run's own pool holds one of the open sessions and may open 3 more;
	// a replaced worker's session may linger while its successor connects.
	need := cfg.Workers*per + per + 3
	if need > free {
		why := fmt.Sprintf("max_connections %d, %d open", max, open)
		if !super {
			why += fmt.Sprintf(", %d reserved for superusers", reserved)
		}
		return fmt.Errorf("--workers %d needs about %d sessions, but it has %d free (%s): "+
			"use fewer workers, or a server with a larger max_connections", cfg.Workers, need, free, why)
	}
	return nil
}

// ServerVersions names the servers at the two URLs, as "Redis 7.0.15,
// PostgreSQL 15.8", for the captions of tables made from runs on them.
func ServerVersions(ctx context.Context, redisURL, postgresURL string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rdb, err := redisClient(redisURL, history.ClientRun, 1, 5*time.Second)
	if err != nil {
		return "", &SetupError{Err: err}
	}
	defer rdb.Close()
	info, err := rdb.InfoMap(ctx, "server").Result()
	if err != nil {
		return "", setupErrorf("cannot reach Redis at %s: %v", Redact(redisURL), err)
	}
	db, err := postgresPool(ctx, postgresURL, 1, "hiatus-compare", nil)
	if err != nil {
		return "", &SetupError{Err: err}
	}
	defer db.Close()
	var pg string
	if err := db.QueryRow(ctx, `SHOW server_version`).Scan(&pg); err != nil {
		return "", setupErrorf("cannot reach PostgreSQL at %s: %v", Redact(postgresURL), err)
	}
	pg, _, _ = strings.Cut(pg, " ")
	return fmt.Sprintf("Redis %s, PostgreSQL %s", info["Server"]["redis_version"], pg), nil
}
