package harness

import (
	"errors"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/topology"
)

// TestCheckCuts: a partition over SSH whose rule would cut nothing (a
// worker on the node of the server it is cut from), more than its event
// says (two servers on one node), or whose heal could heal another's cut
// (workers sharing a node under faults at once) is refused, naming the
// nodes and the fault; what is sound is let through, and when workers
// share a node a partition cuts, the run is to say so (sharedCuts).
func TestCheckCuts(t *testing.T) {
	type node = labNode
	apart := []node{{"w0", "10.0.0.11", "worker"}, {"w1", "10.0.0.12", "worker"}, {"n0", "10.0.0.21", "redis"}, {"pg", "10.0.0.31", "postgres"}}
	workerOnRedis := []node{{"w0", "10.0.0.11", "worker,redis"}, {"w1", "10.0.0.12", "worker"}, {"pg", "10.0.0.31", "postgres"}}
	twoRedis := []node{{"w0", "10.0.0.11", "worker"}, {"w1", "10.0.0.12", "worker"}, {"n0", "10.0.0.21", "redis"}, {"n1", "10.0.0.22", "redis"}, {"pg", "10.0.0.31", "postgres"}}
	redisWithPG := []node{{"w0", "10.0.0.11", "worker"}, {"w1", "10.0.0.12", "worker"}, {"db", "10.0.0.21", "redis,postgres"}}
	oneWorker := []node{{"w0", "10.0.0.11", "worker"}, {"n0", "10.0.0.21", "redis"}, {"pg", "10.0.0.31", "postgres"}}
	redisOnControl := []node{{"w0", "10.0.0.11", "worker"}, {"w1", "10.0.0.12", "worker"}, {"n0", "10.0.0.1", "redis"}, {"pg", "10.0.0.31", "postgres"}}
	twoZK := []node{{"w0", "10.0.0.11", "worker"}, {"w1", "10.0.0.12", "worker"}, {"z0", "10.0.0.21", "zookeeper"}, {"z1", "10.0.0.22", "zookeeper"}, {"pg", "10.0.0.31", "postgres"}}
	etcdWithPG := []node{{"w0", "10.0.0.11", "worker"}, {"w1", "10.0.0.12", "worker"}, {"db", "10.0.0.21", "etcd,postgres"}}
	samePort := []node{{"w0", "10.0.0.11", "worker"}, {"w1", "10.0.0.12", "worker"}, {"n0", "10.0.0.11:2222", "redis"}, {"pg", "10.0.0.31", "postgres"}}
	// What the notice of workers a cut cuts together names, by case; none
	// for the cases not here.
	sharedWords := map[string][]string{
		"workers share a node, one cut at a time":       {"workers 0 and 1 share node w0", "by partition-redis, partition-postgres"},
		"three workers on two nodes, one cut at a time": {"workers 0 and 2 share node w0", "by partition-postgres"},
		"isolate, workers share a node":                 {"workers 0 and 1 share node w0", "by isolate"},
	}
	overlapping := nemesis.Plan{{Kind: nemesis.KindPartitionRedis, At: 0, Length: 2e9}, {Kind: nemesis.KindPartitionRedis, At: 1e9, Length: 2e9}}
	for _, tc := range []struct {
		name    string
		nodes   []node
		edit    func(*Config)
		refused []string // what the refusal names; nil: let through
	}{
		{"apart", apart, func(c *Config) { c.Nemesis = "partition-redis,partition-postgres" }, nil},
		{"worker on the redis node", workerOnRedis, func(c *Config) { c.Nemesis = "partition-redis" },
			[]string{"partition-redis", "worker 0", "node w0", "the lock's Redis node 0"}},
		{"worker on the redis node, majority", workerOnRedis, func(c *Config) { c.Nemesis = "partition-redis-majority" },
			[]string{"partition-redis-majority", "worker 0"}},
		{"worker on the redis node, no partition", workerOnRedis, func(c *Config) { c.Nemesis = "sigstop,kill-worker" }, nil},
		{"worker on the redis node, through proxies", workerOnRedis, func(c *Config) { c.Nemesis = "partition-redis,delay-redis" }, nil},
		{"worker on the redis node, postgres cut", workerOnRedis, func(c *Config) { c.Nemesis = "partition-postgres" }, nil},
		{"three lock nodes on two", twoRedis, func(c *Config) { c.Lock, c.Nodes, c.Nemesis = "redlock", 3, "partition-redis" },
			[]string{"partition-redis", "the lock's Redis node 0", "node n0", "the lock's Redis node 2"}},
		{"two lock nodes on two", twoRedis, func(c *Config) { c.Lock, c.Nodes, c.Nemesis = "redlock", 2, "partition-redis-majority" }, nil},
		{"three lock nodes on two, no partition", twoRedis, func(c *Config) { c.Lock, c.Nodes, c.Nemesis = "redlock", 3, "restart" }, nil},
		{"redis and postgres on one node, postgres cut", redisWithPG, func(c *Config) { c.Nemesis = "partition-postgres" },
			[]string{"partition-postgres", "PostgreSQL", "node db", "the lock's Redis node 0"}},
		{"redis and postgres on one node, redis cut", redisWithPG, func(c *Config) { c.Nemesis = "partition-redis" },
			[]string{"partition-redis", "the lock's Redis node 0", "PostgreSQL"}},
		{"redis and postgres on one node, postgres by URL", redisWithPG, func(c *Config) {
			c.Nemesis, c.PostgresURL = "partition-redis", "postgres://postgres@10.0.0.99/postgres"
		}, nil},
		{"redis on the control machine", redisOnControl, func(c *Config) { c.Nemesis = "partition-redis" },
			[]string{"the lock's Redis node 0", "the run's Redis"}},
		{"redis at a worker's address, another port", samePort, func(c *Config) { c.Nemesis = "partition-redis" },
			[]string{"worker 0", "node w0", "node n0"}},
		{"workers share a node, one cut at a time", oneWorker, func(c *Config) { c.Nemesis = "partition-redis,partition-postgres" }, nil},
		{"three workers on two nodes, one cut at a time", apart, func(c *Config) { c.Workers, c.Nemesis = 3, "partition-postgres" }, nil},
		{"workers share a node, no partition", oneWorker, func(c *Config) { c.Nemesis = "sigstop,kill-worker" }, nil},
		// random's delays and drops put proxies in every path, and its
		// isolate cuts a worker's node while other faults may be under way.
		{"workers share a node, random", oneWorker, func(c *Config) { c.Nemesis = Random },
			[]string{"workers 0 and 1", "node w0", "random", "without isolate"}},
		{"workers share a node, a replay that overlapped", oneWorker, func(c *Config) { c.Nemesis, c.Plan = "partition-redis", overlapping },
			[]string{"workers 0 and 1", "node w0"}},
		{"workers apart, random", apart, func(c *Config) { c.Nemesis = Random }, nil},
		{"isolate, apart", apart, func(c *Config) { c.Nemesis = "isolate" }, nil},
		{"isolate, worker on the redis node", workerOnRedis, func(c *Config) { c.Nemesis = "isolate" },
			[]string{"isolate", "worker 0", "node w0", "the lock's Redis node 0"}},
		{"isolate, worker on the redis node, through proxies", workerOnRedis, func(c *Config) { c.Nemesis = "isolate,delay-redis" },
			[]string{"isolate", "worker 0", "the lock's Redis node 0"}},
		{"isolate, redis and postgres on one node", redisWithPG, func(c *Config) { c.Nemesis = "isolate" }, nil},
		{"isolate, workers share a node", oneWorker, func(c *Config) { c.Nemesis = "isolate" }, nil},
		{"isolate, a worker on a sentinel's node", []node{{"w0", "10.0.0.11", "worker"}, {"w1", "10.0.0.12", "worker,sentinel"}, {"r0", "10.0.0.21", "redis"}, {"r1", "10.0.0.22", "redis"}, {"pg", "10.0.0.31", "postgres"}},
			func(c *Config) { c.Lock, c.AdapterStore, c.Nemesis = "exec:true", AdapterOnSentinel, "isolate" }, []string{"isolate", "worker 1", "sentinel 0"}},
		{"isolate, etcd on a worker's node", []node{{"w0", "10.0.0.11", "worker,etcd"}, {"w1", "10.0.0.12", "worker"}, {"pg", "10.0.0.31", "postgres"}},
			func(c *Config) { c.Lock, c.Lease, c.Nemesis = "etcd", 2e9, "isolate" }, []string{"isolate", "worker 0", "etcd"}},
		{"three ZooKeeper servers on two", twoZK, func(c *Config) { c.Lock, c.Nodes, c.Nemesis = "zookeeper", 3, "partition-redis" },
			[]string{"partition-redis", "ZooKeeper server 0", "node z0", "ZooKeeper server 2"}},
		{"two ZooKeeper servers on two", twoZK, func(c *Config) { c.Lock, c.Nodes, c.Nemesis = "zookeeper", 2, "partition-redis" }, nil},
		{"etcd and postgres on one node, postgres cut", etcdWithPG, func(c *Config) { c.Lock, c.Lease, c.Nemesis = "etcd", 2e9, "partition-postgres" },
			[]string{"partition-postgres", "PostgreSQL", "node db", "etcd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := sharedWords[tc.name]
			inv, plan := inventoryOf(tc.nodes), planFor(t, tc.edit)
			if refusedAs(t, checkCuts(plan, inv), tc.refused) {
				return
			}
			notes := sharedCuts(plan, inv)
			if len(notes) != min(len(shared), 1) {
				t.Fatalf("notices %q, want one naming %q", notes, shared)
			}
			for _, w := range shared {
				if !strings.Contains(notes[0], w) {
					t.Errorf("notice %q does not name %q", notes[0], w)
				}
			}
		})
	}
}

