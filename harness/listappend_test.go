package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/store"
)

// TestRunListAppend: a list-append run whose holders sleep twice their
// lease inside every third section. Unguarded, a holder that wakes writes
// its list over the appends made meanwhile: the run is invalid and names
// them lost. Under cas, the resource refuses those writes: valid. Either
// way test.edn says the workload and its model, the history has :append
// ops, and the saved history checked again gives the run's verdict.
func TestRunListAppend(t *testing.T) {
	for _, tc := range []struct {
		guard client.Guard
		valid checker.Validity
	}{
		{client.GuardNone, checker.Invalid},
		{client.GuardCAS, checker.Valid},
	} {
		t.Run(string(tc.guard), func(t *testing.T) {
			t.Parallel()
			cfg := harness.DefaultConfig()
			cfg.Store, cfg.Workload, cfg.Guard = t.TempDir(), harness.WorkloadListAppend, tc.guard
			cfg.Lease = 200 * time.Millisecond
			cfg.Pause, cfg.InjectEvery, cfg.Nemesis = 2*cfg.Lease, 3, "none"
			cfg.TimeLimit = 2 * time.Second
			res, err := harness.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			r, ok := res.Results.Check(checker.ModelListAppend)
			f, _ := res.Results.LockFigures()
			if !ok || r.Valid != tc.valid || !f.Counted {
				t.Fatalf("list-append %v (counted %v), want %v: %s", r.Valid, f.Counted, tc.valid, res.Results.AppendEDN(nil))
			}
			if tc.valid == checker.Invalid && (f.LostMin == 0 || !strings.Contains(r.Explanation, "appended by op")) {
				t.Errorf("lost %d: %s; want appends named lost", f.LostMin, r.Explanation)
			}
			if tc.guard == client.GuardCAS && f.ChangeRejected == 0 {
				t.Errorf("change-rejected 0: the pauses should have made cas refuse a write")
			}
			test, err := os.ReadFile(filepath.Join(res.Dir, store.Test))
			if err != nil || !strings.Contains(string(test), ":workload :list-append") || !strings.Contains(string(test), ":model :list-append") {
				t.Errorf("test.edn %s (%v): want the workload and its model", test, err)
			}
			appends := 0
			for _, o := range readOps(t, res.Dir) {
				if o.F == history.FAppend && o.Type == history.Ok {
					appends++
				}
			}
			if int64(appends) != f.Writes {
				t.Errorf("history has %d ok appends, results say %d writes", appends, f.Writes)
			}
			h, err := checker.Open(context.Background(), filepath.Join(res.Dir, store.History), checker.Options{}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			again, err := h.Check(context.Background(), checker.Options{})
			if err != nil || again.Valid != res.Results.Valid {
				t.Errorf("the saved history checks %v (%v), the run said %v", again.Valid, err, res.Results.Valid)
			}
		})
	}
}
