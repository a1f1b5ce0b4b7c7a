package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/compare"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/hiatus-dev/hiatus/web"
)

// cellGrid is the grid of TestCompareCells: 2 locks × 3 pause kinds × 2
// runs, 12 cells of short runs.
var cellGrid = []string{"--name", "grid", "--locks", "setnx,renew", "--pauses", "none,sigstop,sleep", "--runs", "2", "--seed", "11",
	"--workers", "1", "--time-limit", "300ms", "--pause", "100ms", "--interval", "100ms", "--inject-every", "2", "--work", "5ms",
	"--no-plots"} // under -race a run's plots took 3 s of CPU, the grid's most

// gridTable is what TestCompareCells compares of two tables: table.json
// as the tests read it, with each row's setup and its runs' seeds.
type gridTable struct {
	Kind       string `json:"kind"`
	Command    string `json:"command"`
	Complete   bool   `json:"complete"`
	RunsPerRow int    `json:"runs_per_row"`
	Rows       []struct {
		Label   string `json:"label"`
		Lock    string `json:"lock"`
		LeaseMS int64  `json:"lease_ms"`
		Pause   string `json:"pause"`
		Fenced  bool   `json:"fenced"`
		Runs    []struct {
			Dir    string `json:"dir"`
			Path   string `json:"path"`
			Seed   int64  `json:"seed"`
			Valid  string `json:"valid"`
			Writes int64  `json:"writes"`
			Lost   int64  `json:"lost-min"`
		} `json:"runs"`
		Valid, Invalid, Unknown int
	} `json:"rows"`
}

func readGrid(t *testing.T, dir string) (gridTable, [][]string, []byte) {
	t.Helper()
	var g gridTable
	b, err := os.ReadFile(filepath.Join(dir, compare.TableJSON))
	if err == nil {
		err = json.Unmarshal(b, &g)
	}
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	c, err := os.ReadFile(filepath.Join(dir, compare.TableCSV))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(c)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, compare.TableMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	return g, recs, md
}

