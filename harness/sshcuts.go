package harness

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/topology"
)

// spread is the i-th of xs handed out in turn: how the workers are put on
// the worker nodes, and the lock's nodes on the redis nodes.
func spread[T any](xs []T, i int) T { return xs[i%len(xs)] }

// A cutServer is a server of a run over SSH that a worker may be cut
// from: what it is, its node, and the faults that cut it.
type cutServer struct {
	what  string
	node  topology.Node
	cutBy []string
}

// checkCuts refuses an inventory on which a partition of cfg's would not
// cut what its event says. Over SSH a partition is a rule on the worker's
// node against the server's node's IP (unless a delay or a drop puts
// proxies in every path: then each cut is a proxy of the worker's own, to
// one server), and isolate is such rules against every other node and the
// control machine: they cut nodes, not processes. So it refuses
//   - a worker on the node of a server it may be cut from: a node cannot
//     be cut from itself, and the fault would cut nothing;
//   - a server a partition cuts sharing its node's IP with another server
//     of the run (one of the lock's nodes, PostgreSQL, the run's Redis on
//     the control machine): the cut would cut both, so a minority of the
//     lock's nodes could be a majority, and one fault's heal would heal
//     another's cut still under way;
//   - workers sharing a node when two partitions may be under way at once
//     (--nemesis random, or a replayed schedule whose faults overlapped):
//     one's heal would heal the other's cut of their node.
//
// Workers sharing a node when partitions come one at a time are cut
// together: each cut is in force for as long as its event says, and its
// heal heals nothing else.
func checkCuts(cfg runPlan, inv topology.Inventory) error {
	cuts := cfg.cutServers(inv)
	whole := cfg.partitions(needHosts)
	cutting := false
	for _, s := range cuts {
		if len(s.cutBy) == 0 {
			continue
		}
		cutting = true
		faults := strings.Join(s.cutBy, ", ")
		workers := inv.With(topology.RoleWorker)
		for slot := range cfg.Workers {
			if w := spread(workers, slot); w.IP() == s.node.IP() {
				return setupErrorf("--hosts %s: --nemesis %s would cut worker %d, on node %s, from %s, on node %s at the same address: a node cannot be cut from itself; give the workers nodes apart from the servers a partition cuts (docs/hosts.md)",
					cfg.Hosts, faults, slot, w.Name, s.what, s.node.Name)
			}
		}
		partial := slices.DeleteFunc(slices.Clone(s.cutBy), func(f string) bool { return slices.Contains(whole, f) })
		for _, o := range cuts {
			if len(partial) > 0 && o.what != s.what && o.node.IP() == s.node.IP() {
				return setupErrorf("--hosts %s: --nemesis %s cuts a worker from %s, on node %s, and so from %s, on node %s at the same address, without saying so: give each server a partition cuts a node of its own (docs/hosts.md)",
					cfg.Hosts, strings.Join(partial, ", "), s.what, s.node.Name, o.what, o.node.Name)
			}
		}
	}
	if cutting && cfg.cutsOverlap() {
		return sharedWorkers(cfg, inv)
	}
	return nil
}

// cutServers are the servers of a run over SSH on inv that a worker may
// be cut from, each with the partitions of cfg's that cut it in the
// node's firewall; the run's Redis on the control machine, among them,
// only isolate cuts.
func (c runPlan) cutServers(inv topology.Inventory) []cutServer {
	whole := c.partitions(needHosts)
	redisCuts := append(c.partitions(needRedisLinks), whole...)
	pgCuts := append(c.partitions(needPostgresLink), whole...)
	out := []cutServer{{what: "the run's Redis", node: topology.Node{Name: "control", Addr: inv.Control}, cutBy: whole}}
	redis := inv.With(topology.RoleRedis)
	for i := range c.lockNodes() {
		out = append(out, cutServer{fmt.Sprintf("the lock's Redis node %d", i), spread(redis, i), redisCuts})
	}
	zk := inv.With(topology.RoleZooKeeper)
	for i := range c.zkNodes() {
		out = append(out, cutServer{zkServer(i), spread(zk, i), redisCuts})
	}
	if etcd := inv.With(topology.RoleEtcd); c.onEtcd() && len(etcd) > 0 {
		out = append(out, cutServer{etcdServer, etcd[0], whole}) // no partition of the lock's nodes cuts it: a node it shares
	}
	if pg := inv.With(topology.RolePostgres); c.PostgresURL == "" && len(pg) > 0 {
		out = append(out, cutServer{"PostgreSQL", pg[0], pgCuts})
	}
	if c.replicated() { // a failover's cuts are checkReplicated's
		redis, sentinels := inv.With(topology.RoleRedis), inv.With(topology.RoleSentinel)
		for i := range replicatedNodes {
			out = append(out, cutServer{replicatedNode(i), spread(redis, i), whole})
		}
		for i := range replicatedSentinels {
			out = append(out, cutServer{sentinelName(i), spread(sentinels, i), whole})
		}
	}
	return out
}

