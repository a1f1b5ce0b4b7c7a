package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/internal/gen"
	"github.com/hiatus-dev/hiatus/store"
)

// collectPlan is the grid the collect tests make apart: 2 rows × 2 runs.
func collectPlan() Plan {
	p := Plan{Kind: "grid", Runs: 2, Name: "grid", Command: "hiatus compare --locks setnx --pauses none,sigstop --runs 2",
		Setups: Grid(faults, []string{"setnx"}, []string{PauseNone, PauseSigStop}, []bool{false}, 500*time.Millisecond)}
	p.Base.Workers, p.Base.Seed, p.Base.TimeLimit = 3, 5, time.Second
	return p
}

// makeCells makes in dir every cell of p as MakeCell leaves it, and
// returns their records.
func makeCells(t *testing.T, dir string, p Plan) []Record {
	t.Helper()
	var recs []Record
	for _, c := range p.Cells() {
		recs = append(recs, makeCell(t, dir, p, c))
	}
	return recs
}

// makeCell makes cell c of p in dir: its run directory, holding the
// results.edn of a real check of a generated history (10×(index+1)
// sections, an update lost in odd cells), and its record.
func makeCell(t *testing.T, dir string, p Plan, c Cell) Record {
	t.Helper()
	ops, _, err := gen.Ops(gen.Config{Sections: 10 * (c.Index + 1), Workers: 2, Lost: c.Index % 2, Seed: int64(c.Index)})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := checker.Check(context.Background(), ops, checker.Options{Model: checker.ModelLockCounter})
	if err != nil {
		t.Fatal(err)
	}
	cfg := p.Config(p.Setups[c.Row], c.Run)
	run := path.Join(CellDir(c.Index), cfg.Name, time.Unix(int64(c.Index), 0).UTC().Format(store.TimeLayout))
	mkfile(t, filepath.Join(dir, filepath.FromSlash(run), store.Results), rs.AppendEDN(nil))
	f := FiguresOf(rs)
	f.Dir, f.Path, f.Seed = "/pod/grid/"+run, run, cfg.Seed
	r := Record{Grid: p.Header(), Started: time.Unix(int64(100-c.Index), 0), Versions: "Redis 7", Result: Result{Cell: c, Figures: f}}
	writeRecord(t, dir, CellDir(c.Index), r)
	return r
}

// writeRecord writes r as the record in dir/cellDir.
func writeRecord(t *testing.T, dir, cellDir string, r Record) {
	t.Helper()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	mkfile(t, filepath.Join(dir, cellDir, CellFile), b)
}

func mkfile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A collectCase is what goes wrong in a grid's directory, and the words
// Collect's error must have (none: the grid is whole).
type collectCase struct {
	name  string
	plant func(t *testing.T, dir string, recs []Record)
	want  []string
}

// edit rewrites the record of cell i with fn's changes.
func edit(i int, fn func(*Record)) func(*testing.T, string, []Record) {
	return func(t *testing.T, dir string, recs []Record) {
		r := recs[i]
		fn(&r)
		writeRecord(t, dir, CellDir(i), r)
	}
}

// alone leaves cell 0 alone in dir, its record changed by fn: a record
// consistent by itself, with no other to disagree with it.
func alone(fn func(*Record)) func(*testing.T, string, []Record) {
	return func(t *testing.T, dir string, recs []Record) {
		for i := 1; i < len(recs); i++ {
			must(t, os.RemoveAll(filepath.Join(dir, CellDir(i))))
		}
		edit(0, fn)(t, dir, recs)
	}
}

// replace puts what make makes where cell i's record was.
func replace(i int, make func(path string) error) func(*testing.T, string, []Record) {
	return func(t *testing.T, dir string, _ []Record) {
		p := filepath.Join(dir, CellDir(i), CellFile)
		must(t, os.Remove(p))
		if err := make(p); err != nil {
			t.Skipf("cannot make it: %v", err)
		}
	}
}

// linkOut moves name, inside dir, out of it, and links its name to where
// it went.
func linkOut(name string) func(*testing.T, string, []Record) {
	return func(t *testing.T, dir string, _ []Record) {
		out := filepath.Join(t.TempDir(), filepath.Base(name))
		must(t, os.Rename(filepath.Join(dir, name), out))
		must(t, os.Symlink(out, filepath.Join(dir, name)))
	}
}

