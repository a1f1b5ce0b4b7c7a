package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/sshtest"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/hiatus-dev/hiatus/topology"
)

// TestRunHostsSSH runs experiments whose workers, lock node and PostgreSQL
// are on machines reached only over SSH (--hosts ssh:FILE), one test
// network for all: each fault acts there as on hosts of this machine, the
// history is checked, the run's log puts each part on its node, and no
// process, rule or file of a run is left on any node, as each node's own
// sshd shows it.
func TestRunHostsSSH(t *testing.T) {
	sn := sshtest.StartT(t, sshtest.Lab)
	hosts := func(c *harness.Config) {
		c.Hosts, c.Workers = harness.Hosts("ssh:"+sn.Inventory), 2
	}
	// The link faults and the clock are checked as on hosts of this
	// machine (runFault); the faults of a worker's process by what they
	// must do to its ops.
	cases := []faultCase{
		{name: "ssh-partition-redis", edit: func(c *harness.Config) {
			hosts(c)
			drawn(c, "partition-redis")
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.cutOff(t, w) })
		}},
		// A worker's node cut off from every other and from this machine
		// (the run's Redis, its clock): its requests wait for the heal,
		// while hiatus still runs it over SSH.
		{name: "ssh-isolate", edit: func(c *harness.Config) {
			hosts(c)
			drawn(c, "isolate")
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.cutOff(t, w) })
		}},
		{name: "ssh-clock", edit: func(c *harness.Config) {
			hosts(c)
			clockRun(c)
		}, effect: clockEffect},
		// The lock's node stopped by its own signal on its machine: no
		// request of the lock's is answered while it is stopped, as on
		// this machine (TestRunNetworkFaults/pause-node).
		{name: "ssh-pause-node", edit: func(c *harness.Config) {
			hosts(c)
			c.Nemesis, c.Pause, c.Interval, c.TimeLimit = "pause-node", 2*faultLease, faultLease, 2500*time.Millisecond
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.nodeHeld(t, w) })
		}},
		// etcd on a node, stopped there, as on a host of this machine
		// (TestRunNetworkFaults/pause-node-etcd): its leases are whole
		// seconds, and its node is stopped as long.
		{name: "ssh-pause-node-etcd", edit: func(c *harness.Config) {
			hosts(c)
			c.Lock, c.Lease, c.Nemesis = "etcd", 2*time.Second, "pause-node"
			c.Pause, c.Interval, c.TimeLimit = time.Second, faultLease, 3*time.Second
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.nodeHeld(t, w) })
		}},
		// A ZooKeeper server on a node, stopped there, as on this
		// machine (TestRunZooKeeperFaults/zk-pause-node): the ensemble's
		// one server, its sessions a second long, stopped two of them.
		{name: "ssh-zk-pause-node", edit: func(c *harness.Config) {
			hosts(c)
			c.Lock, c.Lease, c.Nemesis = "zookeeper", time.Second, "pause-node"
			c.Pause, c.Interval, c.TimeLimit = 2*time.Second, 200*time.Millisecond, 6*time.Second
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.nodeHeld(t, w) })
		}},
		// PostgreSQL's postmaster and backends stopped on its node, each
		// (a backend leads a session of its own): no read or write sent
		// while they were stopped is answered :ok before they go on (a
		// client's timeout may end it).
		{name: "ssh-pause-postgres", edit: func(c *harness.Config) {
			hosts(c)
			c.Nemesis, c.Pause, c.Interval, c.TimeLimit = "pause-postgres", 2*faultLease, faultLease, 2500*time.Millisecond
		}, effect: func(t *testing.T, r faultRun) {
			ok := func(o history.Op) bool { return o.Type == history.Ok }
			r.eachWhole(t, r.kind(), func(w window) { r.serverHeld(t, w, "PostgreSQL", ok, history.FRead, history.FWrite) })
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A partition is a rule between nodes, which would cut the
			// workers of every run on them: it runs alone, before the
			// others are let go (they wait for this function's end).
			if !strings.HasPrefix(tc.name, "ssh-partition") && tc.name != "ssh-isolate" {
				t.Parallel()
			}
			r := runFault(t, tc, harness.Config{}, int64(100+i))
			tc.effect(t, r)
			onNodes(t, r.res)
		})
	}
	t.Run("ssh-sigstop", func(t *testing.T) {
		t.Parallel()
		cfg := sshConfig(t, sn, "ssh-sigstop", 110)
		drawn(&cfg, "sigstop")
		res, ops := runSSH(t, cfg)
		// A stopped worker completes nothing in the span it was surely
		// stopped — from its resume's stamp less the stop's length to its
		// stop's stamp plus it — less a quarter of the length each side
		// for the stamps of a loaded machine, as TestRunNetworkFaults
		// checks a stopped node (nodeHeld).
		ws := processWindows(t, ops, "sigstop", history.FPause, history.FResume)
		checked := 0
		for _, w := range ws {
			if w.end-w.start < w.length {
				continue // cut short by the run's end
			}
			checked++
			from, to, margin := w.end-w.length, w.start+w.length, w.length/4
			for _, o := range ops {
				if o.Process == w.proc && o.Type != history.Invoke && o.Time > from+margin && o.Time < to-margin {
					t.Errorf("process %d was stopped from %d to %d ns, yet completed op %d at %d", w.proc, w.start, w.end, o.Index, o.Time)
				}
			}
		}
		if checked == 0 {
			t.Errorf("no sigstop of the %d lasted its length", len(ws))
		}
		onNodes(t, res)
	})
	t.Run("ssh-kill-worker", func(t *testing.T) {
		t.Parallel()
		cfg := sshConfig(t, sn, "ssh-kill-worker", 111)
		drawn(&cfg, "kill-worker")
		res, ops := runSSH(t, cfg)
		// A killed worker records nothing after its kill; a new process,
		// on the killed worker's node, takes its place (it may be killed
		// in turn before it records anything, on a loaded machine).
		kills := processWindows(t, ops, "kill-worker", history.FKill, history.FRestart)
		for _, w := range kills {
			for _, o := range ops {
				if o.Process == w.proc && o.Time > w.start+int64(cfg.Lease) {
					t.Errorf("process %d was killed at %d ns, yet recorded op %d at %d", w.proc, w.start, o.Index, o.Time)
				}
			}
		}
		log, err := os.ReadFile(filepath.Join(res.Dir, store.Log))
		if err != nil {
			t.Fatal(err)
		}
		// Worker i is on node wi: two workers, two nodes.
		replaced := regexp.MustCompile(`worker ([01]): started as process ([0-9]+), pid [0-9]+ on w([01])\n`)
		n := 0
		for _, m := range replaced.FindAllSubmatch(log, -1) {
			p, _ := strconv.Atoi(string(m[2]))
			switch {
			case string(m[1]) != string(m[3]):
				t.Errorf("worker %s started on node w%s, not its own", m[1], m[3])
			case p >= cfg.Workers:
				n++
			}
		}
		if n == 0 {
			t.Errorf("%d kills, and no worker started in a killed one's place", len(kills))
		}
		onNodes(t, res)
	})
	// The lock kept on the run's Redis, on this machine, stopped and
	// killed there as on one machine (cmd/hiatus's TestNemeses): the
	// workers on nodes wait for it, and write after its restart. The
	// lock server's record may lose sight of it meanwhile.
	for i, tc := range []struct {
		kind   harness.Nemesis
		effect func(*testing.T, []history.Op)
	}{
		{"pause-redis", func(t *testing.T, ops []history.Op) {
			if n := count(ops, func(o history.Op) bool { return o.IsClient() && (o.Type == history.Info || o.Type == history.Fail) }); n == 0 {
				t.Errorf("no client op failed or timed out while the run's Redis was paused")
			}
		}},
		{"kill-redis", func(t *testing.T, ops []history.Op) {
			at := int64(-1)
			for _, o := range ops {
				if o.Process == history.Nemesis && o.F == history.FRestart && at < 0 {
					at = o.Time
				}
			}
			if at < 0 || count(ops, func(o history.Op) bool {
				return o.IsClient() && o.Type == history.Ok && o.F == history.FWrite && o.Time > at
			}) == 0 {
				t.Errorf("no write succeeded after the run's Redis was restarted (at %d ns)", at)
			}
		}},
	} {
		t.Run("ssh-"+string(tc.kind), func(t *testing.T) {
			t.Parallel()
			cfg := sshConfig(t, sn, "ssh-"+string(tc.kind), int64(112+i))
			drawn(&cfg, tc.kind)
			cfg.OpTimeout = faultLease / 2
			if tc.kind == "pause-redis" {
				// Up as long as it is paused: with 100 ms between 600 ms
				// pauses, a loaded suite's run had every acquire time out,
				// and the history, no write in it, did not check.
				cfg.Interval = cfg.Pause
			}
			res, err := harness.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Results.Valid == checker.Unknown && !recordBlind(res.Results) {
				t.Errorf("the history does not check: %s", res.Results.AppendEDN(nil))
			}
			ops := readOps(t, res.Dir)
			if count(ops, func(o history.Op) bool {
				v, _ := o.Value.(map[history.Keyword]any)
				return o.Process == history.Nemesis && v["kind"] == history.Keyword(tc.kind)
			}) == 0 {
				t.Fatalf("no %s in the history", tc.kind)
			}
			tc.effect(t, ops)
		})
	}
	// The verdicts of the default experiment (setnx under sigstop), as
	// on this machine: updates lost in most runs (not asserted: a run may
	// see none), and none with a lease of 2 s, longer than every pause.
	for i, tc := range []struct {
		name  string
		lease time.Duration
	}{{"ssh-default", harness.DefaultLease}, {"ssh-lease-2s", 2 * time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := sshConfig(t, sn, tc.name, int64(120+i))
			cfg.Lease, cfg.Work, cfg.TimeLimit = tc.lease, harness.DefaultWork, 4*time.Second
			res, _ := runSSH(t, cfg)
			t.Logf("valid? %v", res.Results.Valid)
			if tc.lease <= cfg.Pause {
				return
			}
			// No update lost: the counter's checks. The lock server's
			// record of the node is logged, not held to it: twice (a loaded
			// suite on 0e3a5db, a quiet one on 158aac0) it stamped a stretch
			// of releases' DELs 46 and 82 ms after their ok, with no
			// :uncertainty to say so — an open lead of issue 37, a wrong
			// :lock-server verdict, not a lost update.
			for _, name := range []string{"lock-counter", "linear"} {
				if r, ok := res.Results.Check(name); !ok || r.Valid != checker.Valid {
					t.Errorf("%s: valid? %v, want true: %s", name, r.Valid, res.Results.AppendEDN(nil))
				}
			}
			if r, ok := res.Results.Check("lock-server"); ok && r.Valid != checker.Valid {
				t.Logf("lock-server: valid? %v: %s", r.Valid, r.Explanation)
			}
		})
	}
	t.Cleanup(func() { sshLeftovers(t, sn) }) // after the parallel subtests, before the network goes
}

