package web

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/internal/gen"
	"github.com/hiatus-dev/hiatus/report"
)

const secret = "the-secret-outside-the-store"

// fixture makes a store with a run, a comparison with one cell, and links
// out of the store; it returns the store and the run's path in it.
func fixture(t *testing.T) (root, run string) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "store")
	outside := filepath.Join(dir, "outside")
	write := func(p, text string) { mkfile(t, p, text) }
	write(filepath.Join(outside, "secret.txt"), secret)
	test := `{:name "lock-counter", :lock :setnx, :workers 3, :time-limit-ms 10000, :lease-ms 500, :work-ms 20, :nemesis :sigstop, :fenced? false}`
	run = "lock-counter/20261201T094801.339Z"
	write(filepath.Join(root, run, "test.edn"), test)
	write(filepath.Join(root, run, "results.edn"), `{:valid? false, :lock-counter {:valid? false, :writes 347, :lost-min 4, :lost-max 4,
 :overlapping-sections 46, :explanation "4 updates lost <script>alert(1)</script>"}, :stats {:valid? true, :count 9}}`)
	write(filepath.Join(root, run, "history.edn"), "{:index 0, :type :invoke, :process 0, :f :read}\n")
	write(filepath.Join(root, run, "rate.png"), "not really a png")
	write(filepath.Join(root, run, "metrics", "worker-0.prom"), "guard_rejections_total{lock=\"l\"} 3\n")
	writeTimeline(t, filepath.Join(root, run, report.TimelineFile))
	cmp := "compare/20261201T085208.487Z"
	write(filepath.Join(root, cmp, "runs.txt"), "1\t1\tsetnx 3.2 s sigstop\t...\n")
	write(filepath.Join(root, cmp, "table.md"), "| lock | lost |\n| setnx | 0 |\n")
	write(filepath.Join(root, cmp, "compare-setnx-3.2s-sigstop", "20261201T085209.421Z", "test.edn"), test)
	write(filepath.Join(root, cmp, "compare-setnx-3.2s-sigstop", "20261201T085209.421Z", "results.edn"), "{:valid? true}")
	for link, target := range map[string]string{"out-file": filepath.Join(outside, "secret.txt"), "out-dir": outside} {
		if err := os.Symlink(target, filepath.Join(root, run, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root, run
}

// writeTimeline writes the timeline of a generated history to path.
func writeTimeline(t *testing.T, path string) {
	t.Helper()
	ops, _, err := gen.Ops(gen.Config{Sections: 100, Workers: 3, Lost: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tl, s := &report.Timeline{Workers: 3}, checker.NewStream()
	for _, o := range ops {
		tl.Add(o)
		s.Add(o)
	}
	s.FlagSections(tl.Kept())
	rs, err := s.Check(checker.Options{Model: checker.ModelLockCounter})
	if err != nil {
		t.Fatal(err)
	}
	tl.SetFlags(s.Flagged())
	page := report.TimelinePage{Summary: report.Summary{Name: "lock-counter", Verdict: "false"}}
	for _, r := range rs.Checks {
		page.Checks = append(page.Checks, report.Check{Name: r.Name, Verdict: fmt.Sprint(r.Valid == checker.Valid), Explanation: r.Explanation})
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := tl.WriteHTML(f, page); err != nil {
		t.Fatal(err)
	}
}

// serveFixture serves a fixture store until the test ends; it returns the
// server and the run's path in the store.
func serveFixture(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	root, run := fixture(t)
	srv := httptest.NewServer(newHandler(t, root))
	t.Cleanup(srv.Close)
	return srv, run
}

// contains checks that page has every one of want and none of not.
func contains(t *testing.T, what, page string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
	for _, n := range not {
		if strings.Contains(page, n) {
			t.Errorf("%s has %q", what, n)
		}
	}
}

func get(t *testing.T, srv *httptest.Server, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPages: the index lists the run and the comparison with their
// verdicts, filters and sorts; a run's page shows its explanation escaped,
// its plots and files; a comparison's page, its table and cells.
func TestPages(t *testing.T) {
	srv, run := serveFixture(t)
	for _, tc := range []struct {
		path string
		want []string
		not  []string
	}{
		{"/", []string{`href="/run/` + run + `"`, `class="verdict false"`, "writes 347, lost 4, overlapping-sections 46",
			"setnx, 3 workers, 10s, lease 500ms", `href="/run/compare/20261201T085208.487Z"`}, nil},
		{"/?q=compare", []string{"compare/20261201T085208.487Z"}, []string{run}},
		{"/?sort=verdict", []string{run}, nil},
		{"/run/" + run, []string{"4 updates lost &lt;script&gt;alert(1)&lt;/script&gt;", `<img src="/file/` + run + `/rate.png"`,
			`<iframe class="timeline" src="/file/` + run + `/timeline.html"`,
			`href="/file/` + run + `/history.edn"`, `href="/file/` + run + `/metrics/worker-0.prom"`}, []string{"<script>alert"}},
		{"/run/compare/20261201T085208.487Z", []string{"| setnx | 0 |", "compare-setnx-3.2s-sigstop", `class="verdict true"`}, nil},
		{"/file/" + run + "/history.edn", []string{":f :read"}, nil},
		{"/file/" + run + "/metrics/worker-0.prom", []string{"guard_rejections_total"}, nil},
	} {
		code, body := get(t, srv, http.MethodGet, tc.path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", tc.path, code)
			continue
		}
		contains(t, "GET "+tc.path, body, tc.want, tc.not)
	}
}

// TestOnlyTheStore: no request reads outside the store, however the path
// is spelt (every spelling of ".." here), and none writes.
func TestOnlyTheStore(t *testing.T) {
	srv, run := serveFixture(t)
	for _, p := range []string{
		"/file/../outside/secret.txt",
		"/file/..%2Foutside%2Fsecret.txt",
		"/file/..%2foutside%2fsecret.txt",
		"/file/%2e%2e/outside/secret.txt",
		"/file/%2E%2E/outside/secret.txt",
		"/file/.%2e/outside/secret.txt",
		"/file/%2e./outside/secret.txt",
		"/file/%2e%2e%2foutside%2fsecret.txt",
		"/file/..%5coutside%5csecret.txt",
		"/file/%252e%252e/outside/secret.txt",
		"/file/..;/outside/secret.txt",
		"/file/%c0%ae%c0%ae/outside/secret.txt",
		"/file/..%00/outside/secret.txt",
		"/file/....//outside/secret.txt",
		"/file//../outside/secret.txt",
		"/file/./../outside/secret.txt",
		"/run/%2e%2e/outside",
		"/run/..%2f..%2foutside",
		"/file/" + run + "/../../../outside/secret.txt",
		"/file/" + run + "/..%2F..%2F..%2Foutside%2Fsecret.txt",
		"/file/" + run + "/%2e%2e/%2e%2e/%2e%2e/outside/secret.txt",
		"/file/" + run + "/out-file",
		"/file/" + run + "/out-dir/secret.txt",
		"/run/" + run + "/out-dir",
		"/file//etc/passwd",
		"/file/" + run,
	} {
		code, body := get(t, srv, http.MethodGet, p)
		if code == http.StatusOK || strings.Contains(body, secret) || strings.Contains(body, "root:") {
			t.Errorf("GET %s: %d, %q", p, code, body)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		if code, _ := get(t, srv, m, "/file/"+run+"/history.edn"); code != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", m, code)
		}
	}
}