// collectCases are the grids' directories of TestCollect: whole, with a
// cell missing, and each way a record or its run may be wrong.
func collectCases() []collectCase {
	p := collectPlan()
	runName := p.Config(p.Setups[1], 1).Name
	return []collectCase{
		{"whole", func(*testing.T, string, []Record) {}, nil},
		{"missing", func(t *testing.T, dir string, _ []Record) {
			must(t, os.Remove(filepath.Join(dir, CellDir(2), CellFile)))
		},
			[]string{"1 of 4 cells have no cell.json (2)"}},
		{"other grid", edit(3, func(r *Record) { r.Grid.Command += " --fencing on" }), []string{"cell-3/cell.json: a cell of another grid"}},
		{"moved", func(t *testing.T, dir string, recs []Record) {
			must(t, os.Rename(filepath.Join(dir, CellDir(3)), filepath.Join(dir, "cell-9")))
			r := recs[3]
			r.Figures.Path = strings.Replace(r.Figures.Path, CellDir(3), "cell-9", 1)
			writeRecord(t, dir, "cell-9", r)
		}, []string{"cell-9/cell.json: the record of cell 3, in the directory of another"}},
		{"not a cell", edit(3, func(r *Record) { r.Cell = Cell{3, 0, 1} }), []string{"cell-3/cell.json: cell: {Index:3 Row:0 Run:1} is not a cell of its 4-cell grid"}},
		{"outside", edit(3, func(r *Record) { r.Figures.Path = "../x" }), []string{"cell-3/cell.json: figures.path"}},
		{"garbled", replace(1, func(p string) error { return os.WriteFile(p, []byte("{"), 0o644) }), []string{"cell-1/cell.json: unexpected end of JSON input"}},

		// Issue 34, defect 5: one record hangs or exhausts the collector.
		{"fifo", replace(1, func(p string) error { return syscall.Mkfifo(p, 0o644) }), []string{"cell-1/cell.json", "a named pipe"}},
		{"link to /dev/zero", replace(1, func(p string) error { return os.Symlink("/dev/zero", p) }), []string{"cell-1/cell.json", "symbolic link"}},
		{"device", replace(1, func(p string) error { return syscall.Mknod(p, syscall.S_IFCHR|0o644, 1<<8|5) }), []string{"cell-1/cell.json", "a device"}},
		{"too large", replace(1, func(p string) error { return os.WriteFile(p, make([]byte, 3<<20), 0o644) }), []string{"cell-1/cell.json", "larger than hiatus reads"}},
		{"terminal escapes", alone(func(r *Record) { r.Grid.Command += "\x1b[2J\x1b[H\nrecurred: all valid" }), []string{"cell-0/cell.json: grid.command"}},
		{"a long command", alone(func(r *Record) { r.Grid.Command += strings.Repeat("x", maxText) }), []string{"cell-0/cell.json: grid.command"}},
		{"a billion runs", alone(func(r *Record) { r.Grid.Runs = 1e9 }), []string{"cell-0/cell.json: grid.runs: 1000000000"}},
		{"cells wrap", alone(func(r *Record) { r.Grid.Setups = slices.Repeat(r.Grid.Setups, 2); r.Grid.Runs = 1<<62 + 1 }),
			[]string{"cell-0/cell.json: grid.runs: 4611686018427387905"}},
		{"too many rows", alone(func(r *Record) { r.Grid.Setups = slices.Repeat(r.Grid.Setups[:1], MaxRows+1) }),
			[]string{"cell-0/cell.json: grid.setups: more than 2000 rows"}},

		// Issue 34, defect 13: figures and paths the run does not bear out.
		{"no run", func(t *testing.T, dir string, recs []Record) {
			must(t, os.RemoveAll(filepath.Join(dir, filepath.FromSlash(recs[3].Figures.Path))))
		}, []string{"cell-3/cell.json: figures.path", "no such file"}},
		{"negative", edit(3, func(r *Record) { r.Figures.Writes = -5 }), []string{"cell-3/cell.json: figures.writes: -5"}},
		{"lost range", edit(3, func(r *Record) { r.Figures.LostMin = r.Figures.LostMax + 1 }), []string{"cell-3/cell.json: figures.lost-min"}},
		{"seed", edit(3, func(r *Record) { r.Figures.Seed = 99 }), []string{"cell-3/cell.json: figures.seed: 99"}},
		{"figures not the run's", edit(3, func(r *Record) { r.Figures.Writes++ }), []string{"results.edn: figures.writes", "but results.edn says"}},
		{"verdict not the run's", edit(3, func(r *Record) { r.Figures.Valid = "true" }), []string{"results.edn: figures.valid: true, but results.edn says false"}},
		{"nested results", func(t *testing.T, dir string, recs []Record) {
			mkfile(t, filepath.Join(dir, filepath.FromSlash(recs[3].Figures.Path), store.Results), []byte(strings.Repeat("[", 1000)))
		}, []string{"results.edn: values nested deeper than hiatus reads"}},
		{"run of another cell", edit(3, func(r *Record) { r.Figures.Path = strings.Replace(r.Figures.Path, CellDir(3), CellDir(2), 1) }),
			[]string{"cell-3/cell.json: figures.path", "not a run of this cell"}},
		{"cell links out", linkOut(CellDir(3)), []string{"cell-3: a symbolic link"}},
		{"run links out", linkOut(filepath.Join(CellDir(3), runName)), []string{"cell-3/cell.json: figures.path", "a symbolic link"}},

		// Issue 34, defect 9: a second record of a cell.
		{"two records", func(t *testing.T, dir string, recs []Record) {
			r := recs[3]
			r.Figures.Path = strings.Replace(r.Figures.Path, CellDir(3), "cell-03", 1)
			must(t, os.MkdirAll(filepath.Join(dir, "cell-03"), 0o755))
			must(t, os.Rename(filepath.Join(dir, CellDir(3), runName), filepath.Join(dir, "cell-03", runName)))
			writeRecord(t, dir, "cell-03", r)
			makeCell(t, dir, collectPlan(), recs[3].Cell)
		}, []string{"cell-03/cell.json and ", "cell-3/cell.json: two records of cell 3"}},
	}
}

