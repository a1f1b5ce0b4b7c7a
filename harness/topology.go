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

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/topology"
)

// DefaultNodes is how many independent Redis nodes redlock is kept on.
const DefaultNodes = 5

// topo is what stands between the workers and the servers: the lock's own
// Redis nodes, if any; the hosts everything runs on, where the placement
// (--hosts) put them; and the paths the link faults act on.
type topo struct {
	nodes    []*servers.Server // the lock's own nodes; none when it is kept on the run's Redis
	nodeURLs []string          // where the lock is kept: the nodes, or the run's Redis
	postgres string
	redis    string // the run's Redis: the history's clock, the fences
	// paths[slot] are how the worker in slot reaches each of nodeURLs,
	// then PostgreSQL, then the run's Redis; nil when no link fault acts
	// and the workers run on this machine.
	paths [][]path
	// With hosts (--hosts netns or ssh:FILE): each worker's host, and the
	// servers': a host for each of nodes, PostgreSQL's (nil when it was
	// given by URL: it is reached through a proxy on this machine, as the
	// run's Redis always is) and the others' (etcd, the replicated Redis,
	// whose hosts are only in roles). None on this machine.
	place       placement
	control     string        // the address the hosts reach this machine at; "" without hosts
	controlHost topology.Host // this machine, as a host the others are cut from; nil without hosts
	hosts       []topology.Host
	nodeHosts   []topology.Host
	pgHost      topology.Host
	roles       []hostRole          // every host, for the log and for isolate
	repl        *servers.Replicated // the lock's replicated Redis, for the failover fault; nil without
	etcd        *servers.Server     // the etcd lock's throwaway server; nil for other locks
	// zk is the ZooKeeper lock's throwaway ensemble; nil for other locks.
	// Its servers are the lock's nodes (nodes, nodeURLs, nodeHosts), so
	// that the node and link faults act on them.
	zk *servers.ZooKeeper
	// setup tells the set-up's steps over SSH; nil says nothing.
	setup *setupLog
}

// A path is how a worker reaches one server, and what the link faults act
// on there.
type path struct {
	url   string         // as the worker dials it
	link  nemesis.Link   // nil where no link fault can act
	proxy *topology.Link // the proxy on the way; nil for none
}

// startLockNodes starts the lock's own Redis nodes, when cfg's lock has
// them.
func (t *topo) startLockNodes(ctx context.Context, cfg runPlan) error {
	n := cfg.lockNodes()
	if n <= 0 {
		return nil
	}
	t.nodeURLs = nil
	for i := range n {
		opt := servers.RedisOptions{FakeClock: cfg.needs&needFakeClock != 0, AppendFsyncAlways: cfg.NodeAOF}
		s, h, err := t.place.redisNode(ctx, i, opt)
		if err != nil {
			return setupErrorf("the lock's Redis node %d: %w", i+1, err)
		}
		t.placed(h, fmt.Sprintf("the lock's Redis node %d", i))
		t.nodes, t.nodeURLs = append(t.nodes, s), append(t.nodeURLs, s.URL)
		if h != nil {
			t.nodeHosts = append(t.nodeHosts, h)
		}
	}
	return nil
}

// startZooKeeper starts the ZooKeeper ensemble of a lock kept on one, and
// makes its servers the lock's nodes.
func (t *topo) startZooKeeper(ctx context.Context, cfg runPlan) error {
	n := cfg.zkNodes()
	if n == 0 {
		return nil
	}
	z, on, err := t.place.zooKeeper(ctx, n)
	if err != nil {
		return setupErrorf("throwaway ZooKeeper: %w", err)
	}
	for i, h := range on {
		t.placed(h, zkServer(i))
	}
	t.nodeHosts = append(t.nodeHosts, on...)
	t.zk, t.nodes, t.nodeURLs = z, slices.Clone(z.Servers), nil
	for _, s := range z.Servers {
		t.nodeURLs = append(t.nodeURLs, s.URL)
	}
	return nil
}

