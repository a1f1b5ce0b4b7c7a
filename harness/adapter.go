package harness

import (
	"context"
	"io"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/internal/servers"
)

// An adapterProbe is what the run learnt of its lock adapter before any
// worker started it: its hello, and the processes it left running, which
// its Close killed.
type adapterProbe struct {
	hello adapter.Hello
	left  []adapter.Leftover
}

// probeAdapter starts the run's lock adapter, when it has one, and waits
// for its hello before any worker starts it: an adapter that cannot start
// is a setup error, said once with what it wrote, not a worker per slot
// failing in the log.
func probeAdapter(ctx context.Context, cfg Config, t *topo) (*adapterProbe, error) {
	command, ok := cfg.adapterCommand()
	if !ok {
		return nil, nil
	}
	var stderr adapter.Tail
	// Told what its workers' will be: an adapter that needs its nodes
	// or PostgreSQL at init says so here, not in every worker.
	s := adapter.Setup{RedisURL: cfg.RedisURL, PostgresURL: cfg.PostgresURL, Lock: lockKey(cfg.Name),
		Lease: cfg.Lease, Retry: cfg.Retry, Hello: cfg.AdapterHello}
	if t.zk != nil {
		s.ZooKeeper = t.zk.ConnectString()
	}
	if cfg.lockKind().Store == client.OnEtcd {
		s.Etcd = t.endpoints()
	}
	if cfg.lockKind().Store == client.OnRedisNodes {
		s.RedisURL, s.RedisURLs = t.nodeURLs[0], t.nodeURLs
	}
	if cfg.lockKind().Failover && t.repl != nil {
		s.RedisURL, s.Sentinel = "", t.sentinel()
	}
	p, err := adapter.Start(ctx, command, s, &stderr)
	if err != nil {
		if t := stderr.String(); t != "" {
			return nil, setupErrorf("--lock: %v; it wrote on stderr:\n%s", err, adapter.Quoted(t))
		}
		return nil, setupErrorf("--lock: %v", err)
	}
	p.Close()
	if cfg.ExtendBeforeWrite && !p.Hello.Renewal {
		return nil, setupErrorf("--extend-before-write: adapter %q takes no renew requests (its hello said renewal: false)", command)
	}
	return &adapterProbe{hello: p.Hello, left: p.Left()}, nil
}

// log says what the probe found, in the run's log and to the user.
func (a *adapterProbe) log(lg *runLog) {
	lg.printf("lock adapter: %s", a.hello)
	if len(a.left) > 0 {
		lg.printf("lock adapter: started for its hello, it left %s running after it exited: killed", adapter.Leftovers(a.left))
	}
}

// checkNodes is how many Redis nodes adapter check gives an adapter on
// several (AdapterOnRedisNodes): the fewest whose majority is not all.
const checkNodes = 3

// CheckAdapter runs the protocol's conformance check (adapter.Conform) of
// the adapter command against the Redis at redisURL, or a throwaway
// redis-server when it is "", saying what it found on out; with store
// AdapterOnZooKeeper beside a throwaway ZooKeeper server, with
// AdapterOnEtcd beside a throwaway etcd server, with AdapterOnRedisNodes
// on three throwaway redis-servers, told as redis_urls, and with
// AdapterOnSentinel on a throwaway primary, replica and sentinels, told
// as sentinels.
func CheckAdapter(ctx context.Context, command, redisURL, store string, out io.Writer, trace bool) error {
	at := adapter.Setup{}
	switch store {
	case AdapterOnZooKeeper:
		z, err := servers.StartZooKeeper(ctx, 1)
		if err != nil {
			return setupErrorf("throwaway ZooKeeper: %w", err)
		}
		defer z.Stop()
		at.ZooKeeper = z.ConnectString()
	case AdapterOnEtcd:
		e, err := servers.StartEtcd(ctx)
		if err != nil {
			return setupErrorf("throwaway etcd: %w", err)
		}
		defer e.Stop()
		at.Etcd = []string{e.URL}
	case AdapterOnRedisNodes:
		if redisURL != "" {
			return setupErrorf("--adapter-store %s starts its own nodes: unset --redis-url (and HIATUS_REDIS_URL, which sets it)", AdapterOnRedisNodes)
		}
		for range checkNodes {
			sv, err := servers.StartRedis(ctx)
			if err != nil {
				return setupErrorf("throwaway redis-server: %w", err)
			}
			defer sv.Stop()
			at.RedisURLs = append(at.RedisURLs, sv.URL)
		}
		redisURL = at.RedisURLs[0]
	case AdapterOnSentinel:
		if redisURL != "" {
			return setupErrorf("--adapter-store %s starts its own primary and sentinels: unset --redis-url (and HIATUS_REDIS_URL, which sets it)", AdapterOnSentinel)
		}
		r, err := servers.StartReplicated(ctx, nil)
		if err != nil {
			return setupErrorf("throwaway sentinels: %w", err)
		}
		defer r.Close()
		at.Sentinel = adapter.Sentinel{Addrs: r.SentinelAddrs(), Master: servers.MasterName, NAT: r.Direct()}
		return adapter.ConformAt(ctx, command, at, out, trace)
	}
	if redisURL == "" {
		sv, err := servers.StartRedis(ctx)
		if err != nil {
			return setupErrorf("throwaway redis-server: %w", err)
		}
		defer sv.Stop()
		redisURL = sv.URL
	}
	at.RedisURL = redisURL
	return adapter.ConformAt(ctx, command, at, out, trace)
}
