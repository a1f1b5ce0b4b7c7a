package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/compare"
	"github.com/hiatus-dev/hiatus/store"
)

// tableJSON is the part of table.json the tests read.
type tableJSON struct {
	Kind     string `json:"kind"`
	Complete bool   `json:"complete"`
	Rows     []struct {
		Lock  string `json:"lock"`
		Pause string `json:"pause"`
		Runs  []struct {
			Dir         string `json:"dir"`
			Writes      int64  `json:"writes"`
			Lost        int64  `json:"lost-min"`
			Overlapping int64  `json:"overlapping-sections"`
			Rejected    int64  `json:"stale-rejected"`
		} `json:"runs"`
		Writes      compare.Range `json:"writes"`
		Lost        compare.Range `json:"lost-min"`
		Overlapping compare.Range `json:"overlapping-sections"`
		Rejected    compare.Range `json:"stale-rejected"`
	} `json:"rows"`
}

// TestCompare runs a 2-row × 2-run grid of short real runs — the renew lock
// under a blocking pause and under a whole-process stop — and checks the
// table against each run's results.edn, the files written, that hiatus check
// re-checks a run to the same figures, and what the rows show: the watchdog
// keeps the lease through a blocking pause, not through a stop. Every
// section pauses (--inject-every 1): on a loaded machine a worker may run
// only two or three sections in the second, and a row that paused none
// would say nothing. The lease is a second: beside other work (a load of
// 12 on two cores) a watchdog's renewal, every third of a 200 ms lease, came
// more than 133 ms late, and the blocking pause lost an update.
func TestCompare(t *testing.T) {
	root := t.TempDir()
	code, out, errOut := hiatus(t, "compare", "--redis-url", testRedisURL, "--postgres-url", testPostgresURL,
		"--store", root, "--name", "cmp", "--counter-id", "300", "--seed", "1",
		"--locks", "renew", "--pauses", "sleep,stop", "--runs", "2", "--time-limit", "2500ms",
		"--lease", "1s", "--pause", "2500ms", "--inject-every", "1", "--work", "5ms")
	t.Logf("hiatus compare\n%s%s", out, errOut)
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(root, "cmp", "latest"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{compare.TableMarkdown, compare.TableCSV, compare.TableJSON,
		compare.PlotPNG, compare.PlotSVG, compare.RunList} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s missing or empty: %v", name, err)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, compare.TableMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, string(md)) {
		t.Errorf("stdout does not hold table.md:\n%s", md)
	}
	b, err := os.ReadFile(filepath.Join(dir, compare.TableJSON))
	if err != nil {
		t.Fatal(err)
	}
	var tab tableJSON
	if err := json.Unmarshal(b, &tab); err != nil {
		t.Fatal(err)
	}
	if tab.Kind != "grid" || !tab.Complete || len(tab.Rows) != 2 {
		t.Fatalf("table.json: kind %q, complete %v, %d rows; want grid, true, 2", tab.Kind, tab.Complete, len(tab.Rows))
	}

	if _, err := os.Lstat(filepath.Join(root, "latest")); err == nil {
		t.Errorf("the comparison moved the store's latest run link")
	}
	for _, row := range tab.Rows {
		for _, run := range row.Runs {
			if rel, err := filepath.Rel(dir, run.Dir); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("run %s is not inside the comparison's directory %s", run.Dir, dir)
			}
		}
		if len(row.Runs) != 2 {
			t.Fatalf("%s %s: %d runs, want 2", row.Lock, row.Pause, len(row.Runs))
		}
		ranges := map[string]*compare.Range{"writes": {}, "lost-min": {}, "overlapping-sections": {}, "stale-rejected": {}}
		for i, run := range row.Runs {
			res, err := os.ReadFile(filepath.Join(run.Dir, store.Results))
			if err != nil {
				t.Fatal(err)
			}
			for key, rg := range ranges {
				v := figure(t, string(res), key)
				if i == 0 || v < rg.Min {
					rg.Min = v
				}
				if i == 0 || v > rg.Max {
					rg.Max = v
				}
			}
			if got, want := run.Lost, figure(t, string(res), "lost-min"); got != want {
				t.Errorf("%s: table has lost %d, results.edn %d", run.Dir, got, want)
			}
		}
		for key, got := range map[string]compare.Range{"writes": row.Writes, "lost-min": row.Lost,
			"overlapping-sections": row.Overlapping, "stale-rejected": row.Rejected} {
			if want := *ranges[key]; got != want {
				t.Errorf("%s %s: %s %v, but the runs' results.edn give %v", row.Lock, row.Pause, key, got, want)
			}
		}
		cells := "| " + strings.Join([]string{row.Writes.String(), row.Lost.String(), row.Overlapping.String(),
			row.Rejected.String()}, " | ") + " |"
		if !strings.Contains(string(md), cells) {
			t.Errorf("table.md has no row with %q:\n%s", cells, md)
		}
	}
	if sleep, stop := tab.Rows[0], tab.Rows[1]; sleep.Lost.Max != 0 || stop.Lost.Min == 0 {
		t.Errorf("renew lost %v under a blocking pause (want 0) and %v under a stop (want > 0)", sleep.Lost, stop.Lost)
	}

	// An ordinary run directory: hiatus check gives it the same results.
	run := tab.Rows[1].Runs[0].Dir
	before, err := os.ReadFile(filepath.Join(run, store.Results))
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := hiatus(t, "check", "--store", root, run); code != 1 {
		t.Errorf("hiatus check %s: exit %d, want 1 (invalid)\n%s%s", run, code, out, errOut)
	}
	after, err := os.ReadFile(filepath.Join(run, store.Results))
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("hiatus check rewrote results.edn as\n%s\nbut the comparison's run wrote\n%s", after, before)
	}
}

// TestCompareBadFlags: a bad comparison is refused before any run, with
// exit 254 and a message naming the flag.
func TestCompareBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs", "0"}, "--runs"},
		{[]string{"--locks", "chubby"}, "--locks"},
		{[]string{"--pauses", "sigstop,nap"}, "--pauses"},
		{[]string{"--locks", "setnx", "--fencing", "maybe"}, "--fencing"},
		{[]string{"--lease", "1s"}, "--lease"},
		{[]string{"--steps", "3"}, "--steps"},
		{[]string{"--sweep", "lease=1..2"}, "--sweep"},
		{[]string{"--sweep", "pause/lease=4..1"}, "--sweep"},
		{[]string{"--sweep", "pause/lease=0.5..2", "--pauses", "none"}, "--pauses"},
		{[]string{"--sweep", "pause/lease=0.5..2", "--lease", "1s"}, "--lease"},
		{[]string{"--locks", "setnx", "--lease", "1500us"}, "--lease"},
		{[]string{"--time-limit", "0s"}, "--time-limit"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root := t.TempDir()
			code, out, errOut := hiatus(t, append([]string{"compare", "--store", root}, tc.args...)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d\n%s%s", code, exitUsage, out, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q does not name %q", errOut, tc.want)
			}
			if entries, _ := os.ReadDir(root); len(entries) != 0 {
				t.Errorf("a refused comparison left %d entries in the store", len(entries))
			}
		})
	}
}