// TestCheckReplicated: a replicated Redis over SSH whose failover could
// not cut what its event says (a node cut from itself, a worker cut with
// the primary's peers) is refused, naming the nodes; its primary and
// replica need nodes apart even without a failover; a sound layout, and
// servers sharing nodes when no failover cuts them, are let through.
func TestCheckReplicated(t *testing.T) {
	failover := func(c *Config) { c.Nemesis, c.Pause = "failover", 3e9 }
	sentinel := func(c *Config) { c.Lock, c.AdapterStore = "exec:true", AdapterOnSentinel }
	for _, tc := range []struct {
		name    string
		nodes   string // name:ip:roles, space-separated
		edit    func(*Config)
		refused []string // what the refusal names; nil: let through
	}{
		{"apart", "w0:11:worker r0:21:redis r1:22:redis s0:31:sentinel,postgres", failover, nil},
		{"one redis node", "w0:11:worker r0:21:redis s0:31:sentinel,postgres", failover, []string{"primary and replica", "node r0"}},
		{"one redis node, no failover", "w0:11:worker r0:21:redis s0:31:sentinel,postgres", sentinel, []string{"primary and replica", "node r0"}},
		{"two redis nodes at one address", "w0:11:worker r0:21:redis r1:21:redis s0:31:sentinel", failover, []string{"node r0"}},
		{"a sentinel on the replica's node", "w0:11:worker r0:21:redis r1:22:redis,sentinel s0:31:sentinel", failover,
			[]string{"the replicated Redis's node 1", "node r1", "sentinel 0"}},
		{"a sentinel on the replica's node, no failover", "w0:11:worker r0:21:redis r1:22:redis,sentinel", sentinel, nil},
		{"a worker on a sentinel's node", "w0:11:worker w1:31:worker r0:21:redis r1:22:redis s0:31:sentinel", failover,
			[]string{"worker 1", "node w1", "sentinel 0"}},
		{"a worker on the primary's node", "w0:21:worker,redis r1:22:redis s0:31:sentinel", failover,
			[]string{"worker 0", "the replicated Redis's node 0"}},
		{"a sentinel at the control machine's address", "w0:11:worker r0:21:redis r1:22:redis s0:1:sentinel", failover,
			[]string{"sentinel 0", "node s0", "control machine"}},
		{"a sentinel at the control machine's address, no failover", "w0:11:worker r0:21:redis r1:22:redis s0:1:sentinel", sentinel, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedAs(t, checkReplicated(planFor(t, tc.edit), inventoryOf(labNodes(tc.nodes))), tc.refused)
		})
	}
}