// TestRunReplicatedSSH fails over a replicated Redis on nodes: its primary
// and replica on nodes of their own, three sentinels on a third, which
// also holds PostgreSQL, the workers on a fourth. The primary's node is cut
// off from the others in its firewall; the sentinels promote the replica,
// and the workers, which ask them for the primary, take the lock there
// after the heal: with hiatus's own client (a lock built on the
// sentinels), and with an adapter told the sentinels (--adapter-store
// sentinel). The run's log puts each server on its node, and nothing is
// left on any node.
func TestRunReplicatedSSH(t *testing.T) {
	sn := sshtest.StartT(t, []sshtest.Node{{Name: "w0", Roles: "worker"}, {Name: "r0", Roles: "redis"},
		{Name: "r1", Roles: "redis"}, {Name: "s0", Roles: "sentinel,postgres"}})
	t.Cleanup(func() { sshLeftovers(t, sn) })
	// One failover, as on hosts of this machine (TestRunServersOnHosts's
	// netns-failover, TestRecordReconciles's sentinel-failover): the
	// runs take turns, for a cut is a rule between nodes.
	failover := func(c *harness.Config) {
		c.Hosts, c.Workers = harness.Hosts("ssh:"+sn.Inventory), 2
		c.Nemesis, c.Lease, c.TimeLimit = "failover", 4*time.Second, 9*time.Second
		c.Pause = 5 * time.Second
		c.Plan = nemesis.Plan{{Kind: nemesis.KindFailover, At: 500 * time.Millisecond, Length: c.Pause}}
	}
	for i, tc := range []faultCase{
		{name: "ssh-failover", edit: failover},
		{name: "ssh-adapter-sentinel-failover", edit: func(c *harness.Config) {
			failover(c)
			c.Lock, c.AdapterStore = "exec:node "+adapterPath(t, "node/redlock.js"), harness.AdapterOnSentinel
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runFault(t, tc, harness.Config{}, int64(130+i))
			// faultWindows has failed the test if it promoted no one.
			w := r.windows[0]
			if n := count(r.ops, func(o history.Op) bool {
				return o.F == history.FAcquire && o.Type == history.Ok && o.Time > w.end.Time
			}); n == 0 {
				t.Errorf("no lock granted after the failover (from %d ns)", w.end.Time)
			}
			log, err := os.ReadFile(filepath.Join(r.res.Dir, store.Log))
			if err != nil {
				t.Fatal(err)
			}
			for _, on := range []string{"r0 at [0-9.]+: the replicated Redis's node 0", "r1 at [0-9.]+: the replicated Redis's node 1",
				"s0 at [0-9.]+: sentinel 2", "s0 at [0-9.]+: PostgreSQL", "w0 at [0-9.]+: worker 1"} {
				if !regexp.MustCompile(`host ` + on + `\n`).Match(log) {
					t.Errorf("the run's log does not say %q:\n%s", on, log)
				}
			}
		})
	}
}

