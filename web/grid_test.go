package web

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/compare"
	"github.com/hiatus-dev/hiatus/internal/browser"
)

// gridRuns are the figures of the runs of the grids' fixtures: 3 rows of 2
// runs, their writes apart so that sorting by them reorders the rows.
var gridRuns = [3][2]struct {
	valid  string
	writes int64
	lost   int64
}{
	{{"true", 300, 0}, {"true", 310, 0}},
	{{"false", 100, 3}, {"false", 120, 5}},
	{{"true", 200, 0}, {":unknown", 210, 0}},
}

// gridFixture writes into root the same grid twice, as package compare
// writes it: made in one process, in compare/TIME/, and collected from
// cells made apart, in grid/job/. It returns the two comparisons' names.
func gridFixture(t *testing.T, root string) (one, collected string) {
	t.Helper()
	p := compare.Plan{Kind: "grid", Runs: 2, Name: "compare", Command: "hiatus compare --locks setnx --pauses none,sigstop,sleep --runs 2"}
	p.Base.Workers, p.Base.TimeLimit, p.Base.Seed = 3, time.Second, 7
	p.Setups = compare.Grid(compare.Faults{Pause: time.Second, Interval: time.Second, Every: 5}, []string{"setnx"},
		[]string{"none", "sigstop", "sleep"}, []bool{false}, 500*time.Millisecond)
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	oneDir, err := compare.CreateDir(root, "compare", start)
	if err != nil {
		t.Fatal(err)
	}
	gridDir := filepath.Join(root, "grid", "job")
	var results []compare.Result
	for _, c := range p.Cells() {
		r := gridRuns[c.Row][c.Run]
		f := compare.Figures{Seed: 7 + int64(c.Run), Valid: r.valid, LockFigures: checker.LockFigures{
			Writes: r.writes, LostMin: r.lost, LostMax: r.lost, Sections: r.writes, Counted: true}}
		stamp := start.Add(time.Duration(c.Index+1) * time.Second).Format("20060102T150405.000Z")
		run := filepath.Join("compare-"+p.Setups[c.Row].Slug(), stamp)
		for _, dir := range []string{filepath.Join(oneDir, run), filepath.Join(gridDir, compare.CellDir(c.Index), run)} {
			mkfile(t, filepath.Join(dir, "test.edn"), `{:name "compare-`+p.Setups[c.Row].Slug()+`", :lock :setnx, :workers 3}`)
			// The figures of the record: --collect checks them against it.
			mkfile(t, filepath.Join(dir, "results.edn"), fmt.Sprintf("{:valid? %[1]s, :lock-counter {:valid? %[1]s, :sections %[2]d, :writes %[2]d, :final 0, :lost-min %[3]d, :lost-max %[3]d}}",
				r.valid, r.writes, r.lost))
		}
		f.Dir, f.Path = filepath.Join(oneDir, run), filepath.ToSlash(run)
		results = append(results, compare.Result{Cell: c, Figures: f})
		f.Dir, f.Path = "/pod/grid/"+run, compare.CellDir(c.Index)+"/"+filepath.ToSlash(run)
		rec, err := json.Marshal(compare.Record{Grid: p.Header(), Started: start, Versions: "Redis 7", Result: compare.Result{Cell: c, Figures: f}})
		if err != nil {
			t.Fatal(err)
		}
		mkfile(t, filepath.Join(gridDir, compare.CellDir(c.Index), compare.CellFile), string(rec))
	}
	tab := p.Header().Table(start, "Redis 7")
	tab.Fill(p.Setups, results)
	if err := compare.Write(oneDir, tab); err != nil {
		t.Fatal(err)
	}
	if _, err := compare.Collect(gridDir); err != nil {
		t.Fatal(err)
	}
	return "compare/" + filepath.Base(oneDir), "grid/job"
}

