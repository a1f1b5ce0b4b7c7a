package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/lockserver"
	"github.com/hiatus-dev/hiatus/store"
)

// The lock server's record (lockserver.edn): what the lock's own servers
// did to its keys while the run went, started before the first worker and
// stopped after the last op, on every path.

// recordConfig is what the recorder of cfg's run records, on topology t;
// ok is false when there is nothing to record: --lock-server-record none,
// or a lock kept where the run knows nothing of (a program's own).
func recordConfig(cfg runPlan, t *topo, start time.Time, lg *runLog) (lockserver.Config, bool) {
	rc := lockserver.Config{Mode: cfg.lockServerRecord(), Start: start, ClockURL: cfg.RedisURL, Key: lockKey(cfg.Name),
		Log: func(format string, args ...any) { lg.logf("lock server's record: "+format, args...) }}
	if rc.Mode == lockserver.ModeNone {
		return rc, false
	}
	fenced := cfg.guard().Fenced() && cfg.lock.Store != client.OnZooKeeper // its fence is the znode's czxid
	if fenced {
		rc.FenceKey = fenceKey(cfg.Name)
	}
	onRun := false // the run's Redis is among the lock's nodes
	switch cfg.lock.Store {
	case client.OnRedis, client.OnRedisNodes:
		urls, own := t.nodeURLs, true
		if t.repl != nil {
			urls = t.repl.NodeURLs()
		} else if len(t.nodes) == 0 {
			own, onRun = false, true // the lock is kept on the run's Redis
		}
		for i, u := range urls {
			rc.Redis = append(rc.Redis, lockserver.RedisNode{Name: fmt.Sprintf("redis-%d", i), URL: u, OwnClock: own})
		}
	case client.OnEtcd:
		if cfg.byAdapter() {
			// A library's etcd lock names no lease by the worker's name
			// (client.EtcdClientKey): its record would be all unnamed
			// grants, which the checks cannot tell apart.
			lg.logf("lock server's record: none of an adapter's lock on etcd, whose leases carry no worker's name")
			return rc, false
		}
		rc.Key = client.EtcdPrefix(lockKey(cfg.Name))
		rc.Etcd = &lockserver.EtcdNode{Name: "etcd-0", Endpoints: t.endpoints()}
	case client.OnPostgres:
		// The workers' sessions run the record's functions in place of
		// the advisory lock's (recordPostgres).
		rc.Postgres = &lockserver.PostgresNode{Name: "postgres", URL: cfg.PostgresURL, Key: client.AdvisoryKey(lockKey(cfg.Name))}
	case client.OnZooKeeper:
		// Read where the recorder runs, past the links the faults cut:
		// the workers' sessions are named (client.ZooKeeperClientPath).
		rc.Key = client.ZooKeeperPath(lockKey(cfg.Name))
		rc.ZooKeeper = &lockserver.ZooKeeperNode{Name: "zk-0", Servers: t.zk.Addrs(), Expired: t.zk.SessionExpired}
	default:
		// A program's own lock: the recorder cannot read it, and a
		// record of the fence counter alone would hold no grant to match
		// the lock's calls to.
		return rc, false
	}
	if fenced && !onRun {
		// The fence counter is on the run's Redis.
		rc.Redis = append(rc.Redis, lockserver.RedisNode{Name: "redis-run", URL: cfg.RedisURL})
	}
	return rc, true
}

// recordPostgres reports whether the workers' PostgreSQL sessions are to
// run the record's functions in place of the advisory lock's
// (lockserver.SessionParams): a lock kept on PostgreSQL, recorded.
func (c runPlan) recordPostgres() bool {
	return c.lockServerRecord() != lockserver.ModeNone && c.lock.Store == client.OnPostgres
}

// readServerRecord reads the run's lock server's record, for its check and
// its timeline: nil when the run has none, or when it cannot be read (which
// the log says: the history is checked alone, as before).
func readServerRecord(run store.Run, lg *runLog) *history.ServerRecord {
	path, ok, err := run.Optional(store.LockServer)
	if err == nil && ok {
		var r *history.ServerRecord
		if r, err = history.ReadServerRecord(path); err == nil {
			return r
		}
	}
	if err != nil {
		lg.printf("%s: %v", store.LockServer, err)
	}
	return nil
}

// startRecord starts the record of cfg's run in run, when there is one to
// make; a nil Recorder stops at once. A server that cannot be recorded as
// --lock-server-record asks is the user's to fix.
func startRecord(ctx context.Context, cfg runPlan, env *env, run store.Run, start time.Time, lg *runLog) (*lockserver.Recorder, error) {
	rc, ok := recordConfig(cfg, env.topo, start, lg)
	if !ok {
		return nil, nil
	}
	if env.adapterKey != "" && rc.Etcd == nil && rc.Postgres == nil {
		// A Redis lock whose library keeps it under a name of its own.
		rc.Key = env.adapterKey
		lg.logf("lock server's record: the adapter keeps the lock under %q, which the record watches", env.adapterKey)
	}
	rec, err := lockserver.Start(ctx, run, rc)
	if err != nil {
		return nil, setupErrorf("--lock-server-record %s: %v (--lock-server-record commands records without CONFIG SET, none records nothing)", rc.Mode, err)
	}
	return rec, nil
}