// TestCollect: cells made apart are tabulated as one process tabulates
// them, their runs found where the grid's directory holds them now, each
// run's figures its results.edn's; cells missing leave the table
// incomplete, written, and a MissingError naming them. A record of
// another grid, in another cell's directory, a second of one cell, one
// that cannot be read without waiting or without end (a pipe, a device,
// a grid too large to tabulate), or whose figures or run its results do
// not bear out, is refused naming its file and field, before anything is
// written.
func TestCollect(t *testing.T) {
	for _, tc := range collectCases() {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			recs := makeCells(t, dir, collectPlan())
			tc.plant(t, dir, recs)
			tab, err := Collect(dir)
			t.Logf("Collect: %v", err)
			var missing *MissingError
			errors.As(err, &missing)
			if len(tc.want) == 0 && err != nil || len(tc.want) > 0 && err == nil {
				t.Fatalf("Collect: %v, want %q", err, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("Collect: %v, want %q", err, w)
				}
			}
			if err != nil && missing == nil {
				if _, serr := os.Lstat(filepath.Join(dir, TableJSON)); serr == nil || tab != nil {
					t.Errorf("a refused collection wrote its table")
				}
				return
			}
			checkCollected(t, dir, tab, recs, missing != nil)
		})
	}
}

// checkCollected checks that tab has the figures of recs, but for cell 2
// when it is missing.
func checkCollected(t *testing.T, dir string, tab *Table, recs []Record, missing bool) {
	t.Helper()
	for i, r := range tab.Rows {
		var got, want []int64
		for _, f := range r.Runs {
			got = append(got, f.Writes)
			if wantDir := filepath.Join(dir, filepath.FromSlash(f.Path)); f.Dir != wantDir {
				t.Errorf("row %d: run dir %s, want %s", i+1, f.Dir, wantDir)
			}
		}
		for _, rec := range recs {
			if rec.Cell.Row == i && !(missing && rec.Cell.Index == 2) {
				want = append(want, rec.Figures.Writes)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("row %d: writes %v, want %v", i+1, got, want)
		}
	}
	if !tab.Started.Equal(time.Unix(97, 0)) || tab.Complete() == missing || tab.Command != recs[0].Grid.Command {
		t.Errorf("started %v, complete %v, command %q; want the first cell's start, %v, %q", tab.Started, tab.Complete(), tab.Command, !missing, recs[0].Grid.Command)
	}
	if _, err := os.Stat(filepath.Join(dir, TableJSON)); err != nil {
		t.Errorf("no table.json: %v", err)
	}
}

// TestCollectListsDir: --collect DIR reads the cells of DIR, whatever its
// name: a name that is a glob pattern neither takes in other grids' cells
// (issue 34, defect 9: g* took g1's) nor misses its own.
func TestCollectListsDir(t *testing.T) {
	root := t.TempDir()
	p := collectPlan()
	glob, other, brackets := filepath.Join(root, "g*"), filepath.Join(root, "g1"), filepath.Join(root, "grid[1]")
	for _, dir := range []string{glob, other, brackets} {
		makeCells(t, dir, p)
	}
	for _, i := range []int{2, 3} {
		must(t, os.RemoveAll(filepath.Join(glob, CellDir(i))))
	}
	tab, err := Collect(glob)
	var missing *MissingError
	if !errors.As(err, &missing) || !slices.Equal(missing.Missing, []int{2, 3}) || tab.Complete() || len(tab.Rows[0].Runs) != 2 || len(tab.Rows[1].Runs) != 0 {
		t.Errorf("Collect(g*): %v; want cells 2 and 3 missing, g1's not taken", err)
	}
	if tab, err := Collect(brackets); err != nil || !tab.Complete() {
		t.Errorf("Collect(grid[1]): %v", err)
	}
}

// TestCollectPlantedLinks: a link planted in the grid's directory where
// the table's files go is replaced by the file, not written through
// (issue 34, defect 2: table.md -> /some/file was overwritten, and
// runs.txt -> /x made /x).
func TestCollectPlantedLinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	makeCells(t, dir, collectPlan())
	secret := filepath.Join(outside, "secret")
	mkfile(t, secret, []byte("keep"))
	must(t, os.Symlink(secret, filepath.Join(dir, TableMarkdown)))
	must(t, os.Symlink(filepath.Join(outside, "x"), filepath.Join(dir, RunList)))
	must(t, os.Symlink(filepath.Join(outside, "y"), filepath.Join(dir, PlotPNG)))
	if _, err := Collect(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "keep" {
		t.Errorf("the file table.md linked to holds %q (%v)", b, err)
	}
	if es, _ := os.ReadDir(outside); len(es) != 1 {
		t.Errorf("the links made files outside the grid: %v", es)
	}
	for _, name := range []string{TableMarkdown, RunList, PlotPNG} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v, %v; want a regular file", name, fi.Mode(), err)
		}
	}
}

