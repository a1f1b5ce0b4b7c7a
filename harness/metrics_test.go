package harness_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/guard"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestRunGuardMetrics: what the workers' guards counted, in the run's
// metrics files as Prometheus's own text parser reads them, is what the
// checker counted from the history: rejections by reason equal to
// stale-rejected and change-rejected, attempts equal to the guarded ops
// invoked. Holders SIGSTOP themselves inside every other section for four
// leases, and the nemesis SIGSTOPs workers besides: a paused holder's
// lease lapses, another holder reads and writes meanwhile (a section takes
// a few milliseconds of the three leases left), and the paused one's write
// is refused when it wakes.
//
// With kill-worker besides, a killed worker's file holds its counts as of
// its last refusal: the files' sums are at most the history's.
func TestRunGuardMetrics(t *testing.T) {
	t.Parallel() // its runs sleep through their pauses, as do the other parallel tests'
	shared := harness.DefaultConfig()
	stop, err := harness.StartServers(context.Background(), &shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	for i, tc := range []struct {
		guard   client.Guard
		nemesis harness.Nemesis
	}{
		{client.GuardFence, "sigstop"},
		{client.GuardFenceRMW, "sigstop"},
		{client.GuardCAS, "sigstop"},
		{client.GuardFence, "sigstop,kill-worker"},
	} {
		t.Run(string(tc.guard)+"/"+string(tc.nemesis), func(t *testing.T) {
			t.Parallel()
			cfg := harness.DefaultConfig()
			cfg.Store, cfg.Guard, cfg.Nemesis = t.TempDir(), tc.guard, tc.nemesis
			// One pair of servers, a counter row and lock of its own a run.
			cfg.RedisURL, cfg.PostgresURL = shared.RedisURL, shared.PostgresURL
			cfg.Name, cfg.CounterID = fmt.Sprintf("metrics-%d", i), int64(800+i)
			cfg.Lease, cfg.Work, cfg.TimeLimit = 300*time.Millisecond, 5*time.Millisecond, 4*time.Second
			cfg.Pause, cfg.InjectEvery, cfg.PauseKind = 4*cfg.Lease, 2, nemesis.KindStop
			res, err := lab.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := res.Results.LockFigures()
			got := scrape(t, filepath.Join(res.Dir, store.Metrics))
			want := invoked(t, res.Dir)
			want[series{guard.RejectionsName, guard.ReasonStale}] = f.StaleRejected
			want[series{guard.RejectionsName, guard.ReasonChanged}] = f.ChangeRejected
			if f.StaleRejected+f.ChangeRejected == 0 {
				t.Errorf("no rejections: the run did not exercise the guard (figures %+v)", f)
			}
			killed := strings.Contains(string(tc.nemesis), "kill-worker")
			for s, n := range want {
				if got[s] != n && (!killed || got[s] > n) {
					t.Errorf("%s %s: the metrics say %d, the history %d", s.name, s.label, got[s], n)
				}
			}
			t.Logf("stale-rejected %d, change-rejected %d, metrics %v", f.StaleRejected, f.ChangeRejected, got)
		})
	}
}

// A series is a metric's name and its op (attempts) or reason (rejections).
type series struct{ name, label string }

// scrape sums, over the workers' files in dir, the guard's counters, all
// of one lock.
func scrape(t *testing.T, dir string) map[series]int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "worker-*.prom"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no worker metrics in %s (%v)", dir, err)
	}
	out := map[series]int64{}
	var locks string // the lock label, the same on every series
	for _, name := range files {
		fh, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if lock := labels["lock"]; lock == "" || (locks != "" && lock != locks) {
					t.Errorf("%s: a series of lock %q, besides %q: want one lock, named", name, lock, locks)
				}
				locks = labels["lock"]
				label := labels["op"]
				if mf.GetName() == guard.RejectionsName {
					label = labels["reason"]
				}
				out[series{mf.GetName(), label}] += int64(m.GetCounter().GetValue())
			}
		}
	}
	return out
}

// invoked counts the guarded ops the history of the run in dir invoked: its
// writes, and its reads under fence-rmw (the reads it records a fence on).
func invoked(t *testing.T, dir string) map[series]int64 {
	t.Helper()
	ops := readOps(t, dir)
	out := map[series]int64{}
	for _, o := range ops {
		if !o.IsClient() || o.Type != history.Invoke {
			continue
		}
		switch _, fenced := o.Extra[history.KeyFence]; {
		case o.F == history.FWrite:
			out[series{guard.AttemptsName, "write"}]++
		case o.F == history.FRead && fenced:
			out[series{guard.AttemptsName, "read"}]++
		}
	}
	return out
}
