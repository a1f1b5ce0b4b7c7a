package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/files"
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
//
// gridDir may be a volume others write too. The cell's directory, and the
// run's name inside it, are made or opened without following a link (one
// planted there is refused before anything starts); the run is then made
// by path (harness.Run), and afterwards found again from the directory
// held open since: a run that went elsewhere (the cell's directory
// swapped for a link meanwhile) is refused, and no record is written. The
// record is written into the directory held open, never through a link.
func MakeCell(ctx context.Context, p Plan, index int, gridDir string) (Record, error) {
	if err := p.Header().check(); err != nil {
		return Record{}, &harness.SetupError{Err: fmt.Errorf("--cell: a grid --collect would refuse: %w", err)}
	}
	cells := p.Cells()
	if index < 0 || index >= len(cells) {
		return Record{}, &harness.SetupError{Err: fmt.Errorf("--cell %d: the grid has %d cells, 0 to %d (hiatus compare --list-cells lists them)",
			index, len(cells), len(cells)-1)}
	}
	c := cells[index]
	cfg := p.Config(p.Setups[c.Row], c.Run)
	cell, err := openCell(gridDir, index, cfg.Name)
	if err != nil {
		return Record{}, &harness.SetupError{Err: fmt.Errorf("--cell %d: %w", index, err)}
	}
	defer cell.Close()
	start := time.Now()
	base := p.Base
	versions, stop, err := startServers(ctx, &base, cell.Path())
	if err != nil {
		return Record{}, err
	}
	defer stop()
	p.Base = base
	cfg = p.Config(p.Setups[c.Row], c.Run)
	cfg.Store = cell.Path()
	f, err := runCell(ctx, cfg, gridDir)
	if err == nil {
		err = ctx.Err() // a run cut short is not comparable with the others
	}
	if err == nil {
		if err = heldRun(cell, f); err != nil {
			err = &harness.SetupError{Err: err}
		}
	}
	if err != nil {
		return Record{}, fmt.Errorf("cell %d (%s, run %d): %w", index, p.Setups[c.Row].Short(), c.Run+1, err)
	}
	rec := Record{Grid: p.Header(), Started: start, Versions: versions, Result: Result{Cell: c, Figures: f}}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err == nil {
		err = cell.WriteFile(CellFile, append(b, '\n'))
	}
	if err != nil {
		return Record{}, fmt.Errorf("cell %d: %w", index, err)
	}
	return rec, nil
}

// openCell makes (or opens, for a retry) the directory of cell index in
// gridDir, and the directory of the run named name inside it, refusing a
// link at either.
func openCell(gridDir string, index int, name string) (*files.Dir, error) {
	grid, err := files.MakeDir(gridDir)
	if err != nil {
		return nil, err
	}
	defer grid.Close()
	cell, err := grid.MakeSub(CellDir(index))
	if err != nil {
		return nil, err
	}
	runs, err := cell.MakeSub(name)
	if err != nil {
		cell.Close()
		return nil, err
	}
	runs.Close()
	return cell, nil
}

// heldRun checks that the run f names, made by path, is in the cell's
// directory as it was held open before the run: found from it by plain
// names, no link among them.
func heldRun(cell *files.Dir, f Figures) error {
	err := errors.New("another directory")
	runs, start, rerr := runParent(cell, f.Path)
	if rerr == nil {
		defer runs.Close()
		var held, made fs.FileInfo
		if held, rerr = runs.Lstat(start); rerr == nil {
			made, rerr = os.Stat(f.Dir)
		}
		if rerr == nil && held.IsDir() && os.SameFile(held, made) {
			return nil
		}
	}
	if rerr != nil {
		err = rerr
	}
	return fmt.Errorf("the run %s is not in its cell's directory %s as it was: the directory, or one in it, was replaced while the run was made (%w)",
		f.Dir, cell.Path(), err)
}

