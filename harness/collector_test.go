package harness

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/store"
)

// fullDisk takes n bytes, then refuses every write.
type fullDisk struct{ n int }

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) > d.n {
		return 0, errors.New("no space left on device")
	}
	d.n -= len(p)
	return len(p), nil
}

// TestJournalRefused: ops the journal cannot take are counted and the
// first refusal kept; the history made from what it took is checked, and
// the verdict is unknown, saying why.
func TestJournalRefused(t *testing.T) {
	run, err := store.Create(t.TempDir(), "t", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(run.Path(store.Journal))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops := []history.Op{
		{Time: 1, Type: history.Invoke, Process: 0, F: history.FRead},
		{Time: 2, Type: history.Ok, Process: 0, F: history.FRead, Value: int64(0)},
	}
	col := newCollector(f, 1)
	for _, o := range ops {
		col.record(o)
	}
	col.journal = history.NewWriter(&fullDisk{})
	col.record(history.Op{Time: 3, Type: history.Invoke, Process: 0, F: history.FWrite, Value: int64(1)})
	n, _, _, jerr := col.stats()
	if n != 3 || jerr == nil || !strings.Contains(jerr.Error(), "no space left") {
		t.Fatalf("%d ops, error %v; want 3 and the disk's refusal", n, jerr)
	}
	lg, err := newRunLog(run, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.close()
	lg.out = &strings.Builder{}
	rs, err := finish(context.Background(), DefaultConfig(), &env{}, run, col, lg)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Valid != checker.Unknown || !strings.Contains(string(rs.AppendEDN(nil)), "no space left") {
		t.Errorf("results %s: want :unknown, saying the journal was refused", rs.AppendEDN(nil))
	}
	got, err := history.ReadFile(run.Path(store.History))
	if err != nil || len(got) != 2 {
		t.Errorf("history: %d ops (%v), want the 2 the journal took", len(got), err)
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
