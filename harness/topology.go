package harness

import (
	"cmp"
	"context"
	"fmt"
	"math/rand"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/topology"
)

// DefaultNodes is how many independent Redis nodes redlock is kept on.
const DefaultNodes = 5

// nodeFaults are the faults that act on the lock's Redis nodes: a run with
// one keeps the lock on nodes of its own, apart from the run's Redis, whose
// clock stamps the history and whose counter hands out the fences — a
// jumped clock there would jump the history, a restart reset the fences.
func nodeFaults() []string { return []string{"clock", "restart"} }

// linkFaults are the faults that act on links: a run with one puts a link
// (a proxy) in each worker's path to every lock node and to PostgreSQL.
func linkFaults() []string {
	return []string{"partition-redis", "partition-postgres", "delay-redis", "delay-postgres", "drop-redis", "drop-postgres"}
}

// redisLinkFaults are the link faults that act on the links to the lock's
// nodes.
func redisLinkFaults() []string { return []string{"partition-redis", "delay-redis", "drop-redis"} }

// sequenceable are the faults a sequence (a+b) may be made of: those that
// begin with :start and end with :stop, so that its events say what its
// parts are.
func sequenceable() []string {
	return append(linkFaults(), "clock", "isolate", "failover")
}

// clockJump and delay are the clock and delay faults' sizes: the lease by
// default, so that a jump ends every lease a node holds and a delayed
// request arrives a lease late.
func (c Config) clockJump() time.Duration { return cmp.Or(c.ClockJump, c.Lease) }
func (c Config) delay() time.Duration     { return cmp.Or(c.Delay, c.Lease) }

// redisLock reports whether the lock is kept on Redis, so that the nodes'
// faults can reach it.
func (c Config) redisLock() bool {
	return c.Lock != "pg-advisory" && c.Lock != "etcd" && c.Locks[c.Lock] == nil
}

// lockNodes is how many Redis nodes of its own the lock is kept on: the
// redlock's --nodes, one when a fault acts on the lock's node, and none
// (the run's Redis) otherwise.
func (c Config) lockNodes() int {
	switch {
	case c.Lock == "redlock":
		return c.nodes()
	case c.redisLock() && c.faultIn(nodeFaults()):
		return 1
	}
	return 0
}

func (c Config) nodes() int {
	if c.Nodes > 0 {
		return c.Nodes
	}
	return DefaultNodes
}

// faultIn reports whether c's nemesis names any of names.
func (c Config) faultIn(names []string) bool {
	return slices.ContainsFunc(c.faultParts(), func(f string) bool { return slices.Contains(names, f) })
}

// topo is what stands between the workers and the servers: the lock's own
// Redis nodes, if any, and the links the link faults act on.
type topo struct {
	nodes    []*servers.Server // the lock's own nodes; none when it is kept on the run's Redis
	nodeURLs []string          // where the lock is kept: the nodes, or the run's Redis
	postgres string
	redis    string // the run's Redis: the history's clock, the fences
	// links[slot] are a worker's links: one to each of nodeURLs, then one
	// to PostgreSQL, then (on a host of its own) one to the run's Redis;
	// nil when no fault acts on links and workers run on this machine.
	links [][]*topology.Link
	// net and hosts, with --hosts netns: each worker's network namespace,
	// which reaches the servers through its links, on the root's address.
	net   *topology.Net
	hosts []*topology.NetnsHost
	repl  *replicated     // the lock's replicated Redis, for the failover fault; nil without
	etcd  *servers.Server // the etcd lock's throwaway server; nil for other locks
}

// startTopo starts the lock's nodes (under a clock that can be jumped when
// the clock fault is on) and the workers' links, as cfg asks.
func startTopo(ctx context.Context, cfg Config) (_ *topo, err error) {
	t := &topo{nodeURLs: []string{cfg.RedisURL}, postgres: cfg.PostgresURL, redis: cfg.RedisURL}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	if n := cfg.lockNodes(); n > 0 {
		t.nodeURLs = nil
		opt := servers.RedisOptions{FakeClock: slices.Contains(cfg.faultParts(), "clock")}
		for i := range n {
			s, err := servers.StartRedisWith(ctx, opt)
			if err != nil {
				return nil, setupErrorf("the lock's Redis node %d: %w", i+1, err)
			}
			t.nodes = append(t.nodes, s)
			t.nodeURLs = append(t.nodeURLs, s.URL)
		}
	}
	if cfg.Lock == "etcd" {
		if t.etcd, err = servers.StartEtcd(ctx); err != nil {
			return nil, setupErrorf("throwaway etcd: %w", err)
		}
	}
	if cfg.faultIn([]string{"failover"}) {
		if t.repl, err = startReplicated(ctx); err != nil {
			return nil, err
		}
	}
	ip := "127.0.0.1"
	if cfg.Hosts == "netns" {
		if err := t.startHosts(ctx, cfg.Workers); err != nil {
			return nil, err
		}
		ip = t.net.Root().IP()
	} else if !cfg.faultIn(linkFaults()) {
		return t, nil
	}
	t.links = make([][]*topology.Link, cfg.Workers)
	for slot := range t.links {
		targets := append(slices.Clone(t.nodeURLs), t.postgres)
		if t.net != nil {
			targets = append(targets, t.redis)
		}
		for _, u := range targets {
			l, err := linkTo(ip, u)
			if err != nil {
				return nil, err
			}
			t.links[slot] = append(t.links[slot], l)
		}
	}
	return t, nil
}