// sshConfig is a short run on sn's nodes, two workers, named name.
func sshConfig(t *testing.T, sn *sshtest.Net, name string, counter int64) harness.Config {
	cfg := harness.DefaultConfig()
	cfg.Store, cfg.Name, cfg.CounterID, cfg.Seed = t.TempDir(), name, counter, 1
	cfg.Hosts, cfg.Workers = harness.Hosts("ssh:"+sn.Inventory), 2
	cfg.Lease, cfg.TimeLimit, cfg.Work = faultLease, 2*time.Second, 50*time.Millisecond
	return cfg
}

// runSSH runs cfg and returns its result and history, which must check.
func runSSH(t *testing.T, cfg harness.Config) (harness.Result, []history.Op) {
	t.Helper()
	res, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(res.Dir, store.Log))
			t.Logf("the run's log:\n%s", log)
		}
	})
	if res.Results.Valid == checker.Unknown {
		t.Errorf("the history does not check: %s", res.Results.AppendEDN(nil))
	}
	ops := readOps(t, res.Dir)
	return res, ops
}

// A processWindow is a fault of one worker process, from its begin to its
// end (the run's last op for one that did not end), and how long it was to
// last, all in ns of the history's clock.
type processWindow struct {
	proc               history.Process
	start, end, length int64
}