// TestCompareCells makes a 12-cell grid twice: once in one process, and
// once as 12 separate hiatus processes, a cell each — as a Kubernetes
// Indexed Job's pods do, each with throwaway servers of its own, half of
// them told their index by JOB_COMPLETION_INDEX — and collected. The two
// tables have the same rows, columns and runs (the figures vary run to
// run): each run of a collected row has its row's seed, and its figures
// are its results.edn's. A cell lost leaves the collected table
// incomplete, and says which.
func TestCompareCells(t *testing.T) {
	t.Parallel()
	root, gridDir := t.TempDir(), filepath.Join(t.TempDir(), "grid")
	code, out, errOut := hiatus(t, append([]string{"compare", "--list-cells"}, cellGrid...)...)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 12 || !strings.HasPrefix(lines[11], "11\trow 6 run 2\trenew 500 ms sleep") {
		t.Fatalf("--list-cells: exit %d, %d lines, want 12 ending with cell 11, row 6, run 2 of renew under sleep:\n%s%s", code, len(lines), out, errOut)
	}

	// The cells, four processes at a time, beside the one-process grid:
	// each with a Redis of its own, as a pod has, where its row's lock
	// lives; they share PostgreSQL, each with a counter row of its own.
	start := time.Now()
	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	cellOut := make([]string, 12)
	cellErr := make([]error, 12)
	for i := range 12 {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			args := append([]string{"compare", "--postgres-url", testPostgresURL, "--counter-id", fmt.Sprint(320 + i)}, cellGrid...)
			env := append(os.Environ(), asMainEnv+"=1")
			if i%2 == 0 {
				args = append(args, "--cell", fmt.Sprint(i))
			} else {
				args = append(args, "--cell", "job")
				env = append(env, jobIndexEnv+"="+fmt.Sprint(i))
			}
			cmd := exec.CommandContext(t.Context(), os.Args[0], append(args, "--grid-dir", gridDir)...)
			cmd.Env = env
			b, err := cmd.CombinedOutput()
			cellOut[i], cellErr[i] = string(b), err
			t.Logf("cell %d done after %v", i, time.Since(start))
		})
	}
	code, out, errOut = hiatus(t, append([]string{"compare", "--redis-url", testRedisURL, "--postgres-url", testPostgresURL,
		"--store", root, "--counter-id", "310"}, cellGrid...)...)
	t.Logf("the one-process grid took %v", time.Since(start))
	wg.Wait()
	if code != 0 {
		t.Fatalf("the one-process grid: exit %d\n%s%s", code, out, errOut)
	}
	for i, err := range cellErr {
		if err != nil || !strings.HasPrefix(cellOut[i], fmt.Sprintf("%d\t", i)) {
			t.Fatalf("cell %d: %v\n%s", i, err, cellOut[i])
		}
	}
	code, out, errOut = hiatus(t, "compare", "--collect", gridDir)
	if code != 0 {
		t.Fatalf("--collect: exit %d\n%s%s", code, out, errOut)
	}
	md, err := os.ReadFile(filepath.Join(gridDir, compare.TableMarkdown))
	if err != nil || !strings.Contains(out, string(md)) {
		t.Errorf("--collect printed no table.md (%v):\n%s", err, out)
	}
	for _, name := range []string{compare.PlotPNG, compare.PlotSVG, compare.RunList} {
		if fi, err := os.Stat(filepath.Join(gridDir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("--collect wrote no %s: %v", name, err)
		}
	}

	oneDir, err := filepath.EvalSymlinks(filepath.Join(root, "grid", "latest"))
	if err != nil {
		t.Fatal(err)
	}
	one, oneCSV, oneMD := readGrid(t, oneDir)
	got, gotCSV, gotMD := readGrid(t, gridDir)
	if got.Kind != one.Kind || got.Command != one.Command || got.RunsPerRow != one.RunsPerRow || !got.Complete || !one.Complete ||
		len(got.Rows) != 6 || len(one.Rows) != 6 {
		t.Fatalf("collected: %s %q, %d runs a row, complete %v, %d rows; one process: %s %q, %d, %v, %d; want the same, complete, 6 rows",
			got.Kind, got.Command, got.RunsPerRow, got.Complete, len(got.Rows), one.Kind, one.Command, one.RunsPerRow, one.Complete, len(one.Rows))
	}
	for i, r := range got.Rows {
		o := one.Rows[i]
		if r.Label != o.Label || r.Lock != o.Lock || r.LeaseMS != o.LeaseMS || r.Pause != o.Pause || r.Fenced != o.Fenced ||
			len(r.Runs) != 2 || len(o.Runs) != 2 || r.Valid+r.Invalid+r.Unknown != 2 {
			t.Errorf("row %d: collected %q with %d runs, one process %q with %d; want one setup, 2 runs each", i+1, r.Label, len(r.Runs), o.Label, len(o.Runs))
			continue
		}
		for j, run := range r.Runs {
			if run.Seed != 11+int64(j) || run.Seed != o.Runs[j].Seed {
				t.Errorf("row %d run %d: seed %d collected, %d in one process; want %d", i+1, j+1, run.Seed, o.Runs[j].Seed, 11+j)
			}
			if want := filepath.Join(gridDir, filepath.FromSlash(run.Path)); run.Dir != want || !strings.HasPrefix(run.Path, fmt.Sprintf("cell-%d/", 2*i+j)) {
				t.Errorf("row %d run %d: dir %s, path %s; want %s, in cell-%d", i+1, j+1, run.Dir, run.Path, want, 2*i+j)
			}
			res, err := os.ReadFile(filepath.Join(run.Dir, store.Results))
			if err != nil {
				t.Fatal(err)
			}
			if run.Writes != figure(t, string(res), "writes") || run.Lost != figure(t, string(res), "lost-min") {
				t.Errorf("%s: writes %d, lost %d in the table; results.edn says otherwise:\n%s", run.Dir, run.Writes, run.Lost, res)
			}
		}
	}
	// table.csv: the same columns, and each row the same setup and count
	// of runs (its first 10 columns).
	if len(gotCSV) != 7 || len(oneCSV) != 7 || strings.Join(gotCSV[0], ",") != strings.Join(oneCSV[0], ",") {
		t.Fatalf("table.csv: %d and %d lines, heads\n%v\n%v", len(gotCSV), len(oneCSV), gotCSV[0], oneCSV[0])
	}
	for i := 1; i < 7; i++ {
		if a, b := strings.Join(gotCSV[i][:10], ","), strings.Join(oneCSV[i][:10], ","); a != b {
			t.Errorf("table.csv row %d: collected %s, one process %s", i, a, b)
		}
	}
	// table.md: the same caption's command, head, and setup cells.
	if a, b := mdShape(string(gotMD)), mdShape(string(oneMD)); a != b {
		t.Errorf("table.md: collected\n%s\none process\n%s", a, b)
	}

	// serve shows both as one table: 6 rows, a link to each of 12 runs.
	for dir, name := range map[string]string{root: "grid/" + filepath.Base(oneDir), filepath.Dir(gridDir): "grid"} {
		page := servePage(t, dir, "/run/"+name)
		if rows, links := strings.Count(page, `<tr><td class="num" data-sort=`), strings.Count(page, `<a class="run `); rows != 6 || links != 12 {
			t.Errorf("serve's page of %s: %d rows, %d links to runs; want 6 and 12", name, rows, links)
		}
	}

	// A cell lost: the table is written all the same, incomplete, and the
	// collector says which cell, with 254.
	if err := os.Remove(filepath.Join(gridDir, "cell-7", compare.CellFile)); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = hiatus(t, "compare", "--collect", gridDir)
	lost, _, _ := readGrid(t, gridDir)
	if code != exitUsage || !strings.Contains(errOut, "1 of 12 cells have no cell.json (7)") || lost.Complete || len(lost.Rows[3].Runs) != 1 {
		t.Errorf("--collect without cell 7: exit %d, %q, complete %v; want %d, cell 7 named, row 4 with 1 run", code, errOut, lost.Complete, exitUsage)
	}
}

