package harness_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/store"
)

// zkLease is the ZooKeeper runs' lease: their sessions' timeout. The
// client pings every third of it, which a loaded machine delays: a second
// is missed only by a stall of 300 ms.
const zkLease = time.Second

// TestRunZooKeeperFaults runs the default experiment on the ZooKeeper lock
// and each fault that acts on its ensemble, the runs in parallel on one pair
// of throwaway servers (each run starts its own ensemble: a JVM a server,
// a second to start), and reads each one's history for the fault's effect.
// When every run has ended, none has left a process, a server directory or
// a listener.
func TestRunZooKeeperFaults(t *testing.T) {
	before := listenersT(t)
	zk := func(c *harness.Config) {
		c.Lock, c.Lease, c.TimeLimit = "zookeeper", zkLease, 3*time.Second
	}
	cases := []faultCase{
		{name: "zk-none", edit: func(c *harness.Config) {
			zk(c)
			c.Nemesis = "none"
		}, effect: func(t *testing.T, r faultRun) {
			if r.res.Results.Valid != checker.Valid || r.fig.Writes < 1 {
				t.Errorf("valid? %v with %d writes: want a valid run with writes", r.res.Results.Valid, r.fig.Writes)
			}
			zkLogsKept(t, r)
		}},
		// kazoo's Lock through its adapter, told the ensemble in init.
		{name: "zk-kazoo", edit: func(c *harness.Config) {
			zk(c)
			c.Lock, c.AdapterStore, c.Nemesis = "exec:../adapters/python/kazoo_lock.py", harness.AdapterOnZooKeeper, "none"
		}, effect: func(t *testing.T, r faultRun) {
			if r.res.Results.Valid != checker.Valid || r.fig.Writes < 1 {
				t.Errorf("valid? %v with %d writes: want a valid run with writes", r.res.Results.Valid, r.fig.Writes)
			}
		}},
		// The server stopped two sessions' time: no request sent to it then
		// is answered before it goes on. Seven seconds, so that a pause
		// begins after the first lock call: a loaded machine took 2.5 s
		// to open the ZooKeeper sessions, past the first two pauses; and a
		// session between pauses, so that a section completes: with 200 ms
		// between them, a loaded machine's suite had every acquire time
		// out, and the history, no write in it, did not check.
		{name: "zk-pause-node", edit: func(c *harness.Config) {
			zk(c)
			c.Nemesis, c.Pause, c.Interval, c.TimeLimit = "pause-node", 2*zkLease, zkLease, 7*time.Second
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.nodeHeld(t, w) })
		}},
		// Killed and started again, with its data and sessions: a lock
		// call sent while it was down waits for it. The record's watch
		// is set again once the server is back, racing the lock's
		// clients: when one changed the line first in a way the record
		// cannot rebuild (its holder's znode gone), the record says so
		// as a gap, and its checks have no verdict.
		// The first restart a second in, once the lock is handed on (a
		// loaded machine's JVM took longer than 300 ms to grant it, and
		// its restart three seconds: no write, no verdict), and time after
		// it for writes.
		{name: "zk-restart", edit: func(c *harness.Config) {
			zk(c)
			c.Nemesis, c.Pause, c.Interval, c.TimeLimit = "restart", 20*time.Millisecond, time.Second, 6*time.Second
		}, effect: func(t *testing.T, r faultRun) { r.serverDown(t) }, blind: true},
		// Cut from the one server, or its connections reset until the
		// heal: a request waits for the heal.
		{name: "zk-partition", edit: func(c *harness.Config) {
			zk(c)
			c.Nemesis, c.Pause, c.Interval = "partition-redis", zkLease/2, 200*time.Millisecond
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.cutOff(t, w) })
		}},
		{name: "zk-drop", edit: func(c *harness.Config) {
			zk(c)
			c.Nemesis, c.Pause, c.Interval = "drop-redis", zkLease/2, 200*time.Millisecond
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.cutOff(t, w) })
		}},
		{name: "zk-delay", edit: func(c *harness.Config) {
			zk(c)
			c.Nemesis, c.Pause, c.Interval, c.Delay = "delay-redis", zkLease/2, 200*time.Millisecond, zkLease/4
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.slowed(t, w, zkLease/4) })
		}},
		// An ensemble of three: a worker cut from all of them (a client
		// moves its session to any server it reaches) takes the lock
		// nowhere while the cut lasts.
		{name: "zk-ensemble-partition-majority", edit: func(c *harness.Config) {
			zk(c)
			c.Nodes, c.Nemesis, c.Pause, c.Interval = 3, "partition-redis-majority", zkLease, 200*time.Millisecond
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) {
				if links, _ := w.v("links").(string); links != "nodes 0,1,2" {
					t.Errorf(":links %q: want every server of the ensemble, nodes 0,1,2", links)
				}
				r.cutOff(t, w)
				for _, c := range r.calls(r.slot(w)) {
					if c.comp.F == history.FAcquire && c.comp.Type == history.Ok && c.inv.Time > w.begin.Time && c.comp.Time < w.end.Time {
						t.Errorf("op %d: worker %d took the lock while cut from the ensemble", c.comp.Index, r.slot(w))
					}
				}
			})
		}},
		// Session expiry: each holder stops its whole process inside its
		// section for two sessions' time; the server expires its session,
		// deletes its znode, and the next waiter is granted. Unguarded the
		// stopped holder's write lands on the next one's: updates are lost.
		// Fenced by the znode's czxid, that write is refused: with
		// fence-rmw, which records the next holder's larger czxid in the
		// row at its read. (Every holder stops here, the next one too, so
		// the stale write may land before the next one's; fence, which
		// orders writes and not read-modify-writes, then lets both land:
		// the pause test's B writes before A wakes, where fence refuses.)
		{name: "zk-expiry", edit: zkExpiry(client.GuardNone), effect: func(t *testing.T, r faultRun) {
			if r.res.Results.Valid != checker.Invalid || r.fig.LostMin < 1 {
				t.Errorf("valid? %v, %d lost: want updates lost by holders whose sessions expired", r.res.Results.Valid, r.fig.LostMin)
			}
			r.expired(t)
			r.recordExpired(t)
			if edn := string(r.res.Results.AppendEDN(nil)); !strings.Contains(edn, ":layer :lease") || !strings.Contains(edn, "its key expired at") {
				t.Errorf("the lost updates' explanation names no expiry of the lease layer: %s", edn)
			}
		}},
		{name: "zk-expiry-fence-rmw", edit: zkExpiry(client.GuardFenceRMW), effect: func(t *testing.T, r faultRun) {
			if r.res.Results.Valid != checker.Valid || r.fig.StaleRejected < 1 {
				t.Errorf("valid? %v, %d stale writes refused: want the expired holders' writes refused", r.res.Results.Valid, r.fig.StaleRejected)
			}
			r.expired(t)
			r.recordExpired(t)
		}},
	}
	runSharedCases(t, cases, 300)
	noLeftovers(t, before)
}

