package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/store"
)

// CellFile is what a cell made apart from its comparison leaves beside its
// run: the grid it belongs to and the run's figures, for Collect.
const CellFile = "cell.json"

// A Cell is one run of a grid: run Run of row Row, both from 0. Its Index,
// Row*runs+Run, is its place in the order one process makes a grid's runs,
// and the index a Kubernetes Indexed Job gives the pod that makes it.
type Cell struct {
	Index int `json:"index"`
	Row   int `json:"row"`
	Run   int `json:"run"`
}

// Cells lists the cells of a grid of rows × runs, in the order one process
// makes them: a row's runs one after another.
func Cells(rows, runs int) []Cell {
	out := make([]Cell, rows*runs)
	for i := range out {
		out[i] = cellAt(i, runs)
	}
	return out
}

// cellAt is the cell of index i in a grid of runs runs a row.
func cellAt(i, runs int) Cell { return Cell{Index: i, Row: i / runs, Run: i % runs} }

// Cells lists the plan's cells.
func (p Plan) Cells() []Cell { return Cells(len(p.Setups), p.Runs) }

// Describe says in one line what cell c of the plan is: its index, row and
// run, and the row's setup.
func (p Plan) Describe(c Cell) string {
	s := p.Setups[c.Row]
	return fmt.Sprintf("%d\trow %d run %d\t%s, %s, seed %d", c.Index, c.Row+1, c.Run+1, s.Short(), s.PauseLabel(), p.Config(s, c.Run).Seed)
}

// A Header is what every cell of a grid shares, and what its table says
// above the rows: cells made apart are one grid when their headers are one.
type Header struct {
	Kind    string        `json:"kind"`
	Command string        `json:"command"`
	Runs    int           `json:"runs"`
	Seed    int64         `json:"seed"`
	Workers int           `json:"workers"`
	Limit   time.Duration `json:"time_limit"`
	Work    time.Duration `json:"work"`
	Setups  []Setup       `json:"setups"`
}

// Header is the plan's header.
func (p Plan) Header() Header {
	return Header{Kind: p.Kind, Command: p.Command, Runs: p.Runs, Seed: p.Base.Seed, Workers: p.Base.Workers,
		Limit: p.Base.TimeLimit, Work: p.Base.Work, Setups: p.Setups}
}

// Table starts the table of the grid, with no runs yet.
func (h Header) Table(started time.Time, versions string) *Table {
	t := &Table{Kind: h.Kind, Command: h.Command, Started: started, Versions: versions,
		Workers: h.Workers, Limit: h.Limit, Work: h.Work, Runs: h.Runs}
	t.Fill(h.Setups, nil)
	return t
}

// A Result is the figures of one cell.
type Result struct {
	Cell    Cell    `json:"cell"`
	Figures Figures `json:"figures"`
}

// Fill sets the table's rows to setups, each with the figures of its cells
// among results in the order of their runs. It is the one way a table gets
// its rows, whether its cells ran in one process or were collected.
func (t *Table) Fill(setups []Setup, results []Result) {
	t.Rows = make([]Row, len(setups))
	for i, s := range setups {
		t.Rows[i].Setup = s
	}
	results = slices.Clone(results)
	slices.SortStableFunc(results, func(a, b Result) int { return a.Cell.Index - b.Cell.Index })
	for _, r := range results {
		if r.Cell.Row >= 0 && r.Cell.Row < len(t.Rows) {
			t.Rows[r.Cell.Row].Runs = append(t.Rows[r.Cell.Row].Runs, r.Figures)
		}
	}
}

// A Record is what a cell made apart leaves in its CellFile.
type Record struct {
	Grid     Header    `json:"grid"`
	Started  time.Time `json:"started"`
	Versions string    `json:"versions"`
	Result
}

// CellDir is where cell index of a grid made apart goes, inside the grid's
// directory.
func CellDir(index int) string { return "cell-" + strconv.Itoa(index) }

// MakeCell makes cell index of p alone, as one pod of a Kubernetes Indexed
// Job does: an ordinary run in gridDir/cell-INDEX/, its record beside it in
// cell.json. It starts throwaway servers for the run unless p.Base names
// servers. Collect tabulates the cells of a grid's directory.
func MakeCell(ctx context.Context, p Plan, index int, gridDir string) (Record, error) {
	cells := p.Cells()
	if index < 0 || index >= len(cells) {
		return Record{}, &harness.SetupError{Err: fmt.Errorf("--cell %d: the grid has %d cells, 0 to %d (hiatus compare --list-cells lists them)",
			index, len(cells), len(cells)-1)}
	}
	c := cells[index]
	start := time.Now()
	dir := filepath.Join(gridDir, CellDir(index))
	base := p.Base
	versions, stop, err := startServers(ctx, &base, dir)
	if err != nil {
		return Record{}, err
	}
	defer stop()
	p.Base = base
	cfg := p.Config(p.Setups[c.Row], c.Run)
	cfg.Store = dir
	f, err := runCell(ctx, cfg, gridDir)
	if err != nil {
		return Record{}, fmt.Errorf("cell %d (%s, run %d): %w", index, p.Setups[c.Row].Short(), c.Run+1, err)
	}
	if err := ctx.Err(); err != nil {
		return Record{}, err // a run cut short is not comparable with the others
	}
	rec := Record{Grid: p.Header(), Started: start, Versions: versions, Result: Result{Cell: c, Figures: f}}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return Record{}, fmt.Errorf("cell %d: %w", index, err)
	}
	if err := (store.Run{Dir: dir}).WriteFile(CellFile, append(b, '\n')); err != nil {
		return Record{}, fmt.Errorf("cell %d: %w", index, err)
	}
	return rec, nil
}

