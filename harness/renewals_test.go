package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
)

// TestRunRecordsRenewals: a run of a renewing lock whose sections outlast
// a renewal period has the lock's renewals in its history — worker
// processes write them, the run collects, sorts and checks them — each
// under the renewer of a process that holds the grant it names, from the
// grant to its release's answer (Release stops the watchdog before the key
// goes; a tick just after the release's invoke renews, or is cancelled:
// 1.4 ms after it beside two burners); and the run's verdict is the one a history without
// them would get (nothing was lost).
func TestRunRecordsRenewals(t *testing.T) {
	cfg := harness.DefaultConfig()
	cfg.Lock, cfg.Store, cfg.Nemesis = "renew", t.TempDir(), "none"
	cfg.TimeLimit, cfg.Workers, cfg.Lease, cfg.Work = time.Second, 2, 300*time.Millisecond, 150*time.Millisecond
	res, err := lab.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ops := readOps(t, res.Dir)
	type grant struct {
		holder     history.Process
		start, end int64
	}
	grants := map[any]*grant{} // by token
	var renewals []history.Op
	for _, o := range ops {
		switch {
		case o.IsClient() && o.F == history.FAcquire && o.Type == history.Ok:
			grants[o.Get(history.KeyToken)] = &grant{holder: o.Process, start: o.Time, end: 1 << 62}
		case o.F == history.FRelease && o.Type != history.Invoke:
			// Until the release's answer, not its invoke: Release stops
			// the watchdog, which may begin a renewal before it does.
			for _, g := range grants {
				if g.holder == o.Process && g.end == 1<<62 {
					g.end = o.Time
				}
			}
		case o.F == history.FRenew:
			renewals = append(renewals, o)
		}
	}
	for _, o := range renewals {
		holder, _, ok := o.Process.Renews()
		g := grants[o.Get(history.KeyToken)]
		if !ok || g == nil || g.holder != holder || o.Time < g.start || o.Time > g.end {
			t.Errorf("renewal %s: not of a grant its renewer's holder held then (%+v)", history.AppendOp(nil, o), g)
		}
	}
	if len(renewals) == 0 {
		t.Errorf("no renewal in the history of %d ops", len(ops))
	}
	if res.Results.Valid != checker.Valid {
		t.Errorf("verdict %v, want valid", res.Results.Valid)
	}
}