// zkExpiry is a run whose every holder stops itself inside its section for
// two sessions' time, two workers taking turns, under guard g.
func zkExpiry(g client.Guard) func(*harness.Config) {
	return func(c *harness.Config) {
		c.Lock, c.Lease, c.Guard, c.Workers = "zookeeper", zkLease, g, 2
		c.Nemesis, c.InjectEvery, c.PauseKind, c.Pause = "none", 1, "stop", 2*zkLease
		c.TimeLimit = 3 * time.Second
	}
}

// expired: a release found its grant lost, its session expired while its
// holder was stopped (:error :stolen or :expired).
func (r faultRun) expired(t *testing.T) {
	t.Helper()
	if count(r.ops, func(o history.Op) bool {
		return o.F == history.FRelease && o.Type == history.Fail && o.Error != nil
	}) == 0 {
		t.Errorf("no release found its znode gone")
	}
}

// recordExpired: the lock server's record has a holder's znode deleted
// by its session's expiry, and no expiry but of a holder whose release
// found its znode gone.
func (r faultRun) recordExpired(t *testing.T) {
	t.Helper()
	evs, err := history.ReadServerFile(filepath.Join(r.res.Dir, store.LockServer))
	if err != nil {
		t.Fatal(err)
	}
	// The tokens of the holders whose release found their znode gone.
	stopped, held := map[string]bool{}, map[history.Process]string{}
	for _, o := range r.ops {
		switch {
		case o.F == history.FAcquire && o.Type == history.Ok:
			held[o.Process] = fmt.Sprint(o.Get(history.KeyToken))
		case o.F == history.FRelease && o.Type == history.Fail && o.Error != nil:
			stopped[held[o.Process]] = true
		}
	}
	n := 0
	for _, e := range evs {
		if e.Act == history.SExpire {
			n++
			if !stopped[e.Token] {
				t.Errorf("the record has %s expired (%s): no stopped holder's", e.Token, e.Command)
			}
		}
	}
	if n == 0 {
		t.Errorf("the record has no znode deleted by its session's expiry, of %d events", len(evs))
	}
}