// mdShape is a markdown table's command, head and the setup cells of its
// rows (lock, lease, pause, fenced): what a grid's table.md has whatever
// its figures.
func mdShape(md string) string {
	var b strings.Builder
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "`"):
			b.WriteString(line + "\n")
		case strings.HasPrefix(line, "| lock") || strings.HasPrefix(line, "| ---"):
			b.WriteString(line + "\n")
		case strings.HasPrefix(line, "| "):
			cells := strings.Split(line, " | ")
			b.WriteString(strings.Join(cells[:4], " | ") + fmt.Sprintf(" (%d cells)\n", len(cells)))
		}
	}
	return b.String()
}

// TestCompareCellWords: a cell, a list and a collection asked for wrongly
// are refused with 254 and words naming the flag, before any run; a stray
// JOB_COMPLETION_INDEX changes nothing without --cell job.
func TestCompareCellWords(t *testing.T) {
	grid := []string{"compare", "--locks", "setnx", "--pauses", "none,sigstop", "--runs", "1"}
	empty := t.TempDir()
	for _, tc := range []struct {
		args   []string
		env    string // JOB_COMPLETION_INDEX, if not "-"
		stderr string
	}{
		{[]string{"--cell", "0", "--seed", "1"}, "-", "--cell needs --grid-dir"},
		{[]string{"--cell", "0", "--grid-dir", empty}, "-", "--cell needs --seed"},
		{[]string{"--grid-dir", empty}, "-", "--grid-dir is where --cell puts its cell"},
		{[]string{"--cell", "0", "--seed", "1", "--grid-dir", empty, "--list-cells"}, "-", "--list-cells lists the cells: it cannot go with --cell"},
		{[]string{"--cell", "0", "--seed", "1", "--grid-dir", empty, "--store", empty}, "-", "not in --store"},
		{[]string{"--cell", "2", "--seed", "1", "--grid-dir", empty}, "-", "--cell 2: the grid has 2 cells, 0 to 1"},
		{[]string{"--cell", "-1", "--seed", "1", "--grid-dir", empty}, "-", `--cell "-1": want a cell's index`},
		{[]string{"--cell", "job", "--seed", "1", "--grid-dir", empty}, "", "--cell job: $JOB_COMPLETION_INDEX is not set"},
		{[]string{"--cell", "job", "--seed", "1", "--grid-dir", empty}, "one", `--cell job: $JOB_COMPLETION_INDEX "one": want a cell's index`},
		{[]string{"--cell", "0", "--seed", "1", "--grid-dir", empty, "--runs", "1001"}, "-", "--cell: a grid --collect would refuse: grid.runs: 1001"},
	} {
		t.Run(strings.Join(tc.args, " ")+" "+tc.env, func(t *testing.T) {
			if tc.env != "-" {
				t.Setenv(jobIndexEnv, tc.env)
				if tc.env == "" {
					os.Unsetenv(jobIndexEnv)
				}
			}
			code, out, stderr := hiatus(t, append(grid, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q\n%s", code, stderr, exitUsage, tc.stderr, out)
			}
			if entries, _ := os.ReadDir(empty); len(entries) != 0 {
				t.Errorf("a refused cell left %d entries in the grid's directory", len(entries))
			}
		})
	}
	// A pipe where a record goes is refused at once, not waited on (issue
	// 34, defect 5: it hung --collect).
	piped := t.TempDir()
	if err := os.Mkdir(filepath.Join(piped, "cell-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(piped, "cell-0", compare.CellFile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"compare", "--collect", piped}, filepath.Join(piped, "cell-0", compare.CellFile) + ": it is a named pipe"},
		{[]string{"compare", "--collect", empty, "--runs", "2"}, "--collect reads its grid from the cells' records: it takes no --runs"},
		{[]string{"compare", "--collect", empty}, "no cell-N/cell.json here"},
		{[]string{"compare", "--collect", filepath.Join(empty, "nope")}, "--collect: stat " + filepath.Join(empty, "nope")},
	} {
		if code, _, stderr := hiatus(t, tc.args...); code != exitUsage || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.stderr)
		}
	}

	t.Setenv(jobIndexEnv, "1")
	code, out, errOut := hiatus(t, append(grid, "--list-cells")...)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 {
		t.Errorf("--list-cells beside a stray %s: exit %d, %q %q; want both cells", jobIndexEnv, code, out, errOut)
	}
}