// startHosts makes a network namespace for each of n workers, on a bridge
// of their own.
func (t *topo) startHosts(ctx context.Context, n int) error {
	var err error
	if t.net, err = topology.NewNet(ctx, "run"); err != nil {
		return setupErrorf("--hosts netns: %w", err)
	}
	for slot := range n {
		h, err := t.net.AddHost(ctx, fmt.Sprintf("w%d", slot))
		if err != nil {
			return setupErrorf("--hosts netns: worker %d's host: %w", slot, err)
		}
		t.hosts = append(t.hosts, h)
	}
	return nil
}

// host is where the worker in slot runs; nil for this machine.
func (t *topo) host(slot int) topology.Host {
	if t.hosts == nil {
		return nil
	}
	return t.hosts[slot]
}

// linkTo starts a link, listening on ip, to the server at rawURL.
func linkTo(ip, rawURL string) (*topology.Link, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, setupErrorf("a link to %s: the link faults need a server URL with host:port", Redact(rawURL))
	}
	l, err := topology.ListenOn(ip, u.Host)
	if err != nil {
		return nil, setupErrorf("a link to %s: %v", Redact(rawURL), err)
	}
	return l, nil
}

// via returns rawURL with its host:port replaced by the link's.
func via(rawURL string, l *topology.Link) string {
	u, _ := url.Parse(rawURL) // linkTo parsed it
	u.Host = l.Addr()
	return u.String()
}

// urls are the servers as the worker in slot reaches them: the lock's
// nodes and PostgreSQL, through its links when it has them.
func (t *topo) urls(slot int) (nodes []string, postgres, redis string) {
	if t.links == nil {
		return t.nodeURLs, t.postgres, t.redis
	}
	ls := t.links[slot]
	for i, u := range t.nodeURLs {
		nodes = append(nodes, via(u, ls[i]))
	}
	postgres, redis = via(t.postgres, ls[len(t.nodeURLs)]), t.redis
	if t.net != nil {
		redis = via(t.redis, ls[len(t.nodeURLs)+1])
	}
	return nodes, postgres, redis
}

// sentinels are where a worker asks for the lock's primary, and direct
// maps the addresses they give to the nodes; none without failover.
func (t *topo) sentinels() []string {
	if t.repl == nil {
		return nil
	}
	return t.repl.sentinelAddrs()
}

func (t *topo) direct() map[string]string {
	if t.repl == nil {
		return nil
	}
	return t.repl.direct()
}

// etcdURL is the etcd lock's server; "" for other locks.
func (t *topo) etcdURL() string {
	if t.etcd == nil {
		return ""
	}
	return t.etcd.URL
}

// nodeLinks returns the links of the worker in slot to the lock's nodes: to
// a minority of them, chosen by r, when there are several (a majority cut
// off would only stop the worker from acquiring), and what they are.
func (t *topo) nodeLinks(slot int, r *rand.Rand) ([]nemesis.Link, string, []int) {
	ls := t.links[slot][:len(t.nodeURLs)]
	if len(ls) == 1 {
		return []nemesis.Link{ls[0]}, "redis", []int{0}
	}
	picked := r.Perm(len(ls))[:max(1, (len(ls)-1)/2)]
	slices.Sort(picked)
	var out []nemesis.Link
	var names []string
	for _, i := range picked {
		out = append(out, ls[i])
		names = append(names, fmt.Sprint(i))
	}
	return out, "nodes " + strings.Join(names, ","), picked
}

// postgresLink returns the link of the worker in slot to PostgreSQL.
func (t *topo) postgresLink(slot int, _ *rand.Rand) ([]nemesis.Link, string, []int) {
	ls := t.links[slot]
	return []nemesis.Link{ls[len(t.nodeURLs)]}, "postgres", nil
}

// isolate is the fault that cuts a worker's host off from the root
// namespace: from every server, the history's clock and the fences too.
func (t *topo) isolate(workers func() []nemesis.Target) nemesis.Fault {
	return &nemesis.Isolate{Workers: workers,
		Cut:  func(ctx context.Context, slot int) error { return t.hosts[slot].Isolate(ctx, t.net.Root()) },
		Heal: func(ctx context.Context, slot int) error { return t.hosts[slot].Heal(ctx) }}
}

// linkFault is the fault called name if it is a link fault.
func (t *topo) linkFault(name string, cfg Config, workers func() []nemesis.Target) nemesis.Fault {
	links := t.nodeLinks
	if strings.HasSuffix(name, "-postgres") {
		links = t.postgresLink
	}
	f := &nemesis.LinkFault{Which: history.Keyword(name), Links: links, Workers: workers, Slow: cfg.delay()}
	switch {
	case strings.HasPrefix(name, "partition-"):
		f.Action = nemesis.Partition
	case strings.HasPrefix(name, "delay-"):
		f.Action = nemesis.Delay
	case strings.HasPrefix(name, "drop-"):
		f.Action = nemesis.Drop
	default:
		return nil
	}
	return f
}

func (t *topo) close() {
	for _, ls := range t.links {
		for _, l := range ls {
			l.Close()
		}
	}
	for _, s := range t.nodes {
		s.Stop()
	}
	if t.repl != nil {
		t.repl.close()
	}
	t.etcd.Stop()
	if t.net != nil {
		t.net.Close() // after the workers: a run's workers have ended before its env closes
	}
}