// TestGridInBrowser: in a real browser, a comparison's page shows its
// table — made in one process or collected from cells alike — as an HTML
// table: each row's verdict counts in Jepsen's colours, a link to each of
// its runs that leads to the run's page, sorted by the column whose head
// is clicked, one way then the other; its badge is not a verdict's colour.
func TestGridInBrowser(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	one, collected := gridFixture(t, root)
	srv := httptest.NewServer(newHandler(t, root))
	t.Cleanup(srv.Close)
	ctx := browser.New(t, 1400, 1000, 2*time.Minute)
	for _, name := range []string{one, collected} {
		browse(ctx, t, srv.URL+"/run/"+name, strings.ReplaceAll(name, "/", "-"))
		order := func() []string {
			t.Helper()
			got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.grid tbody tr")].map(tr => tr.cells[0].textContent)`))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return got
		}
		if got := order(); !slices.Equal(got, []string{"1", "2", "3"}) {
			t.Fatalf("%s: the table's rows are %q, want 1, 2, 3", name, got)
		}
		painted, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.grid tbody td")].filter(td => td.cellIndex >= 7 && td.cellIndex <= 9).map(td => td.textContent + " " + getComputedStyle(td).backgroundColor)`))
		if err != nil {
			t.Fatal(err)
		}
		// Rows: 2 valid; 2 invalid; 1 valid and 1 unknown. A zero count
		// is not coloured.
		want := []string{"2 rgb(173, 246, 176)", "0 rgba(0, 0, 0, 0)", "0 rgba(0, 0, 0, 0)",
			"0 rgba(0, 0, 0, 0)", "2 rgb(246, 176, 173)", "0 rgba(0, 0, 0, 0)",
			"1 rgb(173, 246, 176)", "0 rgba(0, 0, 0, 0)", "1 rgb(255, 227, 160)"}
		if !slices.Equal(painted, want) {
			t.Errorf("%s: verdict counts painted %q, want %q", name, painted, want)
		}
		badge, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("h1 .verdict")).backgroundColor`))
		if err != nil || badge != "rgb(221, 229, 240)" {
			t.Errorf("%s: the comparison's badge is painted %q (%v), want rgb(221, 229, 240), no verdict's colour", name, badge, err)
		}

		links, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.grid a.run")].map(a => a.className + "|" + a.getAttribute("href"))`))
		if err != nil || len(links) != 6 {
			t.Fatalf("%s: links to runs %q (%v), want 6", name, links, err)
		}
		for i, l := range links {
			class, href, _ := strings.Cut(l, "|")
			if wantClass := "run " + strings.TrimPrefix(gridRuns[i/2][i%2].valid, ":"); class != wantClass || !strings.HasPrefix(href, "/run/"+name+"/") {
				t.Errorf("%s: run link %d is %q, want class %q and a page inside the comparison", name, i, l, wantClass)
			}
			if code, body := get(t, srv, "GET", href); code != 200 || !strings.Contains(body, fmt.Sprintf("writes %d", gridRuns[i/2][i%2].writes)) {
				t.Errorf("%s: %s answers %d, without the run's writes", name, href, code)
			}
		}

		for _, step := range []struct {
			want []string
			sort string
		}{{[]string{"2", "3", "1"}, "ascending"}, {[]string{"1", "3", "2"}, "descending"}} {
			if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS(`table.grid th:nth-child(3)`))); err != nil {
				t.Fatal(err)
			}
			sorted, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("table.grid th:nth-child(3)").getAttribute("aria-sort")`))
			if got := order(); !slices.Equal(got, step.want) || err != nil || sorted != step.sort {
				t.Errorf("%s: by writes, %s: rows %q (aria-sort %q, %v), want %q", name, step.sort, got, sorted, err, step.want)
			}
		}
		if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS(`table.grid th:nth-child(2)`))); err != nil {
			t.Fatal(err)
		}
		// By setup's words: none, sigstop, sleep.
		if got := order(); !slices.Equal(got, []string{"1", "2", "3"}) {
			t.Errorf("%s: by setup: rows %q, want 1, 2, 3", name, got)
		}
		browser.Screenshot(ctx, t, strings.ReplaceAll(name, "/", "-")+"-sorted")
	}
}

// TestGridPage: a collected grid, whose directory is not named by its
// time, is dated by its table; the page of a comparison whose table.json
// cannot be read shows its table.md, as text; a run its table.json places
// outside the comparison is not linked.
func TestGridPage(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	one, collected := gridFixture(t, root)
	b, err := os.ReadFile(filepath.Join(root, one, compare.TableJSON))
	if err != nil {
		t.Fatal(err)
	}
	planted := strings.Replace(string(b), `"path": "compare-setnx-500ms-none/`, `"path": "../../compare/`, 1)
	mkfile(t, filepath.Join(root, one, compare.TableJSON), planted)
	srv := httptest.NewServer(newHandler(t, root))
	t.Cleanup(srv.Close)
	// The index's row of the collected grid, not the one-process grid's,
	// which its directory's name dates the same.
	_, index := get(t, srv, "GET", "/")
	var row string
	for _, r := range strings.Split(index, "<tr") {
		if strings.Contains(r, `href="/run/`+collected+`"`) {
			row = r
		}
	}
	if _, page := get(t, srv, "GET", "/run/"+collected); !strings.Contains(row, "2026-12-01 09:00:00") || !strings.Contains(page, "2026-12-01 09:00:00") {
		t.Errorf("the collected grid not dated by its table: index row %q\n%s", row, page)
	}
	code, page := get(t, srv, "GET", "/run/"+one)
	if code != 200 || strings.Count(page, `<a class="run `) != 5 || !strings.Contains(page, `title="run 1: not in this store"`) {
		t.Errorf("a run placed outside its comparison: %d, %d links\n%s", code, strings.Count(page, `<a class="run `), page)
	}
	// A sweep's table has a column the grid's has not: its table.md shows.
	mkfile(t, filepath.Join(root, one, compare.TableJSON), strings.Replace(planted, `"kind": "grid"`, `"kind": "sweep"`, 1))
	if code, page = get(t, srv, "GET", "/run/"+one); code != 200 || strings.Contains(page, `class="grid"`) || !strings.Contains(page, "<pre>`hiatus compare") {
		t.Errorf("a sweep's page: %d\n%s", code, page)
	}
	mkfile(t, filepath.Join(root, one, compare.TableJSON), "{not json")
	code, page = get(t, srv, "GET", "/run/"+one)
	if code != 200 || strings.Contains(page, `class="grid"`) || !strings.Contains(page, "<pre>`hiatus compare --locks setnx") {
		t.Errorf("a comparison whose table.json cannot be read: %d\n%s", code, page)
	}
}