// runParent opens, inside cell, the directory of the run whose path in the
// grid's directory is path, as a cell makes it — CELL/NAME/START-TIME,
// CELL the cell's own directory — and returns the directory NAME, opened
// without following a link, and START-TIME.
func runParent(cell *files.Dir, path string) (*files.Dir, string, error) {
	names := strings.Split(path, "/")
	if len(names) != 3 || names[0] != filepath.Base(cell.Path()) {
		return nil, "", fmt.Errorf("%q is not a run of this cell: want %s/NAME/START-TIME", path, filepath.Base(cell.Path()))
	}
	runs, err := cell.Sub(names[1])
	if err != nil {
		return nil, "", err
	}
	return runs, names[2], nil
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
// another grid, a record that cannot be read or that its run does not
// bear out (ParseRecord, CheckResults), are an error naming its file,
// before anything is written.
//
// dir is the directory the user named (its links followed); inside it,
// a volume others may write, no link is followed, no file but a regular
// one read, none beyond a bound (MaxCells cells, maxCellFile bytes a
// record), and the table's files are written by temporary file and
// rename, replacing whatever is at their names.
func Collect(dir string) (*Table, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("--collect: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("--collect %s: not a directory", dir)
	}
	grid, err := files.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--collect: %w", err)
	}
	defer grid.Close()
	h, cells, err := readRecords(grid)
	if err != nil {
		return nil, err
	}
	t := tabulate(h, cells)
	if err := writeTable(grid, t); err != nil {
		return t, err
	}
	have := make([]bool, len(h.Setups)*h.Runs)
	for _, c := range cells {
		have[c.Cell.Index] = true
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

// A collected cell is what Collect keeps of a record: its run's figures,
// its start and servers, and where it was read.
type collected struct {
	Result
	started  time.Time
	versions string
	file     string // the record's path
	dir      string // the name of the directory it is in, in the grid's
}

// tabulate makes the table of the grid h from its cells, their runs found
// in the grid's directory.
func tabulate(h Header, cells []collected) *Table {
	started := cells[0].started
	var versions []string
	more := false
	results := make([]Result, 0, len(cells))
	for _, c := range cells {
		if c.started.Before(started) {
			started = c.started
		}
		if !slices.Contains(versions, c.versions) {
			if len(versions) < maxVersions {
				versions = append(versions, c.versions)
			} else {
				more = true
			}
		}
		results = append(results, c.Result)
	}
	if more {
		versions = append(versions, "and others")
	}
	t := h.Table(started, strings.Join(versions, "; "))
	t.Fill(h.Setups, results)
	return t
}

// readRecords reads every cell's record in grid, checking each, and that
// they are cells of one grid, one record a cell, each where its index
// says. It returns the grid and the cells.
func readRecords(grid *files.Dir) (Header, []collected, error) {
	names, err := cellDirs(grid)
	if err != nil {
		return Header{}, nil, err
	}
	var h Header
	var cells []collected
	byIndex := map[int]string{}
	for _, name := range names {
		r, c, err := readCell(grid, name)
		if err != nil {
			return Header{}, nil, err
		}
		if c.file == "" {
			continue // a cell not made (yet): MissingError names it
		}
		if cells == nil {
			h = r.Grid
		} else if !reflect.DeepEqual(r.Grid, h) {
			return Header{}, nil, fmt.Errorf("%s: a cell of another grid than %s's (its command, seed or rows differ)", c.file, cells[0].file)
		}
		if other, ok := byIndex[c.Cell.Index]; ok {
			return Header{}, nil, fmt.Errorf("%s and %s: two records of cell %d", other, c.file, c.Cell.Index)
		}
		byIndex[c.Cell.Index] = c.file
		cells = append(cells, c)
	}
	if len(cells) == 0 {
		return Header{}, nil, fmt.Errorf("--collect %s: no cell-N/%s here: hiatus compare --cell N --grid-dir %[1]s makes cell N", grid.Path(), CellFile)
	}
	for _, c := range cells {
		if c.dir != CellDir(c.Cell.Index) {
			return Header{}, nil, fmt.Errorf("%s: the record of cell %d, in the directory of another", c.file, c.Cell.Index)
		}
	}
	return h, cells, nil
}

// cellDirs lists the names of grid's cell directories (cell-*), in order:
// a link among them, which could lead out of the grid, is refused.
func cellDirs(grid *files.Dir) ([]string, error) {
	// Room for every cell's directory of the largest grid, and the
	// table's files beside them.
	entries, err := grid.ReadDir(MaxCells + 100)
	if err != nil {
		return nil, fmt.Errorf("--collect: %w", err)
	}
	var names []string
	for _, e := range entries {
		switch {
		case !strings.HasPrefix(e.Name(), "cell-"):
		case e.Type()&fs.ModeSymlink != 0:
			return nil, fmt.Errorf("%s: %w", grid.Join(e.Name()), files.ErrLink)
		case e.IsDir():
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// readCell reads and checks the record in the cell directory name of grid,
// and the run it names; the cell's file is "" when it has no record.
func readCell(grid *files.Dir, name string) (Record, collected, error) {
	cell, err := grid.Sub(name)
	if err != nil {
		return Record{}, collected{}, fmt.Errorf("--collect: %w", err)
	}
	defer cell.Close()
	b, err := cell.ReadFile(CellFile, maxCellFile)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, collected{}, nil
	}
	c := collected{file: cell.Join(CellFile), dir: name}
	if err != nil {
		return Record{}, c, fmt.Errorf("--collect: %w", err)
	}
	r, err := ParseRecord(b)
	if err == nil {
		err = checkRun(cell, r.Figures)
	}
	if err != nil {
		return Record{}, c, fmt.Errorf("%s: %w", c.file, err)
	}
	c.Result, c.started, c.versions = r.Result, r.Started, r.Versions
	c.Figures.Dir = filepath.Join(grid.Path(), filepath.FromSlash(r.Figures.Path))
	return r, c, nil
}

// checkRun checks that the run f names is in cell, and that its results
// bear out f.
func checkRun(cell *files.Dir, f Figures) error {
	runs, start, err := runParent(cell, f.Path)
	if err != nil {
		return &RecordError{Field: "figures.path", Err: err}
	}
	defer runs.Close()
	run, err := runs.Sub(start)
	if err != nil {
		return &RecordError{Field: "figures.path", Err: fmt.Errorf("%s: no run directory: %w", f.Path, err)}
	}
	defer run.Close()
	b, err := run.ReadFile(store.Results, maxResultsFile)
	if err != nil {
		return &RecordError{Field: "figures.path", Err: fmt.Errorf("%s: no results: %w", f.Path, err)}
	}
	if err := CheckResults(f, b); err != nil {
		return fmt.Errorf("%s: %w", run.Join(store.Results), err)
	}
	return nil
}