// processWindows are the faults of kind in ops, begun by begin and ended
// by end, which must have failed none; it fails t when there is none.
func processWindows(t *testing.T, ops []history.Op, kind history.Keyword, begin, end history.Keyword) []processWindow {
	t.Helper()
	var out []processWindow
	open := map[int64]int{}
	for _, o := range ops {
		v, _ := o.Value.(map[history.Keyword]any)
		if o.Process != history.Nemesis || v["kind"] != kind {
			continue
		}
		if e, failed := v["error"]; failed && !cutByRunEnd(e) {
			t.Errorf("%s failed: %v", kind, v)
			continue
		}
		p, _ := history.Int(v["process"])
		switch o.F {
		case begin:
			ms, _ := history.Int(v["ms"])
			open[p] = len(out)
			out = append(out, processWindow{proc: history.Process(p), start: o.Time, end: ops[len(ops)-1].Time, length: ms * int64(time.Millisecond)})
		case end:
			if i, ok := open[p]; ok {
				out[i].end = o.Time
				delete(open, p)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s fault in the history", kind)
	}
	return out
}

// onNodes fails t unless the run's log puts each part on its node.
func onNodes(t *testing.T, res harness.Result) {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(res.Dir, store.Log))
	if err != nil {
		t.Fatal(err)
	}
	lock := `n0 at 10\.74\.[0-9.]+: the lock's Redis node 0`
	switch res.Config.Lock {
	case "etcd":
		lock = `n0 at 10\.74\.[0-9.]+: etcd`
	case "zookeeper":
		lock = `n0 at 10\.74\.[0-9.]+: ZooKeeper server 0`
	}
	for _, on := range []string{`w0 at 10\.74\.[0-9.]+: worker 0`, `w1 at 10\.74\.[0-9.]+: worker 1`,
		lock, `pg at 10\.74\.[0-9.]+: PostgreSQL`} {
		if !regexp.MustCompile(`host ` + on + `\n`).Match(log) {
			t.Errorf("the run's log does not say %q:\n%s", on, log)
		}
	}
	// A node's PID is not one of this machine's: none is given for it.
	if !regexp.MustCompile(`postgres: throwaway, on its node, at `).Match(log) {
		t.Errorf("the run's log does not put PostgreSQL on its node, with no PID of this machine's:\n%s", log)
	}
}

// sshLeftovers fails t if any node of sn holds a run's directory, a
// process working in one, or a rule of hiatus's, as the node's own sshd
// shows it.
func sshLeftovers(t *testing.T, sn *sshtest.Net) {
	t.Helper()
	for _, h := range sn.Hosts {
		// This process's runs' alone: the nodes are namespaces of this
		// machine, whose /tmp and processes another package's tests,
		// running beside these (cmd/hiatus's runs over SSH), share.
		l, err := sn.Leftovers(context.Background(), h.Name(), fmt.Sprintf("hs%d-", os.Getpid()))
		if err != nil {
			t.Errorf("node %s: %v", h.Name(), err)
		} else if len(l) > 0 {
			t.Errorf("node %s holds what a run left: %v", h.Name(), l)
		}
	}
}

// TestRunRefusesUnsoundCuts: a run over SSH whose partition could not cut
// what its event says (here the worker's node holds the lock's Redis) is
// a SetupError naming the nodes and the fault, before any node is dialled
// (the inventory's key and nodes do not exist); nothing is written.
func TestRunRefusesUnsoundCuts(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "lab.hosts")
	if err := os.WriteFile(inv, []byte("control 192.0.2.1\nkey no-key\nknown-hosts no-known-hosts\n"+
		"node w0 192.0.2.11 worker,redis\nnode w1 192.0.2.12 worker\nnode pg 192.0.2.31 postgres\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := harness.DefaultConfig()
	cfg.Store, cfg.Hosts, cfg.Workers, cfg.Nemesis = t.TempDir(), harness.Hosts("ssh:"+inv), 2, "partition-redis"
	_, err := harness.Run(context.Background(), cfg)
	var se *harness.SetupError
	if !errors.As(err, &se) {
		t.Fatalf("error %v, want a SetupError", err)
	}
	for _, w := range []string{"partition-redis", "worker 0", "node w0", "the lock's Redis node 0"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
	if left, _ := os.ReadDir(cfg.Store); len(left) != 0 {
		t.Errorf("a refused run wrote %d entries into the store", len(left))
	}
}

// TestRunSSHNodeRefused: a node that refuses hiatus's key stops the run
// before it starts, a SetupError naming that node, the user and the key,
// and not the other nodes, whose set-up it cut short: nothing of the run
// is left on any of them.
func TestRunSSHNodeRefused(t *testing.T) {
	sn := sshtest.StartT(t, sshtest.Lab)
	dir := t.TempDir()
	key, inv := filepath.Join(dir, "other_id"), filepath.Join(dir, "inventory")
	b, err := os.ReadFile(sn.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	// w1's line logs in with a key the node does not know.
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "node w1 ") {
			lines[i] = l + " key=" + key
		}
	}
	sshtest.NewKeyT(t, key)
	if err := os.WriteFile(inv, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := sshConfig(t, sn, "ssh-refused", 130)
	cfg.Hosts = harness.Hosts("ssh:" + inv)
	_, err = harness.Run(context.Background(), cfg)
	var se *harness.SetupError
	if !errors.As(err, &se) {
		t.Fatalf("error %v, want a SetupError", err)
	}
	for _, w := range []string{"node w1", "refused user root with key " + key} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	for _, n := range []string{"node w0", "node n0", "node pg", "context canceled"} {
		if strings.Contains(err.Error(), n) {
			t.Errorf("error %q speaks of %q, whose set-up w1's refusal cut short", err, n)
		}
	}
	sshLeftovers(t, sn)
}

// TestRunSSHSharedNodeNotice: a run over SSH whose workers outnumber the
// worker nodes, with a partition that comes one at a time, is let through
// and says, on the terminal and in its log, which workers a cut of one
// cuts too (here no fault comes: the notice is the set-up's), as it says
// each step of its set-up.
func TestRunSSHSharedNodeNotice(t *testing.T) {
	// Not parallel: sshLeftovers would take another test's run on the
	// same node names, under way, for one this test left.
	sn := sshtest.StartT(t, sshtest.Lab)
	cfg := sshConfig(t, sn, "ssh-shared", 140)
	cfg.Workers, cfg.Nemesis, cfg.TimeLimit = 3, "partition-postgres", time.Second
	cfg.Interval = 2 * cfg.TimeLimit // the notice is the set-up's: no cut comes
	var out strings.Builder
	res, err := harness.RunWatched(context.Background(), cfg, harness.Watch{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(res.Dir, store.Log))
	if err != nil {
		t.Fatal(err)
	}
	// docs/hosts.md shows these lines: go test -run this -v | grep set-up.
	t.Logf("the run's terminal:\n%s", out.String())
	for _, want := range []string{
		"workers 0 and 2 share node w0: a cut of one by partition-postgres cuts them all",
		// The set-up's steps, each as it ended.
		"node w0 (" + nodeAddr(t, sn, "w0") + "): connected", "node pg (" + nodeAddr(t, sn, "pg") + "): connected",
		"every node has what the run needs of it", "hiatus copied to node w1", "PostgreSQL started on node pg",
	} {
		if !strings.Contains(out.String(), want) || !strings.Contains(string(log), want) {
			t.Errorf("the run did not say %q on the terminal and in its log:\n%s\n%s", want, out.String(), log)
		}
	}
	sshLeftovers(t, sn)
}

// TestRunSSHPreflight: before anything of a run starts, every node is
// asked for what its roles need, and each thing missing is an error of
// its own, naming the node and what to do: here the lock's Redis node
// lacks redis-server and PostgreSQL's node setpriv (hiatus logs in as
// root there and runs PostgreSQL as postgres), and the lock's node etcd
// when the lock is kept there. Nothing is left on any node.
func TestRunSSHPreflight(t *testing.T) {
	// Not parallel: sshLeftovers would take another test's run on the
	// same node names, under way, for one this test left.
	nodes := slices.Clone(sshtest.Lab)
	for i, n := range nodes {
		switch n.Name {
		case "n0":
			nodes[i].Hide = []string{"redis-server", "etcd"}
		case "pg":
			nodes[i].Hide = []string{"setpriv"}
		}
	}
	sn := sshtest.StartT(t, nodes)
	cfg := sshConfig(t, sn, "ssh-preflight", 150)
	cfg.Lock, cfg.Nodes, cfg.Nemesis = "redlock", 1, "partition-redis"
	_, err := harness.Run(context.Background(), cfg)
	var se *harness.SetupError
	if !errors.As(err, &se) {
		t.Fatalf("error %v, want a SetupError", err)
	}
	for _, w := range []string{
		"node n0 lacks redis-server (on Debian: apt-get install redis-server)",
		"node pg lacks the user postgres and setpriv",
	} {
		if strings.Count(err.Error(), w) != 1 {
			t.Errorf("error %q does not say once %q", err, w)
		}
	}
	for _, n := range []string{"node w0", "node w1"} {
		if strings.Contains(err.Error(), n) {
			t.Errorf("error %q speaks of %q, which lacks nothing", err, n)
		}
	}
	if left, _ := os.ReadDir(cfg.Store); len(left) != 0 {
		t.Errorf("a run refused before it started wrote %d entries into the store", len(left))
	}
	// A lock on etcd needs etcd of n0 (its role), and no redis-server.
	cfg.Lock, cfg.Nodes, cfg.Nemesis, cfg.Lease = "etcd", 0, "pause-node", 2*time.Second
	_, err = harness.Run(context.Background(), cfg)
	if want := "node n0 lacks etcd (on Debian: apt-get install etcd-server)"; err == nil || strings.Count(err.Error(), want) != 1 ||
		strings.Contains(err.Error(), "redis-server") {
		t.Errorf("--lock etcd: error %v, want one %q and no redis-server", err, want)
	}
	sshLeftovers(t, sn)
}

// nodeAddr is the address the network's inventory gives node name.
func nodeAddr(t *testing.T, sn *sshtest.Net, name string) string {
	t.Helper()
	inv, err := topology.ReadInventory(sn.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range inv.Nodes {
		if n.Name == name {
			return n.IP()
		}
	}
	t.Fatalf("the inventory has no node %s", name)
	return ""
}
