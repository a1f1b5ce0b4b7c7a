package harness

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/hiatus-dev/hiatus/topology"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// startEnv starts the throwaway servers cfg asks for (filling in their URLs),
// connects to both servers and prepares the lock keys and the counter row.
// Unreachable servers are the user's to fix: exit 254. The wait for the
// throwaway servers to start ends with start; what lives on (servers,
// hosts, links) is made under ctx.
func startEnv(start, ctx context.Context, cfg *Config) (_ *env, err error) {
	e := &env{}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	net, pgHost, err := startNet(ctx, *cfg)
	if err != nil {
		return nil, err
	}
	if net != nil {
		e.stops = append(e.stops, net.Close) // stopped in reverse: after the servers on it
	}
	if e.redis, e.postgres, err = startServers(start, cfg, pgHost); err != nil {
		return nil, err
	}
	for _, sv := range []*servers.Server{e.redis, e.postgres} { // stopped in reverse
		if sv != nil {
			e.stops = append(e.stops, sv.Stop)
		}
	}
	e.rdb, err = redisClient(cfg.RedisURL, cfg.Workers, cfg.OpTimeout)
	if err != nil {
		return nil, &SetupError{Err: err}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.rdb.Ping(pctx).Err(); err != nil {
		return nil, setupErrorf("cannot reach Redis at %s: %v", Redact(cfg.RedisURL), err)
	}
	e.db, err = postgresPool(pctx, cfg.PostgresURL, 4, "hiatus-run")
	if err != nil {
		return nil, &SetupError{Err: err}
	}
	if err := e.db.Ping(pctx); err != nil {
		return nil, setupErrorf("cannot reach PostgreSQL at %s: %v", Redact(cfg.PostgresURL), err)
	}
	e.counter = &client.Counter{DB: e.db, ID: cfg.CounterID, Guard: cfg.guard()}
	if err := e.counter.Setup(pctx); err != nil {
		return nil, setupErrorf("PostgreSQL at %s: %v", Redact(cfg.PostgresURL), err)
	}
	if err := seats(pctx, e.db, *cfg); err != nil {
		return nil, setupErrorf("PostgreSQL at %s: %v", Redact(cfg.PostgresURL), err)
	}
	if err := e.rdb.Del(pctx, lockKey(cfg.Name), fenceKey(cfg.Name)).Err(); err != nil {
		return nil, setupErrorf("Redis at %s: %v", Redact(cfg.RedisURL), err)
	}
	if e.topo, err = startTopo(ctx, *cfg, net, pgHost); err != nil {
		return nil, err
	}
	e.stops = append(e.stops, func() error { e.topo.close(); return nil })
	return e, nil
}

// startServers starts a throwaway redis-server and PostgreSQL for the URLs
// cfg leaves empty, and fills them in; a server given by URL is nil.
// PostgreSQL runs on pgHost unless it is nil.
func startServers(ctx context.Context, cfg *Config, pgHost *topology.NetnsHost) (redis, postgres *servers.Server, err error) {
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = ErrInterrupted // a server's start cut short, not a server that cannot start
		}
	}()
	if cfg.RedisURL == "" {
		if redis, err = servers.StartRedis(ctx); err != nil {
			return nil, nil, setupErrorf("throwaway redis-server: %w", err)
		}
		cfg.RedisURL = redis.URL
	}
	if cfg.PostgresURL == "" {
		var h servers.Host
		if pgHost != nil {
			h = pgHost
		}
		if postgres, err = servers.StartPostgresOn(ctx, h); err != nil {
			if redis != nil {
				redis.Stop()
			}
			return nil, nil, setupErrorf("throwaway PostgreSQL: %w", err)
		}
		cfg.PostgresURL = postgres.URL
	}
	return redis, postgres, nil
}

