package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// TestRunStopWaiters: with --pause-kind stop-waiters, the holder of every
// 2nd section blocks, and each worker then waiting for the lock is stopped
// as long: a :pause and a :resume of kind :stop-waiters naming it, its
// acquire invoked before the stop and completed after it, while the holder
// holds. On a lock without a lease (pg-advisory) that loses nothing. The
// stops come of the configuration: schedule.edn has none to replay.
func TestRunStopWaiters(t *testing.T) {
	t.Parallel()
	// Waiters are stopped in the first half of a pause only: a loaded
	// machine's collector came to a pause of 200 ms after its holder had
	// released, and stopped a worker that had the lock by then.
	const pause = 500 * time.Millisecond
	cfg := harness.DefaultConfig()
	// Eight pauses' time: on a loaded machine, four held no pause.
	cfg.Lock, cfg.Store, cfg.Workers, cfg.TimeLimit, cfg.Nemesis = "pg-advisory", t.TempDir(), 3, 8*pause, "none"
	cfg.InjectEvery, cfg.PauseKind, cfg.Pause = 2, nemesis.KindStopWaiters, pause
	res, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Results.Valid != checker.Valid {
		t.Errorf("valid? %v: %s", res.Results.Valid, res.Results.AppendEDN(nil))
	}
	ops := readOps(t, res.Dir)
	pending := map[history.Process]history.Op{} // open acquires, by process
	last := map[history.Process]history.Op{}    // each process's last acquire op
	holder := history.Process(-1)               // the process in a stop-waiters pause of its own
	type stop struct {
		begin   history.Op
		waiting history.Process
		resumed bool
	}
	stops := map[int64]*stop{} // by worker
	holders, waiters := 0, 0
	for _, o := range ops {
		switch {
		case o.IsClient() && o.F == history.FAcquire && o.Type == history.Invoke:
			pending[o.Process] = o
			last[o.Process] = o
		case o.IsClient() && o.F == history.FAcquire:
			delete(pending, o.Process)
			last[o.Process] = o
			// Its stamp is taken once it runs again. One stamped before the
			// stop came before it, though the journal may take it after the
			// stop's event (each process's ops reach it on their own).
			if s := stops[int64(o.Process)%int64(cfg.Workers)]; s != nil && s.waiting == o.Process && o.Time > s.begin.Time && o.Time < s.begin.Time+int64(pause) {
				t.Errorf("op %d: process %d's acquire completed while it was stopped", o.Index, o.Process)
			}
		}
		e, ok := history.ReadFaultEvent(o)
		if !ok || e.Kind != nemesis.KindStopWaiters {
			continue
		}
		w, isWaiter := history.Int(e.Value["worker"])
		switch {
		case !isWaiter && e.Begin:
			holders++
			holder = history.Process(e.Process)
		case !isWaiter:
			holder = -1
		case e.Begin:
			waiters++
			p := history.Process(e.Process)
			if _, ok := pending[p]; !ok {
				t.Errorf("op %d stopped worker %d (process %d) at %v, which was not waiting for the lock: its last acquire op %d, %s at %v (%v)",
					o.Index, w, p, time.Duration(o.Time), last[p].Index, last[p].Type, time.Duration(last[p].Time), last[p].Error)
			}
			if holder < 0 || holder == p {
				t.Errorf("op %d stopped worker %d with no other holder in its stop-waiters pause (holder %d)", o.Index, w, holder)
			}
			stops[w] = &stop{begin: o, waiting: p}
		default:
			s := stops[w]
			if s == nil || s.resumed {
				t.Errorf("op %d resumes worker %d, which no stop-waiters stopped", o.Index, w)
				continue
			}
			s.resumed = true
			if got := time.Duration(o.Time - s.begin.Time); got < pause {
				t.Errorf("worker %d stopped %v, want %v", w, got, pause)
			}
		}
	}
	for w, s := range stops {
		if !s.resumed {
			t.Errorf("worker %d stopped by op %d and never resumed", w, s.begin.Index)
		}
	}
	if holders == 0 || waiters == 0 {
		t.Errorf("%d stop-waiters pauses stopped %d waiters: want some of each", holders, waiters)
	}
	t.Logf("%d stop-waiters pauses stopped %d waiters", holders, waiters)
	if plan := readPlan(t, res.Dir); len(plan) != 0 {
		t.Errorf("schedule.edn holds %d faults, want none: in-section pauses come of the configuration", len(plan))
	}
}