// TestParseRecordBounded: a record of more rows than a grid may have is
// refused before its rows are decoded: 600,000 empty rows, 1.8 MB of JSON
// (under the 2 MiB a record may take), would be hundreds of megabytes of
// Setups; reading it allocates a few times its size.
func TestParseRecordBounded(t *testing.T) {
	b := []byte(`{"grid":{"kind":"grid","runs":1,"workers":1,"setups":[` + strings.Repeat("{},", 600_000) + `{}]}}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ParseRecord(b)
	runtime.ReadMemStats(&after)
	if !strings.Contains(fmt.Sprint(err), "grid.setups: more than 2000 rows") {
		t.Errorf("ParseRecord: %v, want the rows refused", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
		t.Errorf("reading a record of %d bytes allocated %d MB", len(b), n>>20)
	}
}

// TestRealGridsCollectable: every kind of grid hiatus makes, at its
// largest choices, is one --collect takes: the bounds and rules of a
// record refuse no real grid.
func TestRealGridsCollectable(t *testing.T) {
	all := strings.Join(ScenarioNames(), ",")
	for _, ch := range []Choices{
		{},
		{Locks: "setnx,renew,redsync,redislock,pg-advisory,redlock,etcd,redsync-extend,etcd-v3lock,exec:python3 a.py",
			Pauses: strings.Join(PauseChoices(), ","), Fencing: "both"},
		{Locks: "setnx,renew,redsync,redislock,pg-advisory,redlock,etcd,redsync-extend,etcd-v3lock,exec:python3 a.py",
			Pauses: "sigstop,sleep,stop,stop-waiters", Fencing: "both", Sweep: "pause/lease=0.1..10", Steps: 12, StepsGiven: true},
		{Scenario: all},
	} {
		ch.Faults, ch.Lease = faults, 500*time.Millisecond
		kind, setups, err := ch.Setups()
		if err != nil {
			t.Fatal(err)
		}
		p := Plan{Kind: kind, Setups: setups, Runs: MaxCells / MaxRows, Command: "hiatus compare"}
		p.Base.Workers, p.Base.TimeLimit, p.Base.Seed = 3, time.Second, 1
		if err := p.Header().check(); err != nil {
			t.Errorf("%s of %d rows: %v", kind, len(setups), err)
		}
		t.Logf("%s: %d rows", kind, len(setups))
	}
}
