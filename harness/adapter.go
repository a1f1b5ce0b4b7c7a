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
func probeAdapter(ctx context.Context, cfg runPlan, t *topo) (*adapterProbe, error) {
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
	if cfg.lock.Store == client.OnEtcd {
		s.Etcd = t.endpoints()
	}
	if cfg.lock.Store == client.OnRedisNodes {
		s.RedisURL, s.RedisURLs = t.nodeURLs[0], t.nodeURLs
	}
	if cfg.onSentinel() {
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
	if cfg.onSentinel() && !p.Hello.Sentinel {
		return nil, setupErrorf("--adapter-store %s: adapter %q was told the sentinels, and its hello did not say sentinel: true: its lock would be kept elsewhere (its library's default Redis)", AdapterOnSentinel, command)
	}
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
	at, stop, err := checkServers(ctx, redisURL, store)
	if err != nil {
		return err
	}
	defer stop()
	return adapter.ConformAt(ctx, command, at, out, trace)
}

// checkServers starts the servers adapter check gives an adapter on store
// (AdapterCheckStores says which), and returns what it is told of them and
// how to stop them.
func checkServers(ctx context.Context, redisURL, store string) (at adapter.Setup, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	if redisURL != "" && (store == AdapterOnRedisNodes || store == AdapterOnSentinel) {
		return at, nil, setupErrorf("--adapter-store %s starts its own Redis: unset --redis-url (and HIATUS_REDIS_URL, which sets it)", store)
	}
	redis := func() (string, error) {
		sv, err := servers.StartRedis(ctx)
		if err != nil {
			return "", setupErrorf("throwaway redis-server: %w", err)
		}
		stops = append(stops, func() { sv.Stop() })
		return sv.URL, nil
	}
	switch store {
	case AdapterOnZooKeeper:
		z, err := servers.StartZooKeeper(ctx, 1)
		if err != nil {
			return at, nil, setupErrorf("throwaway ZooKeeper: %w", err)
		}
		stops, at.ZooKeeper = append(stops, func() { z.Stop() }), z.ConnectString()
	case AdapterOnEtcd:
		e, err := servers.StartEtcd(ctx)
		if err != nil {
			return at, nil, setupErrorf("throwaway etcd: %w", err)
		}
		stops, at.Etcd = append(stops, func() { e.Stop() }), []string{e.URL}
	case AdapterOnRedisNodes:
		for range checkNodes {
			u, err := redis()
			if err != nil {
				return at, nil, err
			}
			at.RedisURLs = append(at.RedisURLs, u)
		}
		redisURL = at.RedisURLs[0]
	case AdapterOnSentinel:
		r, err := servers.StartReplicated(ctx, nil)
		if err != nil {
			return at, nil, setupErrorf("throwaway sentinels: %w", err)
		}
		stops, at.Sentinel = append(stops, r.Close), adapter.Sentinel{Addrs: r.SentinelAddrs(), Master: servers.MasterName, NAT: r.Direct()}
		return at, stop, nil // redis_url none: the primary is whichever the sentinels name
	}
	if redisURL == "" {
		if redisURL, err = redis(); err != nil {
			return at, nil, err
		}
	}
	at.RedisURL = redisURL
	return at, stop, nil
}