// serverDown: each restart took the server down for a while. Its begin
// event is stamped just before the kill, and its end once the nemesis's
// probe finds it serving, which may be after its clients do; what is
// certain is a span after the kill shorter than any restart of a JVM.
// Within it no lock call sent once the kill had surely landed was answered
// ok; and, of each restart that ended while the workers still ran, a lock
// call in flight when the kill landed was answered only after the span,
// where a live server hands the lock on every section. (A release is in
// flight then only when the kill found a holder; waiters are at every
// kill: three workers, one lock.)
func (r faultRun) serverDown(t *testing.T) {
	t.Helper()
	const (
		landed = 100 * time.Millisecond // kill to a dead server, with margin
		down   = 400 * time.Millisecond // less than a ZooKeeper JVM takes to serve again
	)
	var lock []call
	last := int64(0)
	for slot := range r.cfg.Workers {
		for _, c := range r.calls(slot) {
			last = max(last, c.comp.Time)
			if c.inv.F == history.FAcquire || c.inv.F == history.FRelease {
				lock = append(lock, c)
			}
		}
	}
	n := 0
	for _, w := range r.windows {
		if !w.whole() {
			continue
		}
		from := w.begin.Time + int64(landed)
		to := min(from+int64(down), w.end.Time)
		for _, c := range lock {
			if c.comp.Type == history.Ok && c.inv.Time > from && c.comp.Time < to {
				t.Errorf("restart at op %d: %v answered while the server was down", w.begin.Index, c)
			}
		}
		if w.end.Time >= last {
			continue
		}
		n++
		if i := slices.IndexFunc(lock, func(c call) bool { return c.inv.Time < from && c.comp.Time > to }); i >= 0 {
			t.Logf("restart at op %d held %v", w.begin.Index, lock[i])
		} else {
			t.Errorf("restart at op %d (%v–%v): no lock call in flight at the kill was held through it", w.begin.Index, time.Duration(w.begin.Time), time.Duration(w.end.Time))
		}
	}
	if n == 0 {
		t.Errorf("of %d restarts, none lasted its length and ended while the workers ran", len(r.windows))
	}
}

// zkLogsKept: each ZooKeeper server's own log is in the run's directory,
// and the run's log says where.
func zkLogsKept(t *testing.T, r faultRun) {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(r.res.Dir, store.Log))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`ZooKeeper server 0: throwaway, pid [0-9]+, at 127\.0\.0\.1:[0-9]+; its own log is kept as zookeeper-0\.log`).Match(log) {
		t.Errorf("the run's log does not name the ZooKeeper server:\n%s", log)
	}
	b, err := os.ReadFile(filepath.Join(r.res.Dir, "zookeeper-0.log"))
	if err != nil || !strings.Contains(string(b), "ZooKeeperServer") {
		t.Errorf("zookeeper-0.log: %d bytes, %v; want the server's log", len(b), err)
	}
}
