package harness

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/store"
)

// fullDisk passes n bytes to w, then refuses every write, as a disk that
// fills up does: a write it cuts short is written in part.
type fullDisk struct {
	w io.Writer
	n int
}

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) > d.n {
		k, _ := d.w.Write(p[:d.n])
		d.n = 0
		return k, errors.New("no space left on device")
	}
	d.n -= len(p)
	return d.w.Write(p)
}

// TestOpsMissing: ops the run could not record — a journal the disk cut
// short inside an op, or fewer ops in the journal than were recorded — are
// said by an :ops-missing event at the end of the history, which makes
// its check unknown, then and on any later check of the history alone.
func TestOpsMissing(t *testing.T) {
	ops := []history.Op{
		{Time: 1, Type: history.Invoke, Process: 0, F: history.FRead},
		{Time: 2, Type: history.Ok, Process: 0, F: history.FRead, Value: int64(0)},
		{Time: 3, Type: history.Invoke, Process: 0, F: history.FWrite, Value: int64(1)},
	}
	for _, tc := range []struct {
		name  string
		room  int // bytes the disk takes; 0: all
		extra int // ops the collector counts beyond the journal's
		want  string
	}{
		{"disk full", 150, 0, "no space left"},
		{"ops lost", 0, 1, "the journal gave 3 ops of the 4 recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := store.Create(t.TempDir(), "t", time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Create(run.Path(store.Journal))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var jw io.Writer = f
			if tc.room > 0 {
				jw = &fullDisk{w: f, n: tc.room}
			}
			col := newCollector(jw, 1)
			for _, o := range ops {
				col.record(o)
			}
			col.ops += tc.extra
			lg, err := newRunLog(run, &strings.Builder{})
			if err != nil {
				t.Fatal(err)
			}
			defer lg.close()
			rs, err := finish(context.Background(), DefaultConfig().runPlan(), &env{}, run, col, lg)
			if err != nil {
				t.Fatal(err)
			}
			if rs.Valid != checker.Unknown || !strings.Contains(string(rs.AppendEDN(nil)), tc.want) {
				t.Errorf("results %s: want :unknown, saying %q", rs.AppendEDN(nil), tc.want)
			}
			got, err := history.ReadFile(run.Path(store.History))
			if err != nil {
				t.Fatal(err)
			}
			if last := got[len(got)-1]; last.F != history.FOpsMissing || !strings.Contains(last.Value.(string), tc.want) {
				t.Errorf("history ends with %v, want an :ops-missing event saying %q", last, tc.want)
			}
			again, err := checker.Check(context.Background(), got, checker.Options{Model: checker.ModelLockCounter})
			if err != nil || again.Valid != checker.Unknown {
				t.Errorf("the history checked again: %v (%v), want :unknown", again.Valid, err)
			}
		})
	}
}

// TestWorkerNotServing: output of a worker that is not ops is a protocol
// error that names the remedy when nothing it said was an op.
func TestWorkerNotServing(t *testing.T) {
	run, err := store.Create(t.TempDir(), "t", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	lg, err := newRunLog(run, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.close()
	col := newCollector(&strings.Builder{}, 1)
	col.wg.Add(1)
	col.read(0, strings.NewReader("PASS\nok  \tmy/pkg\t0.1s\n"), lg)
	errs := col.protocolErrors()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "harness.ServeWorker") {
		t.Errorf("protocol errors %v, want one naming harness.ServeWorker", errs)
	}
}
