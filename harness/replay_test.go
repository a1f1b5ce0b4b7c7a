package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
)

// TestReplaySchedule: a run's schedule.edn, replayed, injects the same
// faults on the same workers (but a holder fault whose worker was starved
// of the lock for its whole wait) at the same times, within a tolerance: a
// pause (a whole one: in a quiet suite a replayed fault once began 225 ms
// after its time in the run, half a pause late and more), plus the two
// seconds each fault that hit the lock holder, this one or one before it,
// may wait for its worker, or the next, to hold the lock again
// (nemesis.Schedule.HolderWait, twice; the nemesis injects one fault at a
// time, so a wait delays those after it). A fault replayed a turn late
// (an interval and a pause) before any holder fault is still caught.
// The replay runs longer than the run, so that delayed faults still fall
// inside it.
func TestReplaySchedule(t *testing.T) {
	t.Parallel() // its runs sleep through their faults, as do the other parallel tests'
	ctx := context.Background()
	cfg := harness.DefaultConfig()
	cfg.Store, cfg.Lock = t.TempDir(), "del-release"
	cfg.TimeLimit, cfg.Pause, cfg.Interval = 3*time.Second, 300*time.Millisecond, 200*time.Millisecond
	stop, err := harness.StartServers(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	first, err := lab.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	planned := readPlan(t, first.Dir)
	if len(planned) < 3 {
		t.Fatalf("the run injected %d faults in %v, every %v: want several", len(planned), cfg.TimeLimit, cfg.Interval+cfg.Pause)
	}
	replay, err := harness.ReplayConfig(first.Dir)
	if err != nil {
		t.Fatal(err)
	}
	replay.RedisURL, replay.PostgresURL = cfg.RedisURL, cfg.PostgresURL
	replay.TimeLimit += 2 * time.Duration(len(planned)) * time.Second // room for every holder wait
	again, err := lab.Run(ctx, replay)
	if err != nil {
		t.Fatal(err)
	}
	got := readPlan(t, again.Dir)
	if len(got) < len(planned) {
		t.Fatalf("replayed %d faults of %d:\n%+v\nwant\n%+v", len(got), len(planned), got, planned)
	}
	tol := cfg.Pause
	for i, want := range planned {
		if want.Holder {
			tol += 2 * time.Second
		}
		g := got[i]
		// A holder fault whose worker did not hold the lock within the
		// wait hits the next worker to take it (nemesis.awaitHolder): it
		// waited a second at the least, then.
		moved := want.Holder && g.Worker != want.Worker && g.At-want.At >= time.Second
		switch {
		case g.Kind != want.Kind || g.Worker != want.Worker && !moved:
			t.Errorf("fault %d: %s of worker %d, want %s of worker %d", i, g.Kind, g.Worker, want.Kind, want.Worker)
		case (g.At-want.At).Abs() > tol || (g.Length-want.Length).Abs() > cfg.Pause/2:
			t.Errorf("fault %d: at %v for %v, want at %v for %v (± %v)", i, g.At, g.Length, want.At, want.Length, tol)
		}
	}
}

func readPlan(t *testing.T, dir string) nemesis.Plan {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, store.Schedule))
	if err != nil {
		t.Fatal(err)
	}
	p, err := nemesis.ParsePlan(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// showing makes runs of cfg with run until one shows what the test asks
// of it (shows says whether, and why not, for the log), three at most: a
// run on a loaded machine may show nothing either way (too few grants, a
// fault that caught nothing), which is no verdict. It returns the last
// run, and whether it showed.
func showing(t *testing.T, run func(context.Context, harness.Config) (harness.Result, error), cfg harness.Config,
	shows func(harness.Result) (bool, string)) (harness.Result, bool) {
	t.Helper()
	var res harness.Result
	for try := 1; try <= 3; try++ {
		var err error
		if res, err = run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		ok, why := shows(res)
		if ok {
			return res, true
		}
		t.Logf("run %d (%s): %s", try, res.Dir, why)
	}
	return res, false
}

// readOps reads the history of the run in dir.
func readOps(t *testing.T, dir string) []history.Op {
	t.Helper()
	ops, err := history.ReadFile(filepath.Join(dir, store.History))
	if err != nil {
		t.Fatal(err)
	}
	return ops
}
