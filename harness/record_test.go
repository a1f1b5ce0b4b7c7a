package harness_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/sshtest"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
)

// reconcile checks a run's lock server's record against its history: every
// ok acquire has a :grant of its token, by its worker's connection, at a
// time inside the acquire's window, on at least quorum of the nodes; every
// ok release a :delete of the token by the worker's connection inside the
// release's window, on as many. An op during a gap in the record (gaps,
// when a fault's failover drops the recorder's connection) is left out.
// A record stamped when its events arrived (etcd's watch: late by its
// latency) is held to the windows' starts alone, and to its own order:
// each token's grant before its delete. It returns how many acquires it
// checked. A record whose tokens are not the history's (PostgreSQL's: the
// holding backend) is matched by worker and window alone (anyToken).
func reconcile(t *testing.T, dir string, workers int, o recon) int {
	quorum, gaps, arrival := o.quorum, o.gaps, o.arrival
	t.Helper()
	ops := readOps(t, dir)
	evs, err := history.ReadServerFile(filepath.Join(dir, store.LockServer))
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := history.Pairs(ops)
	if err != nil {
		t.Fatal(err)
	}
	// acts[token] are the record's acts on it, by act.
	acts := map[string][]history.ServerEvent{}
	var holes []history.ServerEvent
	for _, e := range evs {
		if e.Act == history.SGap {
			if !gaps {
				t.Errorf("the record has a gap: %+v", e)
			}
			holes = append(holes, e)
		} else if measured := e.NodeTime != history.Unset || arrival; measured != (e.Uncertainty > 0) {
			// A stamp through a measured clock says how well it was known;
			// one of the history's own clock (the run's Redis) says nothing.
			t.Errorf("event %d (%s, :node-time %d) says :uncertainty %d; stamped through a measured clock: %v", e.Index, e.Act, e.NodeTime, e.Uncertainty, measured)
		}
		acts[e.Token] = append(acts[e.Token], e)
	}
	unseen := func(p history.Pair) bool {
		for _, g := range holes {
			if p.Complete.Time >= g.Time && (g.Until == history.Unset || p.Invoke.Time <= g.Until) {
				return true
			}
		}
		return false
	}
	token := map[int64]string{} // by worker slot: the token it holds
	checked := 0
	for _, p := range pairs {
		if p.Outcome() != history.Ok || !p.Invoke.IsClient() {
			continue
		}
		slot := int64(p.Invoke.Process) % int64(workers)
		var want history.Keyword
		switch p.Invoke.F {
		case history.FAcquire:
			want, token[slot] = history.SGrant, fmt.Sprint(p.Complete.Get(history.KeyToken))
		case history.FRelease:
			want = history.SDelete
		default:
			continue
		}
		if unseen(p) {
			continue
		}
		if want == history.SGrant {
			checked++
			checkFence(t, p, evs, workers, arrival)
		}
		who := history.WorkerName(p.Invoke.Process, workers)
		nodes := map[string]bool{}
		candidates := acts[token[slot]]
		if o.anyToken {
			candidates = evs
		}
		for _, e := range candidates {
			if e.Act == want && e.Client == who && e.Time >= p.Invoke.Time && (arrival || e.Time <= p.Complete.Time) {
				nodes[e.Node] = true
			}
		}
		if len(nodes) < quorum {
			t.Errorf("%s of process %d, token %s, from %d to %d: a %s by %s inside it on %d nodes, want %d; the record has %+v",
				p.Invoke.F, p.Invoke.Process, token[slot], p.Invoke.Time, p.Complete.Time, want, who, len(nodes), quorum, acts[token[slot]])
		}
	}
	for tok, es := range acts {
		if o.anyToken {
			break
		}
		granted := false
		for _, e := range es {
			switch {
			case e.Act == history.SGrant:
				granted = true
			case (e.Act == history.SDelete || e.Act == history.SExpire) && !granted && tok != "":
				t.Errorf("token %s: %s at %d before any grant of it", tok, e.Act, e.Time)
			}
		}
	}
	return checked
}

// adapterPath is the path of the reference adapter at rel under adapters/,
// whose packages scripts/setup --tests installs.
func adapterPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "adapters", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recon says what a record is held to: grants and deletes on quorum
// nodes; gaps allowed (a failover); stamped on arrival (etcd); tokens its
// own (PostgreSQL).
type recon struct {
	quorum                  int
	gaps, arrival, anyToken bool
}