// servePage is serve's answer to a GET of target in the store root.
func servePage(t *testing.T, root, target string) string {
	t.Helper()
	h, err := web.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	if rec.Code != 200 {
		t.Fatalf("GET %s: %d", target, rec.Code)
	}
	return rec.Body.String()
}

// linkGrid is the one-cell grid of the tests of links planted in a grid's
// directory: its run is named links-setnx-500ms-none.
func linkGrid(counter int, more ...string) []string {
	return append([]string{"compare", "--redis-url", testRedisURL, "--postgres-url", testPostgresURL, "--counter-id", fmt.Sprint(counter),
		"--name", "links", "--locks", "setnx", "--pauses", "none", "--runs", "1", "--seed", "3", "--workers", "1",
		"--time-limit", "300ms", "--pause", "100ms", "--work", "5ms", "--no-plots", "--cell", "0"}, more...)
}

// TestCompareCellPlantedLinks: a link planted in the shared grid directory
// where a cell's directory, or its run's, goes is refused with 254, naming
// it, before anything starts; nothing is written where it points (issue
// 34, defect 2: cell-N -> /elsewhere received the run).
func TestCompareCellPlantedLinks(t *testing.T) {
	for i, link := range []string{"cell-0", "cell-0/links-setnx-500ms-none"} {
		t.Run(link, func(t *testing.T) {
			gridDir, elsewhere := t.TempDir(), t.TempDir()
			at := filepath.Join(gridDir, filepath.FromSlash(link))
			if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, at); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := hiatus(t, linkGrid(340+i, "--grid-dir", gridDir)...)
			if code != exitUsage || !strings.Contains(errOut, at+": a symbolic link") {
				t.Errorf("exit %d, %q; want %d, naming the link %s\n%s", code, errOut, exitUsage, at, out)
			}
			if es, _ := os.ReadDir(elsewhere); len(es) != 0 {
				t.Errorf("the cell wrote where the link points: %v", es)
			}
		})
	}
}

// TestCompareCellSwapped: a cell's directory swapped for a link while the
// cell runs — here by the lock adapter, a real one behind a script that
// swaps it as it starts, before the run's directory is made — sends the
// run where the link points (the run is made by path), but the cell finds
// its run missing from the directory it checked and held open, and writes
// no record, neither there nor where the link points: exit 254, saying so.
func TestCompareCellSwapped(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	adapter := filepath.Join(tmp, "go-setnx")
	if out, err := exec.Command("go", "build", "-o", adapter, filepath.Join(root, "adapters/go-setnx")).CombinedOutput(); err != nil {
		t.Fatalf("build the Go adapter: %v: %s", err, out)
	}
	gridDir, elsewhere := filepath.Join(tmp, "grid"), filepath.Join(tmp, "elsewhere")
	cell := filepath.Join(gridDir, "cell-0")
	script := filepath.Join(tmp, "swap")
	body := fmt.Sprintf("#!/bin/sh\n[ -L %[1]s ] || { mkdir -p %[2]s && mv %[1]s %[1]s.held && ln -s %[2]s %[1]s; }\nexec %[3]s \"$@\"\n",
		cell, elsewhere, adapter)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	args := linkGrid(342, "--grid-dir", gridDir)
	args[slices.Index(args, "setnx")] = "exec:" + script
	code, out, errOut := hiatus(t, args...)
	if code != exitUsage || !strings.Contains(errOut, "is not in its cell's directory "+cell+" as it was") {
		t.Errorf("exit %d, %q; want %d, the run not in the cell's directory\n%s", code, errOut, exitUsage, out)
	}
	t.Logf("exit %d: %s", code, errOut)
	// The run went where the link points: what the cell cannot stop.
	if es, _ := os.ReadDir(elsewhere); len(es) == 0 {
		t.Fatalf("the run did not go where the swapped link points: the adapter swapped nothing, or too late")
	}
	for _, dir := range []string{elsewhere, cell + ".held"} {
		if _, err := os.Lstat(filepath.Join(dir, compare.CellFile)); err == nil {
			t.Errorf("a record was written in %s", dir)
		}
	}
}