// partitions are the faults of c that cut a worker's paths of need n in
// its node's firewall: none of the links' when a delay or a drop puts a
// proxy of the worker's own in each path, which they then cut instead;
// isolate (needHosts) always.
func (c runPlan) partitions(n need) []string {
	var out []string
	for _, p := range c.parts {
		k, ok := faultKindOf(p)
		if !ok || k.needs&n == 0 || k.needs&needProxy != 0 || (k.needs&needHosts == 0 && c.proxied()) {
			continue
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// cutsOverlap reports whether two faults of c may be under way at once:
// --nemesis random's may, and a replayed schedule's that did.
func (c runPlan) cutsOverlap() bool {
	if c.Nemesis == Random {
		return true
	}
	for i, p := range c.Plan {
		for _, q := range c.Plan[:i] {
			if q.At+q.Length > p.At {
				return true
			}
		}
	}
	return false
}

// sharedWorkers refuses two workers on one node, for faults that overlap.
func sharedWorkers(cfg runPlan, inv topology.Inventory) error {
	workers := inv.With(topology.RoleWorker)
	for slot := range cfg.Workers {
		for other := range slot {
			if a, b := spread(workers, other), spread(workers, slot); a.IP() == b.IP() {
				return setupErrorf("--hosts %s: workers %d and %d share node %s, and --nemesis %s may cut both at once: one's heal would heal the other's cut; give each worker a node of its own (docs/hosts.md)%s",
					cfg.Hosts, other, slot, b.Name, cfg.Nemesis, randomWhy(cfg))
			}
		}
	}
	return nil
}

// randomWhy says, of a refused --nemesis random, which of its faults cut
// in the nodes' firewalls (isolate always does): naming the faults instead
// leaves them out.
func randomWhy(c runPlan) string {
	if c.Nemesis != Random {
		return ""
	}
	return fmt.Sprintf(", or name the faults without %s, which random draws here", strings.Join(c.partitions(needRedisLinks|needPostgresLink|needHosts), " and "))
}

// nodeCuts are the partitions of c that cut a worker's node from a server
// on a node of inv, in the node's firewall: of the links', none when every
// path goes through a proxy of its worker's own, and none to a server
// given by URL (its path is a proxy's on the control machine); isolate
// always.
func (c runPlan) nodeCuts(inv topology.Inventory) []string {
	var faults []string
	for _, s := range c.cutServers(inv) {
		for _, f := range s.cutBy {
			if !slices.Contains(faults, f) {
				faults = append(faults, f)
			}
		}
	}
	return faults
}

// sharedCuts says, for a run over SSH on inv, which workers share a node
// that cfg's partitions cut (they come one at a time: checkCuts refuses
// the rest): each such cut, whose event names one worker, cuts its node
// mates too. None when no partition cuts a node (nodeCuts).
func sharedCuts(cfg runPlan, inv topology.Inventory) []string {
	faults := cfg.nodeCuts(inv)
	if len(faults) == 0 {
		return nil
	}
	workers := inv.With(topology.RoleWorker)
	var out []string
	for i, n := range workers[:min(len(workers), cfg.Workers)] {
		var slots []string
		for slot := i; slot < cfg.Workers; slot += len(workers) {
			slots = append(slots, strconv.Itoa(slot))
		}
		if len(slots) > 1 {
			out = append(out, fmt.Sprintf("workers %s share node %s: a cut of one by %s cuts them all, though its event names one (docs/hosts.md)",
				strings.Join(slots, " and "), n.Name, strings.Join(faults, ", ")))
		}
	}
	return out
}

// The replicated Redis's servers: a primary and a replica, and sentinels
// (quorum two).
const replicatedNodes, replicatedSentinels = 2, 3

// replicatedNode and sentinelName name the replicated Redis's servers, as
// the run's log and a refused cut say them.
func replicatedNode(i int) string { return fmt.Sprintf("the replicated Redis's node %d", i) }

func sentinelName(i int) string { return fmt.Sprintf("sentinel %d", i) }

// replicated reports whether c's lock is on a replicated Redis, with its
// sentinels: for a failover, or an adapter's lock told the sentinels.
func (c runPlan) replicated() bool { return c.needs&needReplica != 0 }

// checkReplicated refuses an inventory on which a failover would not cut
// what its event says. The primary's node is cut off in its firewall from
// the replica's and the sentinels' (servers.StartReplicatedOnNodes), and
// after a failover the replica is the primary: so the two Redis nodes
// need addresses of their own, apart from the sentinels'; and a worker on
// any of those nodes would be cut from the primary, or be on its side
// while the history said the workers were not cut. Without a failover
// the servers may share nodes, but the primary and the replica need two:
// the replica replicates from an address it would otherwise share.
func checkReplicated(cfg runPlan, inv topology.Inventory) error {
	if !cfg.replicated() {
		return nil
	}
	redis, sentinels := inv.With(topology.RoleRedis), inv.With(topology.RoleSentinel)
	if len(redis) == 0 || len(sentinels) == 0 {
		return nil // checkRoles says so
	}
	primary, replica := spread(redis, 0), spread(redis, 1)
	if primary.IP() == replica.IP() {
		return setupErrorf("--hosts %s: the replicated Redis's primary and replica would both be on node %s: give two nodes at addresses of their own the role redis (docs/hosts.md)",
			cfg.Hosts, primary.Name)
	}
	if !cfg.faultIn(string(nemesis.KindFailover)) {
		return nil
	}
	cut := []cutServer{{what: replicatedNode(0), node: primary}, {what: replicatedNode(1), node: replica}}
	for i := range replicatedSentinels {
		s := spread(sentinels, i)
		cut = append(cut, cutServer{what: sentinelName(i), node: s})
		for _, r := range cut[:2] {
			if s.IP() == r.node.IP() {
				return setupErrorf("--hosts %s: --nemesis failover would cut %s, on node %s, from sentinel %d, on node %s at the same address: a node cannot be cut from itself; give the sentinels nodes apart from the redis nodes (docs/hosts.md)",
					cfg.Hosts, r.what, r.node.Name, i, s.Name)
			}
		}
	}
	// The control machine too: its own rules are not hiatus's to add, and
	// cut from the primary it could not ask the sentinels whom they
	// promoted, nor record the nodes.
	for _, s := range cut {
		if s.node.IP() == inv.Control {
			return setupErrorf("--hosts %s: %s, on node %s, is at the control machine's address %s: --nemesis failover cuts the primary's node off from the replica's and the sentinels' in its firewall, and would cut this machine; give it a node of its own (docs/hosts.md)",
				cfg.Hosts, s.what, s.node.Name, inv.Control)
		}
	}
	workers := inv.With(topology.RoleWorker)
	for slot := range cfg.Workers {
		w := spread(workers, slot)
		for _, s := range cut {
			if w.IP() == s.node.IP() {
				return setupErrorf("--hosts %s: worker %d, on node %s, shares its address with %s: --nemesis failover, which cuts the primary's node from the replica's and the sentinels', would cut the worker too, or leave it on the primary's side, without saying so; give the workers nodes of their own (docs/hosts.md)",
					cfg.Hosts, slot, w.Name, s.what)
			}
		}
	}
	return nil
}