// runCell makes the run cfg and returns its figures, with its directory as
// the run gave it and as a path inside root, the comparison's directory.
func runCell(ctx context.Context, cfg harness.Config, root string) (Figures, error) {
	res, err := harness.Run(ctx, cfg)
	if err == nil {
		err = res.Leftover // what it left would pile up, run after run
	}
	if err != nil {
		return Figures{}, err
	}
	f := FiguresOf(res.Results)
	f.Dir, f.Seed = res.Dir, cfg.Seed
	if f.Path, err = filepath.Rel(root, res.Dir); err != nil {
		return Figures{}, fmt.Errorf("compare: %w", err)
	}
	f.Path = filepath.ToSlash(f.Path)
	return f, nil
}

// A MissingError says which cells of a collected grid were not found.
type MissingError struct {
	Dir     string
	Missing []int
	Cells   int
}

func (e *MissingError) Error() string {
	var b strings.Builder
	for i, m := range e.Missing {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == 10 {
			fmt.Fprintf(&b, "and %d more", len(e.Missing)-i)
			break
		}
		b.WriteString(strconv.Itoa(m))
	}
	return fmt.Sprintf("%s: %d of %d cells have no %s (%s): the table lacks their runs", e.Dir, len(e.Missing), e.Cells, CellFile, b.String())
}

// Collect tabulates the cells MakeCell made in dir into the same table a
// grid made in one process has, and writes its files into dir. Its runs'
// directories are found where dir holds them now. Cells missing leave the
// table incomplete, written all the same, and a *MissingError; cells of
// another grid, or a record that cannot be read, are an error naming its
// file, before anything is written.
func Collect(dir string) (*Table, error) {
	recs, err := readRecords(dir)
	if err != nil {
		return nil, err
	}
	h := recs[0].Grid
	var versions []string
	started := recs[0].Started
	results := make([]Result, 0, len(recs))
	for _, r := range recs {
		if r.Started.Before(started) {
			started = r.Started
		}
		if !slices.Contains(versions, r.Versions) {
			versions = append(versions, r.Versions)
		}
		r.Figures.Dir = filepath.Join(dir, filepath.FromSlash(r.Figures.Path))
		results = append(results, r.Result)
	}
	t := h.Table(started, strings.Join(versions, "; "))
	t.Fill(h.Setups, results)
	if err := Write(dir, t); err != nil {
		return t, err
	}
	have := make([]bool, len(h.Setups)*h.Runs)
	for _, r := range recs {
		have[r.Cell.Index] = true
	}
	var missing []int
	for i, ok := range have {
		if !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		return t, &MissingError{Dir: dir, Missing: missing, Cells: len(have)}
	}
	return t, nil
}

// readRecords reads every cell's record in dir, checking that they are
// cells of one grid, each where its index says.
func readRecords(dir string) ([]Record, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("--collect: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("--collect %s: not a directory", dir)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "cell-*", CellFile))
	if err != nil {
		return nil, fmt.Errorf("--collect %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("--collect %s: no cell-N/%s here: hiatus compare --cell N --grid-dir %s makes cell N", dir, CellFile, dir)
	}
	var recs []Record
	var first []byte
	for _, p := range paths {
		r, grid, err := readRecord(p)
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = grid
		} else if !bytes.Equal(grid, first) {
			return nil, fmt.Errorf("%s: a cell of another grid than %s's (its command, seed or rows differ)", p, paths[0])
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// readRecord reads the record at path, and its grid as JSON, to compare.
func readRecord(path string) (Record, []byte, error) {
	var r Record
	b, err := os.ReadFile(path)
	if err != nil {
		return r, nil, fmt.Errorf("--collect: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, nil, fmt.Errorf("%s: %w", path, err)
	}
	h := r.Grid
	cells := len(h.Setups) * h.Runs
	switch {
	case cells == 0:
		return r, nil, fmt.Errorf("%s: not a cell's record: it names no grid", path)
	case r.Cell.Index < 0 || r.Cell.Index >= cells || r.Cell != cellAt(r.Cell.Index, h.Runs):
		return r, nil, fmt.Errorf("%s: cell %+v is not a cell of its %d-cell grid", path, r.Cell, cells)
	case filepath.Base(filepath.Dir(path)) != CellDir(r.Cell.Index):
		return r, nil, fmt.Errorf("%s: the record of cell %d, in the directory of another", path, r.Cell.Index)
	case r.Figures.Path == "" || !filepath.IsLocal(filepath.FromSlash(r.Figures.Path)):
		return r, nil, errors.New(path + ": the cell's run directory is missing or outside the grid's directory")
	}
	grid, err := json.Marshal(h)
	return r, grid, err
}