// checkFence checks that an ok acquire's fencing token, when it has one, is
// in the record: a :fence of that value by the acquiring worker inside the
// acquire's window.
func checkFence(t *testing.T, p history.Pair, evs []history.ServerEvent, workers int, arrival bool) {
	t.Helper()
	f, ok := history.Int(p.Complete.Get(history.KeyFence))
	if !ok {
		return
	}
	who := history.WorkerName(p.Invoke.Process, workers)
	for _, e := range evs {
		if e.Act == history.SFence && e.Fence == f && e.Client == who && e.Time >= p.Invoke.Time && (arrival || e.Time <= p.Complete.Time) {
			return
		}
	}
	t.Errorf("acquire of process %d from %d to %d, fence %d: no :fence %d by %s inside it", p.Invoke.Process, p.Invoke.Time, p.Complete.Time, f, f, who)
}

// stepped counts the events of a record stamped on a node's clock that
// stood jump (±1 ms) off the history's: what a clock fault leaves.
func stepped(t *testing.T, dir string, jump time.Duration) int {
	t.Helper()
	evs, err := history.ReadServerFile(filepath.Join(dir, store.LockServer))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if d := e.NodeTime - e.Time - int64(jump); e.NodeTime != history.Unset && d < int64(time.Millisecond) && d > -int64(time.Millisecond) {
			n++
		}
	}
	return n
}

// TestRecordReconciles: a run on real servers leaves a lock server's
// record that tells the history's story from the server's side — each ok
// acquire a grant inside its window, each ok release a delete by the
// releasing worker's connection, each fencing token an INCR by the
// acquiring worker — on the run's own Redis, through MONITOR alone
// (commands), on a 3-node Redlock (a majority each), on Redlock nodes whose
// clocks the clock fault steps (stamped through their measured offsets),
// on etcd and ZooKeeper (their watches), and on Sentinel's primary and replica through a failover (but for the
// moments the failover drops the recorder's connection, which the record
// says as gaps). Its cases run one at a time, not beside each other: the
// record's stamps are held to each call's window, and with the other
// cases' runs beside it redlock-netns's record missed a release's deletes
// on a quiet machine, ZooKeeper's left two grants unnamed (each acquire
// has a session of its own, named only while it lives) and the sentinels
// promoted no replica in a failover's 3 s.
func TestRecordReconciles(t *testing.T) {
	// A run of an interpreter's adapter, or of a lock whose sessions take
	// a JVM's or etcd's round trips to open, is given three seconds, not
	// one: beside two CPU burners kazoo's 1 s runs granted 2 to 4 times,
	// fewer than the five the record's checks need.
	slow := func(edit func(*harness.Config)) func(*harness.Config) {
		return func(c *harness.Config) { edit(c); c.TimeLimit = 3 * time.Second }
	}
	for _, tc := range []struct {
		name string
		edit func(*harness.Config)
		recon
	}{
		{"setnx", func(c *harness.Config) {}, recon{quorum: 1}},
		{"setnx-commands-fenced", func(c *harness.Config) { c.LockServerRecord, c.Guard = "commands", "fence" }, recon{quorum: 1}},
		{"redlock-3", func(c *harness.Config) { c.Lock, c.Nodes = "redlock", 3 }, recon{quorum: 2}},
		{"redlock-netns", func(c *harness.Config) { c.Lock, c.Nodes, c.Hosts = "redlock", 3, harness.HostsNetns }, recon{quorum: 2}},
		// Adapters name their connections as init tells them: redis-py's
		// SET NX and script, node-redlock's scripts (SET NX inside Lua).
		{"adapter-redis-py", slow(func(c *harness.Config) { c.Lock = "exec:/usr/bin/python3 " + adapterPath(t, "python/redis_py_lock.py") }), recon{quorum: 1}},
		{"adapter-node-redlock", slow(func(c *harness.Config) { c.Lock = "exec:node " + adapterPath(t, "node/redlock.js") }), recon{quorum: 1}},
		// On several nodes (--adapter-store redis-nodes), told as
		// redis_urls: node-redlock on five, redis-semaphore's
		// RedlockMutex on three.
		{"adapter-node-redlock-5", slow(func(c *harness.Config) {
			c.Lock, c.AdapterStore, c.Nodes = "exec:node "+adapterPath(t, "node/redlock.js"), harness.AdapterOnRedisNodes, 5
		}), recon{quorum: 3}},
		{"adapter-redlock-mutex-3", slow(func(c *harness.Config) {
			c.Lock, c.AdapterStore, c.Nodes = "exec:node "+adapterPath(t, "node/redis-semaphore.js"), harness.AdapterOnRedisNodes, 3
		}), recon{quorum: 2}},
		// redis-semaphore's Mutex keeps the lock under mutex:NAME, which
		// its hello names: the record follows that key.
		{"adapter-redis-semaphore", slow(func(c *harness.Config) {
			c.Lock = "exec:node " + adapterPath(t, "node-redis-semaphore/main.js") + " v5.3.1"
		}), recon{quorum: 1}},
		{"pg-advisory", func(c *harness.Config) { c.Lock, c.Guard = "pg-advisory", "fence" }, recon{quorum: 1, anyToken: true}},
		{"etcd", slow(func(c *harness.Config) { c.Lock, c.Guard = "etcd", "fence" }), recon{quorum: 1, arrival: true}},
		{"etcd-v3lock", slow(func(c *harness.Config) { c.Lock = "etcd-v3lock" }), recon{quorum: 1, arrival: true}},
		// ZooKeeper's watch, stamped as etcd's; go-zookeeper's Lock, and
		// kazoo's through its adapter, naming their sessions as init
		// tells it.
		{"zookeeper", slow(func(c *harness.Config) { c.Lock, c.Guard = "zookeeper", "fence" }), recon{quorum: 1, arrival: true}},
		{"adapter-kazoo", slow(func(c *harness.Config) {
			c.Lock, c.AdapterStore = "exec:/usr/bin/python3 "+adapterPath(t, "python/kazoo_lock.py"), harness.AdapterOnZooKeeper
		}), recon{quorum: 1, arrival: true}},
		{"redlock-clock", func(c *harness.Config) {
			c.Lock, c.Nodes, c.Nemesis, c.TimeLimit, c.Pause, c.Interval = "redlock", 3, "clock", 2*time.Second, 600*time.Millisecond, 300*time.Millisecond
		}, recon{quorum: 2}},
		// A failover of 4 s, not the 3 s validation allows: with the
		// node adapters' clients on the sentinels, their promotion ended
		// 3.0 to 3.7 s into the fault, and the 3 s faults of 6 runs of 9
		// ended before it.
		{"sentinel-failover", func(c *harness.Config) {
			c.Nemesis, c.TimeLimit, c.Pause = "failover", 7*time.Second, 4*time.Second
		}, recon{quorum: 1, gaps: true}},
		// An adapter told the sentinels (--adapter-store sentinel):
		// node-redlock's ioredis client asks them for the primary, and
		// the record, of the replicated Redis, sees its grants.
		{"adapter-sentinel-failover", func(c *harness.Config) {
			c.Lock, c.AdapterStore = "exec:node "+adapterPath(t, "node/redlock.js"), harness.AdapterOnSentinel
			c.Nemesis, c.TimeLimit, c.Pause = "failover", 7*time.Second, 4*time.Second
		}, recon{quorum: 1, gaps: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := harness.DefaultConfig()
			cfg.Store, cfg.TimeLimit, cfg.Nemesis, cfg.NoPlots = t.TempDir(), time.Second, "none", true
			tc.edit(&cfg)
			// A run of fewer than five grants tells nothing either way (beside
			// two CPU burners RedlockMutex's 3 s runs granted 4), nor does a
			// failover run whose sentinels promoted no replica: it is made
			// again (showing); every run made is reconciled.
			res, ok := showing(t, harness.Run, cfg, func(r harness.Result) (bool, string) {
				n := reconcile(t, r.Dir, cfg.Workers, tc.recon)
				over := cfg.Nemesis != "failover" || failedOver(t, r.Dir)
				return n >= 5 && over, fmt.Sprintf("%d ok acquires seen by the record; failed over: %v", n, over)
			})
			if !ok {
				t.Fatal("three runs, none with five ok acquires seen by the record (and a failover, if asked): too few to tell")
			}
			if cfg.Nemesis == "clock" && stepped(t, res.Dir, cfg.Lease) == 0 {
				t.Errorf("no event of a node whose clock the fault stepped by %v: the clock fault did not show", cfg.Lease)
			}
		})
	}
}

