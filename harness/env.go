package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/lockserver"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/hiatus-dev/hiatus/topology"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// startEnv starts the throwaway servers cfg asks for (filling in their URLs
// in cfg's Config; its faults stay as read),
// connects to both servers and prepares the lock keys and the counter row.
// Unreachable servers are the user's to fix: exit 254. The wait for the
// throwaway servers to start ends with start; what lives on (servers,
// hosts, links) is made under ctx.
func startEnv(start, ctx context.Context, cfg *runPlan, setup *setupLog) (_ *env, err error) {
	e := &env{}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
		}
	}()
	// Any run, of any kind, removes what killed runs left on this
	// machine: their namespaces, by the dead PID in the names. Without
	// root there are none to remove, and nothing to say.
	if os.Geteuid() == 0 {
		e.orphans = topology.RemoveOrphans()
	}
	place, err := newPlacement(ctx, *cfg, setup)
	if err != nil {
		return nil, err
	}
	e.stops = append(e.stops, place.close) // stopped in reverse: after the servers on it
	e.notices = place.notices()
	pgHost := place.postgres()
	if e.redis, e.postgres, err = startServers(start, &cfg.Config, pgHost); err != nil {
		return nil, err
	}
	if pgHost != nil && e.postgres != nil {
		setup.printf("PostgreSQL started on node %s", pgHost.Name())
	}
	for _, sv := range []*servers.Server{e.redis, e.postgres} { // stopped in reverse
		if sv != nil {
			e.stops = append(e.stops, sv.Stop)
		}
	}
	e.rdb, err = redisClient(cfg.RedisURL, history.ClientRun, cfg.Workers, cfg.OpTimeout)
	if err != nil {
		return nil, &SetupError{Err: err}
	}
	// A bound for a server that takes the connection and says nothing;
	// a throwaway PostgreSQL beside two CPU burners took more than 5 s to
	// count its free sessions (TestRunAdapterMisbehaves, TestPauseTest).
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := e.rdb.Ping(pctx).Err(); err != nil {
		return nil, setupErrorf("cannot reach Redis at %s: %v", Redact(cfg.RedisURL), err)
	}
	e.db, err = postgresPool(pctx, cfg.PostgresURL, 4, "hiatus-run", nil)
	if err != nil {
		return nil, &SetupError{Err: err}
	}
	if err := e.db.Ping(pctx); err != nil {
		return nil, setupErrorf("cannot reach PostgreSQL at %s: %v", Redact(cfg.PostgresURL), err)
	}
	e.resource = cfg.resource(e.db)
	if err := e.resource.Setup(pctx); err != nil {
		return nil, setupErrorf("PostgreSQL at %s: %v", Redact(cfg.PostgresURL), err)
	}
	if err := seats(pctx, e.db, *cfg); err != nil {
		return nil, setupErrorf("PostgreSQL at %s: %v", Redact(cfg.PostgresURL), err)
	}
	if err := e.rdb.Del(pctx, lockKey(cfg.Name), fenceKey(cfg.Name)).Err(); err != nil {
		return nil, setupErrorf("Redis at %s: %v", Redact(cfg.RedisURL), err)
	}
	if e.topo, err = startTopo(ctx, *cfg, place, pgHost, setup); err != nil {
		return nil, err
	}
	e.stops = append(e.stops, func() error { e.topo.close(); return nil })
	return e, nil
}

// startServers starts a throwaway redis-server and PostgreSQL for the URLs
// cfg leaves empty, and fills them in; a server given by URL is nil.
// PostgreSQL runs on pgHost unless it is nil.
func startServers(ctx context.Context, cfg *Config, pgHost topology.Host) (redis, postgres *servers.Server, err error) {
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
		switch h := pgHost.(type) {
		case *topology.SSHHost:
			postgres, err = servers.StartPostgresOnNode(ctx, h)
		case *topology.NetnsHost:
			postgres, err = servers.StartPostgresOn(ctx, h)
		default:
			postgres, err = servers.StartPostgresOn(ctx, nil)
		}
		if err != nil {
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

// logServers says in the run's log which servers the run uses, and has the
// throwaway ones keep their own logs in the run directory when they stop,
// so that the kept logs show how they ended.
func (e *env) logServers(run store.Run, cfg runPlan, lg *runLog) {
	for _, sv := range []struct {
		s        *servers.Server
		url, log string
	}{{e.redis, cfg.RedisURL, store.RedisLog}, {e.postgres, cfg.PostgresURL, store.PostgresLog}} {
		if sv.s == nil {
			lg.logf("server given: %s", Redact(sv.url))
			continue
		}
		where := fmt.Sprintf("pid %d", sv.s.ProcessID())
		if sv.s.ProcessID() == 0 {
			where = "on its node" // the host lines below name it
		}
		lg.logf("%s: throwaway, %s, at %s; its own log is kept as %s", sv.s.Name(), where, Redact(sv.url), sv.log)
		sv.s.KeepLog(run.Path(sv.log))
	}
	if z := e.topo.zk; z != nil {
		for i, s := range z.Servers {
			log := fmt.Sprintf(store.ZooKeeperLog, i)
			lg.logf("ZooKeeper server %d: throwaway, pid %d, at %s; its own log is kept as %s", i, s.ProcessID(), s.Addr, log)
			s.KeepLog(run.Path(log))
		}
	}
	if e.orphans != nil {
		lg.printf("what killed runs left could not all be removed: %v", e.orphans)
	}
	for _, r := range e.topo.roles {
		lg.logf("host %s at %s: %s", r.h.Name(), r.h.IP(), r.what)
	}
	for _, n := range e.notices {
		lg.printf("%s", n)
	}
}

// env holds the servers and clients of a run.
type env struct {
	rdb *redis.Client
	db  *pgxpool.Pool
	// resource is the workload's resource: set up, settled, read last.
	resource client.Resource
	stops    []func() error

	// The throwaway servers, nil for servers given by URL.
	redis, postgres *servers.Server
	topo            *topo // the lock's own nodes, and the workers' links
	orphans         error // what killed runs left and this one could not remove
	// notices say where the placement changes the experiment (workers
	// cut together): the user is told, and the run's log keeps them.
	notices []string
	// record is the lock server's record of the run, once it has begun;
	// nil for none. The clock fault steps the nodes' clocks through it.
	record *lockserver.Recorder
	// adapterKey is the key the run's lock adapter said (its hello's key)
	// its library keeps the lock under; "" for the lock's name.
	adapterKey string
}

// close disconnects from the servers and undoes what startEnv made, last
// first; its error says what it could not undo.
func (e *env) close() error {
	if e.rdb != nil {
		e.rdb.Close()
	}
	if e.db != nil {
		e.db.Close()
	}
	var errs []error
	for i := len(e.stops) - 1; i >= 0; i-- {
		errs = append(errs, e.stops[i]())
	}
	return errors.Join(errs...)
}
