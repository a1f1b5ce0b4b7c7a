package harness_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/adaptertest"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// TestRunReplyDelayRedsyncValidity: redsync's Extend before v4.4.0 says
// extended without asking whether its answer came in time (go-redsync/
// redsync commit acd8018, "Fix ExtendContext", in v4.4.0): the replies of
// the lock's node to worker 0, delayed 1.5 s on a 1 s lease from the
// extend it sends before its write (delay-redis-replies aimed at a lock
// call in flight, :call :extend), reach it after the key the extend
// renewed has expired, and another worker has taken the lock. v4.3.0 says
// extended, the holder writes (invalid: an update lost, or the write late
// at least); v4.4.1, on the same schedule, refuses, and the run is valid.
// A delay of both directions cannot show it: the extend itself arrives
// after the lease. Measured: 10 of 10
// runs of each (docs/findings.md).
func TestRunReplyDelayRedsyncValidity(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []struct {
		version string
		late    bool // its late extend says extended
	}{{"v4.3.0", true}, {"v4.4.1", false}} {
		bin := filepath.Join(dir, "redsync-"+v.version)
		if err := adaptertest.BuildGo("../adapters/go-redsync", v.version+".mod", bin); err != nil {
			t.Fatal(err)
		}
		t.Run(v.version, func(t *testing.T) {
			t.Parallel()
			cfg := harness.DefaultConfig()
			cfg.Lock, cfg.Store, cfg.Workers, cfg.TimeLimit = "exec:"+bin, t.TempDir(), 2, 6*time.Second
			// A lease of a second: on a loaded machine a 300 ms one ran out
			// between a grant and its extend, which then found it gone.
			cfg.Lease, cfg.Delay, cfg.Pause, cfg.ExtendBeforeWrite = time.Second, 1500*time.Millisecond, 2*time.Second, true
			cfg.Nemesis = harness.Nemesis(nemesis.KindDelayRedisReplies)
			cfg.Plan = nemesis.Plan{{Kind: nemesis.KindDelayRedisReplies, Worker: nemesis.On(0), At: time.Second, Length: 2 * time.Second, Call: history.FExtend}}
			// The fault must see worker 0's extend in flight, a millisecond's
			// call whose invocation and completion a loaded machine's
			// collector may read at once (beside two CPU burners a run's
			// fault once never began): a run whose fault caught no extend
			// shows nothing either way, and is made again (showing); what is
			// asserted of a caught extend is unchanged. So is, for v4.3.0, a
			// run whose caught extend was refused (beside two CPU burners,
			// once): v4.3.0's script refuses only a key gone or another's, a
			// grant that aged its lease before the extend reached the server,
			// and the late reply then had nothing to say extended. Three such
			// runs fail the test, as one did before.
			var caught *call
			res, _ := showing(t, lab.Run, cfg, func(r harness.Result) (bool, string) {
				caught = caughtExtend(readOps(t, r.Dir), cfg.Delay)
				switch {
				case caught == nil:
					return false, "its fault caught no extend"
				case v.late && caught.comp.Type != history.Ok:
					return false, fmt.Sprintf("the extend it caught was %s: its grant had lapsed before it", caught.comp.Type)
				}
				return true, ""
			})
			defer faultRun{res: res}.logFailed(t)
			f, _ := res.Results.LockFigures()
			t.Logf("%s: the extend the delay caught: %v; lost %d–%d", v.version, caught, f.LostMin, f.LostMax)
			switch {
			case caught == nil:
				t.Fatalf("no extend of worker 0 answered %v late after the fault began: the delay caught none", cfg.Delay)
			// Whether the stale write then overwrote an update depends on
			// the other worker's having written within the window (beside
			// two CPU burners, once not: invalid by its late write alone).
			case v.late && (caught.comp.Type != history.Ok || res.Results.Valid != checker.Invalid || f.LostMin < 1 && f.LateWrites < 1):
				t.Errorf("the late extend %s, valid? %v, lost %d, late writes %d: want it said extended, and an update lost or a write late",
					caught.comp.Type, res.Results.Valid, f.LostMin, f.LateWrites)
			case !v.late && (caught.comp.Type == history.Ok || res.Results.Valid != checker.Valid):
				t.Errorf("the late extend %s, valid? %v: want it refused, nothing lost", caught.comp.Type, res.Results.Valid)
			}
		})
	}
}

// caughtExtend is the extend of worker 0 (slot 0's processes, with two
// workers) answered after the fault began that took at least delay: the
// one whose reply the fault held (it may have been invoked just before
// the fault's event was stamped, which precedes its beginning). Nil if
// none.
func caughtExtend(ops []history.Op, delay time.Duration) *call {
	var began int64 = -1
	open := map[history.Process]history.Op{}
	for _, o := range ops {
		switch {
		case o.Process == history.Nemesis && o.F == history.FStart:
			if v, _ := o.Value.(map[history.Keyword]any); v["call"] == history.FExtend {
				began = o.Time
			}
		case o.F != history.FExtend || o.Process%2 != 0:
		case o.Type == history.Invoke:
			open[o.Process] = o
		case began >= 0 && o.Time-open[o.Process].Time >= delay.Nanoseconds():
			return &call{inv: open[o.Process], comp: o}
		}
	}
	return nil
}