// A labNode is a node of a test's inventory: its name, address and roles
// (comma-separated).
type labNode struct{ name, ip, roles string }

// labNodes reads nodes written name:host:roles, space-separated, each at
// 10.0.0.host.
func labNodes(spec string) []labNode {
	var out []labNode
	for _, n := range strings.Fields(spec) {
		f := strings.Split(n, ":")
		out = append(out, labNode{f[0], "10.0.0." + f[1], f[2]})
	}
	return out
}

// inventoryOf is an inventory of nodes, the control machine at 10.0.0.1.
func inventoryOf(nodes []labNode) topology.Inventory {
	inv := topology.Inventory{Control: "10.0.0.1"}
	for _, n := range nodes {
		var roles []topology.Role
		for _, r := range strings.Split(n.roles, ",") {
			roles = append(roles, topology.Role(r))
		}
		inv.Nodes = append(inv.Nodes, topology.Node{Name: n.name, Addr: n.ip, Roles: roles})
	}
	return inv
}

// planFor is a run over SSH of two workers, as edit makes it, which
// validation must pass.
func planFor(t *testing.T, edit func(*Config)) runPlan {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Hosts, cfg.Workers = "ssh:lab.hosts", 2
	edit(&cfg)
	if err := cfg.validate(); err != nil {
		t.Fatalf("the configuration itself is refused: %v", err)
	}
	return cfg.runPlan()
}

// refusedAs checks err, a check's of an inventory, against refused: nil
// lets the run through; else a SetupError that names each of refused. It
// reports whether the run was to be refused.
func refusedAs(t *testing.T, err error, refused []string) bool {
	t.Helper()
	var se *SetupError
	switch {
	case refused == nil && err != nil:
		t.Errorf("refused: %v", err)
	case refused != nil && !errors.As(err, &se):
		t.Errorf("error %v, want a SetupError naming %q", err, refused)
	case refused != nil:
		for _, w := range refused {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not name %q", err, w)
			}
		}
	}
	return refused != nil
}