// failedOver says the run in dir holds a failover that ended without an
// error: its sentinels promoted the replica.
func failedOver(t *testing.T, dir string) bool {
	t.Helper()
	ops := readOps(t, dir)
	for _, o := range ops {
		if e, ok := history.ReadFaultEvent(o); ok && e.Kind == nemesis.KindFailover && !e.Begin && e.Value["error"] == nil {
			return true
		}
	}
	return false
}

// TestRecordReconcilesSSH: over SSH, the lock's Redis node on a machine of
// its own (the tests' network of hosts, each with its sshd) and under the
// clock fault there, the record the control machine makes of it
// reconciles with the history as on one machine.
func TestRecordReconcilesSSH(t *testing.T) {
	sn := sshtest.StartT(t, sshtest.Lab)
	cfg := sshConfig(t, sn, "ssh-record", 120)
	clockRun(&cfg)
	res, _ := runSSH(t, cfg)
	if n := reconcile(t, res.Dir, cfg.Workers, recon{quorum: 1}); n < 5 {
		t.Errorf("%d ok acquires seen by the record: too few to tell", n)
	}
	if stepped(t, res.Dir, cfg.Lease) == 0 {
		t.Errorf("no event of the node whose clock the fault stepped by %v", cfg.Lease)
	}
}