// StartServers starts the throwaway servers of the URLs cfg leaves empty,
// fills the URLs in, and returns what removes them: for a caller that makes
// many runs on one pair of servers (starting PostgreSQL for each would cost
// more than some runs). Run starts its own when cfg names none.
func StartServers(ctx context.Context, cfg *Config) (stop func(), err error) {
	redis, postgres, err := startServers(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	return func() {
		for _, sv := range []*servers.Server{postgres, redis} {
			if sv != nil {
				sv.Stop()
			}
		}
	}, nil
}

// seats refuses a run whose workers PostgreSQL cannot all seat: each holds
// a session for the counter (and pg-advisory one more for its lock), and a
// worker that cannot connect would leave the run with fewer workers than
// asked for, and a verdict on a run nobody asked for.
func seats(ctx context.Context, db *pgxpool.Pool, cfg Config) error {
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
	per := 1 + cfg.lockKind().Sessions
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

// logServers says in the run's log which servers the run uses, and has the
// throwaway ones keep their own logs in the run directory when they stop,
// so that the kept logs show how they ended.
func (e *env) logServers(run store.Run, cfg Config, lg *runLog) {
	for _, sv := range []struct {
		s        *servers.Server
		url, log string
	}{{e.redis, cfg.RedisURL, store.RedisLog}, {e.postgres, cfg.PostgresURL, store.PostgresLog}} {
		if sv.s == nil {
			lg.logf("server given: %s", Redact(sv.url))
			continue
		}
		lg.logf("%s: throwaway, pid %d, at %s; its own log is kept as %s", sv.s.Name(), sv.s.ProcessID(), Redact(sv.url), sv.log)
		sv.s.KeepLog(run.Path(sv.log))
	}
	for _, r := range e.topo.roles {
		lg.logf("host %s at %s: %s", r.h.Name(), r.h.IP(), r.what)
	}
}

// workerApp is the application_name of the workers' sessions.
func workerApp(counterID int64) string { return fmt.Sprintf("hiatus-worker-%d", counterID) }

// settle reads from the audit table which of ids, the run's :info writes,
// took effect (audited) of those it could ask about (asked), once no worker
// session is left that could still commit one: the sessions of workers
// that died are given 5 s to end, then terminated.
func (e *env) settle(ctx context.Context, cfg Config, ids []client.WriteID, lg *runLog) (asked, audited map[client.WriteID]bool) {
	if len(ids) == 0 {
		return nil, nil
	}
	app := workerApp(cfg.CounterID)
	const count = `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := e.db.QueryRow(ctx, count, app).Scan(&n); err != nil {
			lg.printf("cannot resolve :info writes: %v", err)
			return nil, nil
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			lg.logf("terminating %d worker sessions still open", n)
			if _, err := e.db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
				lg.printf("cannot resolve :info writes: %v", err)
				return nil, nil
			}
			deadline = time.Now().Add(5 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	audited, err := e.counter.Audited(ctx, ids)
	if err != nil {
		lg.printf("cannot resolve :info writes: %v", err)
		return nil, nil
	}
	asked = make(map[client.WriteID]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	lg.logf("resolving %d :info writes from counter_audit: %d took effect", len(asked), len(audited))
	return asked, audited
}

// redisClient connects with retries off: a retried SET NX could be granted
// twice and the history would never know. Every request is bounded by
// timeout, and by its context's deadline, so that a paused server makes a
// bounded wait, never a hang.
func redisClient(rawURL string, pool int, timeout time.Duration) (*redis.Client, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--redis-url %s: %v", Redact(rawURL), redactErr(err))
	}
	opt.MaxRetries = -1
	opt.PoolSize = pool + 2
	opt.ReadTimeout, opt.WriteTimeout, opt.DialTimeout = timeout, timeout, timeout
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// failoverClient connects to the primary the sentinels name, and follows
// their failovers, as redisClient connects (no retries, bounded waits).
// direct maps the addresses they give to those it dials.
func failoverClient(sentinels []string, direct map[string]string, timeout time.Duration) *redis.Client {
	var d net.Dialer
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: masterName, SentinelAddrs: sentinels, MaxRetries: -1, PoolSize: 4,
		ReadTimeout: timeout, WriteTimeout: timeout, DialTimeout: timeout, ContextTimeoutEnabled: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if to, ok := direct[addr]; ok {
				addr = to
			}
			return d.DialContext(ctx, network, addr)
		},
	})
}

// postgresPool connects to PostgreSQL; app names the sessions
// (application_name) so that the run can tell when its workers' are gone.
func postgresPool(ctx context.Context, rawURL string, conns int32, app string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--postgres-url %s: %v", Redact(rawURL), redactErr(err))
	}
	pc.MaxConns = conns
	pc.ConnConfig.RuntimeParams["application_name"] = app
	db, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL at %s: %v", Redact(rawURL), err)
	}
	return db, nil
}

// env holds the servers and clients of a run.
type env struct {
	rdb     *redis.Client
	db      *pgxpool.Pool
	counter *client.Counter
	stops   []func() error

	// The throwaway servers, nil for servers given by URL.
	redis, postgres *servers.Server
	topo            *topo // the lock's own nodes, and the workers' links
}

func (e *env) close() {
	if e.rdb != nil {
		e.rdb.Close()
	}
	if e.db != nil {
		e.db.Close()
	}
	for i := len(e.stops) - 1; i >= 0; i-- {
		_ = e.stops[i]()
	}
}

// ServerVersions names the servers at the two URLs, as "Redis 7.0.15,
// PostgreSQL 15.8", for the captions of tables made from runs on them.
func ServerVersions(ctx context.Context, redisURL, postgresURL string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rdb, err := redisClient(redisURL, 1, 5*time.Second)
	if err != nil {
		return "", &SetupError{Err: err}
	}
	defer rdb.Close()
	info, err := rdb.InfoMap(ctx, "server").Result()
	if err != nil {
		return "", setupErrorf("cannot reach Redis at %s: %v", Redact(redisURL), err)
	}
	db, err := postgresPool(ctx, postgresURL, 1, "hiatus-compare")
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