// startTopo starts the lock's nodes (under a clock that can be jumped when
// the clock fault is on), puts the workers, and makes their paths, as cfg
// asks, where place puts them; pgHost is PostgreSQL's host or nil.
func startTopo(ctx context.Context, cfg runPlan, place placement, pgHost topology.Host, setup *setupLog) (_ *topo, err error) {
	t := &topo{nodeURLs: []string{cfg.RedisURL}, postgres: cfg.PostgresURL, redis: cfg.RedisURL, place: place, pgHost: pgHost, setup: setup}
	t.control, t.controlHost = place.control()
	if pgHost != nil {
		t.roles = append(t.roles, hostRole{pgHost, "PostgreSQL"}) // its start says where
	}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	for _, start := range []func(context.Context, runPlan) error{t.startLockNodes, t.startZooKeeper, t.startEtcd, t.startReplicated} {
		if err := start(ctx, cfg); err != nil {
			return nil, err
		}
	}
	for slot := range cfg.Workers {
		h, err := place.worker(ctx, slot)
		if err != nil {
			return nil, err
		}
		if h != nil {
			t.hosts = append(t.hosts, h)
			t.placed(h, fmt.Sprintf("worker %d", slot))
		}
	}
	if t.hosts == nil && !cfg.proxied() {
		return t, nil
	}
	t.paths = make([][]path, cfg.Workers)
	for slot := range t.paths {
		if err := t.startPaths(slot, cfg.proxied()); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// startReplicated starts the replicated Redis of a failover, or of an
// adapter's lock told the sentinels.
func (t *topo) startReplicated(ctx context.Context, cfg runPlan) (err error) {
	if !cfg.replicated() {
		return nil
	}
	r, on, err := t.place.replicated(ctx)
	if err != nil {
		return &SetupError{Err: err}
	}
	t.repl = r
	for _, h := range on {
		t.placed(h.h, h.what)
	}
	return nil
}

// startEtcd starts the etcd of a lock kept on etcd.
func (t *topo) startEtcd(ctx context.Context, cfg runPlan) (err error) {
	if cfg.lock.Store != client.OnEtcd {
		return nil
	}
	s, h, err := t.place.etcd(ctx)
	if err != nil {
		return setupErrorf("throwaway etcd: %w", err)
	}
	t.etcd = s
	t.placed(h, etcdServer)
	return nil
}

// etcdServer and zkServer name the lock's servers as the set-up, the log
// and a refused cut say them.
const etcdServer = "etcd"

func zkServer(i int) string { return fmt.Sprintf("ZooKeeper server %d", i) }

// A hostRole is a host of the test network and what runs on it.
type hostRole struct {
	h    topology.Host
	what string
}

// placed notes that h holds what (a server started there, a worker to
// come), and says so in the set-up's progress.
func (t *topo) placed(h topology.Host, what string) {
	if h == nil {
		return // on this machine
	}
	t.roles = append(t.roles, hostRole{h, what})
	t.setup.printf("%s on node %s", what, h.Name())
}

// startPaths makes the paths of the worker in slot: through a proxy of its
// own to each server when proxied; else, from a host of its own, straight
// to the servers on hosts (a partition is a rule in its host's filter) and
// through a proxy to those that are not.
func (t *topo) startPaths(slot int, proxied bool) error {
	ip := cmp.Or(t.control, "127.0.0.1")
	// on[i] is the host of targets[i]; nil for one on this machine (the
	// lock kept on the run's Redis has no node of its own).
	targets := append(slices.Clone(t.nodeURLs), t.postgres)
	on := make([]topology.Host, len(t.nodeURLs), len(targets)+1)
	copy(on, t.nodeHosts)
	on = append(on, t.pgHost)
	if t.control != "" {
		targets, on = append(targets, t.redis), append(on, nil)
	}
	for i, u := range targets {
		if !proxied && on[i] != nil {
			t.paths[slot] = append(t.paths[slot], path{url: u, link: kernelCut{from: t.hosts[slot], to: on[i]}})
			continue
		}
		l, err := linkTo(ip, u)
		if err != nil {
			return err
		}
		t.paths[slot] = append(t.paths[slot], path{url: via(u, l), link: proxy{l}, proxy: l})
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
		return nil, setupErrorf("a proxy to %s (for the link faults, or from --hosts netns to a server given by URL): it needs a server URL with host:port", Redact(rawURL))
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
// nodes, PostgreSQL and the run's Redis.
func (t *topo) urls(slot int) (nodes []string, postgres, redis string) {
	if t.paths == nil {
		return t.nodeURLs, t.postgres, t.redis
	}
	ps := t.paths[slot]
	for _, p := range ps[:len(t.nodeURLs)] {
		nodes = append(nodes, p.url)
	}
	postgres, redis = ps[len(t.nodeURLs)].url, t.redis
	if t.control != "" {
		redis = ps[len(t.nodeURLs)+1].url
	}
	return nodes, postgres, redis
}

// A proxy is a link fault's hold on a proxy in the path.
type proxy struct{ l *topology.Link }

func (p proxy) Cut(context.Context) error  { p.l.Cut(); return nil }
func (p proxy) Drop(context.Context) error { p.l.Drop(); return nil }
func (p proxy) Slow(_ context.Context, d time.Duration) error {
	p.l.Slow(d)
	return nil
}
func (p proxy) Awaiting() bool { return p.l.Awaiting() }
func (p proxy) SlowReplies(_ context.Context, d time.Duration) error {
	p.l.SlowReplies(d)
	return nil
}
func (p proxy) RepliesHeld() int64 { return p.l.Stats().RepliesHeld }
func (p proxy) Heal(context.Context) error {
	p.l.Slow(0)
	p.l.Heal()
	return nil
}

// A kernelCut is a link fault's hold on the path between two hosts of the
// test network: a rule in from's filter. It can only cut: delays and drops
// take a proxy (this kernel has no netem), and proxied says when to put
// one in.
type kernelCut struct {
	from topology.Host
	to   topology.Host
}

func (k kernelCut) Cut(ctx context.Context) error  { return k.from.Isolate(ctx, k.to) }
func (k kernelCut) Heal(ctx context.Context) error { return k.from.Heal(ctx, k.to) }
func (k kernelCut) Drop(context.Context) error {
	return fmt.Errorf("a drop on %s's path to %s takes a proxy", k.from.Name(), k.to.Name())
}
func (k kernelCut) Slow(context.Context, time.Duration) error {
	return fmt.Errorf("a delay on %s's path to %s takes a proxy", k.from.Name(), k.to.Name())
}

// sentinel is where a worker asks for the lock's primary, and how it
// reaches the nodes they name; none without a replicated Redis.
func (t *topo) sentinel() adapter.Sentinel {
	if t.repl == nil {
		return adapter.Sentinel{}
	}
	return adapter.Sentinel{Addrs: t.repl.SentinelAddrs(), Master: servers.MasterName, NAT: t.repl.Direct()}
}

// endpoints are the lock's own servers that are not Redis (etcd's); none
// for other locks.
func (t *topo) endpoints() []string {
	if t.etcd == nil {
		return nil
	}
	return []string{t.etcd.URL}
}

// nodeLinks returns the links of the worker in slot to the lock's nodes,
// what they are and which: those of nodes, a replay's, unless it is nil;
// else, of several, a minority chosen by r (the worker still takes the lock
// on the others: the cut hides grants and releases from it), or with
// majority a majority (it can take the lock nowhere; a lock it holds
// lapses).
func (t *topo) nodeLinks(majority bool) func(int, []int, *rand.Rand) ([]nemesis.Link, string, []int) {
	return func(slot int, nodes []int, r *rand.Rand) ([]nemesis.Link, string, []int) {
		return t.pickNodeLinks(slot, nodes, r, majority)
	}
}

func (t *topo) pickNodeLinks(slot int, picked []int, r *rand.Rand, majority bool) ([]nemesis.Link, string, []int) {
	ps := t.paths[slot][:len(t.nodeURLs)]
	if len(ps) == 1 {
		name := "redis"
		if t.zk != nil {
			name = "zookeeper"
		}
		return []nemesis.Link{ps[0].link}, name, []int{0}
	}
	if picked == nil {
		n := max(1, (len(ps)-1)/2)
		if majority {
			n = len(ps)/2 + 1
			if t.zk != nil {
				// A ZooKeeper client moves its session to any server
				// it reaches: cut from the ensemble is cut from all.
				n = len(ps)
			}
		}
		picked = r.Perm(len(ps))[:n]
		slices.Sort(picked)
	}
	if slices.ContainsFunc(picked, func(i int) bool { return i >= len(ps) }) {
		return nil, "", nil // a replay of a run with more nodes: no such link
	}
	var out []nemesis.Link
	var names []string
	for _, i := range picked {
		out = append(out, ps[i].link)
		names = append(names, fmt.Sprint(i))
	}
	return out, "nodes " + strings.Join(names, ","), picked
}

// postgresLink returns the link of the worker in slot to PostgreSQL.
func (t *topo) postgresLink(slot int, _ []int, _ *rand.Rand) ([]nemesis.Link, string, []int) {
	return []nemesis.Link{t.paths[slot][len(t.nodeURLs)].link}, "postgres", nil
}

// isolate is the fault that cuts a worker's host off from every other: the
// control machine (the history's clock, the fences, the proxies), every
// server's host and the other workers'. A host that shares the worker's
// address (its node mates over SSH, which checkCuts allows only for
// workers) is cut with it.
func (t *topo) isolate(workers func() []nemesis.Target) nemesis.Fault {
	peers := func(slot int) []topology.Host {
		out := []topology.Host{t.controlHost}
		for _, r := range t.roles {
			if r.h.IP() != t.hosts[slot].IP() {
				out = append(out, r.h)
			}
		}
		return out
	}
	return &nemesis.Isolate{Workers: workers,
		Cut:  func(ctx context.Context, slot int) error { return t.hosts[slot].Isolate(ctx, peers(slot)...) },
		Heal: func(ctx context.Context, slot int) error { return t.hosts[slot].Heal(ctx, peers(slot)...) }}
}

func (t *topo) close() {
	for _, ps := range t.paths {
		for _, p := range ps {
			if p.proxy != nil {
				p.proxy.Close()
			}
		}
	}
	for _, s := range t.nodes {
		s.Stop() // a ZooKeeper ensemble's servers too
	}
	if t.repl != nil {
		t.repl.Close()
	}
	t.etcd.Stop()
}
