package compare

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// fuzzSeeds are records and results.edn for FuzzCellRecord to start from:
// a real cell's, and the hostile ones of issue 34.
func fuzzSeeds(f *testing.F) (records [][]byte, results [][]byte) {
	ops, _, err := gen.Ops(gen.Config{Sections: 20, Workers: 2, Lost: 1, Info: 2, Seed: 1})
	if err != nil {
		f.Fatal(err)
	}
	rs, err := checker.Check(context.Background(), ops, checker.Options{Model: checker.ModelLockCounter})
	if err != nil {
		f.Fatal(err)
	}
	p := collectPlan()
	c := p.Cells()[3]
	fig := FiguresOf(rs)
	fig.Path, fig.Seed = "cell-3/grid-setnx-500ms-sigstop/19700101T000003.000Z", p.Base.Seed+int64(c.Run)
	good := Record{Grid: p.Header(), Started: time.Unix(97, 0), Versions: "Redis 7", Result: Result{Cell: c, Figures: fig}}
	enc := func(fn func(*Record)) []byte {
		r := good
		r.Grid.Setups = slices.Clone(r.Grid.Setups)
		fn(&r)
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	records = [][]byte{
		enc(func(*Record) {}),
		enc(func(r *Record) { r.Grid.Runs, r.Cell = 1e9, Cell{0, 0, 0} }),
		enc(func(r *Record) { r.Grid.Setups = slices.Repeat(r.Grid.Setups, 2); r.Grid.Runs = 1<<62 + 1 }),
		enc(func(r *Record) { r.Figures.Writes = -5 }),
		enc(func(r *Record) { r.Figures.LostMin = r.Figures.LostMax + 1 }),
		enc(func(r *Record) { r.Figures.Path = "../x" }),
		[]byte(`{"grid":{"kind":"grid","runs":1,"workers":1,"setups":[` + strings.Repeat("{},", 20000) + `{}]}}`),
		[]byte("{"),
	}
	results = [][]byte{rs.AppendEDN(nil), []byte(strings.Repeat("[", 1000)), []byte("{:valid? true}"), []byte(`#{1 #_ 2} [\] "]"]`)}
	return records, results
}

// FuzzCellRecord: whatever a cell's record and its run's results.edn
// hold, ParseRecord and CheckResults return, without panicking; a record
// accepted keeps the rules Collect relies on (a grid within bounds, its
// cell one of the grid's, figures a run can have), reads the same again
// once written, and tabulates.
func FuzzCellRecord(f *testing.F) {
	records, results := fuzzSeeds(f)
	for i, r := range records {
		f.Add(r, results[i%len(results)])
	}
	f.Fuzz(func(t *testing.T, record, results []byte) {
		r, err := ParseRecord(record)
		if err != nil {
			CheckResults(Figures{Valid: checker.Unknown.String()}, results)
			return
		}
		checkAccepted(t, r)
		if err := CheckResults(r.Figures, results); err == nil && len(results) > maxResultsFile {
			t.Fatalf("results of %d bytes accepted", len(results))
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRecord(b)
		if err != nil || !again.Started.Equal(r.Started) {
			t.Fatalf("the record, written again, reads %v, started %v, not %v", err, again.Started, r.Started)
		}
		again.Started = r.Started
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("the record, written again, reads\n%+v\nnot\n%+v", again, r)
		}
		tab := r.Grid.Table(r.Started, r.Versions)
		tab.Fill(r.Grid.Setups, []Result{r.Result})
		tab.Markdown()
		tab.CSV()
		if _, err := tab.JSON(); err != nil {
			t.Fatal(err)
		}
	})
}

// checkAccepted fails t if r breaks a rule ParseRecord is to keep, each
// said again here as plainly as it can be.
func checkAccepted(t *testing.T, r Record) {
	t.Helper()
	h, f := r.Grid, r.Figures
	rows, runs := len(h.Setups), h.Runs
	switch {
	case !slices.Contains(kinds, h.Kind):
		t.Fatalf("kind %q accepted", h.Kind)
	case rows < 1 || rows > MaxRows || runs < 1 || runs > MaxRuns || rows*runs > MaxCells:
		t.Fatalf("a grid of %d rows × %d runs accepted", rows, runs)
	case r.Cell.Index < 0 || r.Cell.Index >= rows*runs || r.Cell.Row != r.Cell.Index/runs || r.Cell.Run != r.Cell.Index%runs:
		t.Fatalf("cell %+v of a grid of %d rows × %d runs accepted", r.Cell, rows, runs)
	case f.LostMin > f.LostMax || f.LeasedSections > f.Sections:
		t.Fatalf("figures %+v accepted", f)
	case len(f.Path) == 0 || len(f.Path) > maxText || len(r.Versions) > maxText || f.Dir != "":
		t.Fatalf("path %d bytes, versions %d bytes, dir %q accepted", len(f.Path), len(r.Versions), f.Dir)
	case !slices.Contains([]string{"true", "false", ":unknown"}, f.Valid):
		t.Fatalf("verdict %q accepted", f.Valid)
	}
	for _, n := range []int64{f.Sections, f.LeasedSections, f.Writes, f.InfoWrites, f.LostMin, f.LostMax, f.ProvenWrites, f.Overlapping,
		f.LockOverlapping, f.StaleRejected, f.ChangeRejected, f.LateWrites, f.FenceViolations, f.Pauses, f.Faults, f.InfoOps} {
		if n < 0 {
			t.Fatalf("a negative count accepted: %+v", f)
		}
	}
}
