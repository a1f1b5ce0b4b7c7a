package web

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requestBound is how long any request may take. Every one takes
// milliseconds; the bound only turns a request that hangs into a failure.
const requestBound = 10 * time.Second

// mkfile writes text at p, making its directory.
func mkfile(t testing.TB, p, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mkfifo makes a FIFO at p, making its directory.
func mkfifo(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

// symlink makes a symlink at p to target, making p's directory.
func symlink(t testing.TB, target, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// newHandler serves the store at root until the test ends.
func newHandler(t testing.TB, root string) http.Handler {
	t.Helper()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// request serves method target with h, as a server would parse it: see
// serveWithin.
func request(t testing.TB, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	return serveWithin(t, h, httptest.NewRequest(method, target, nil))
}

// serveWithin serves req with h and fails the test if that takes longer
// than requestBound; it returns nil then, and leaves the request's
// goroutine behind.
func serveWithin(t testing.TB, h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), requestBound)
	defer cancel()
	rec, req := httptest.NewRecorder(), req.WithContext(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
		return rec
	case <-ctx.Done():
		t.Errorf("%s %s: no answer in %v", req.Method, req.RequestURI, requestBound)
		return nil
	}
}

// TestSymlinksOut: a file serve would read (test.edn, results.edn, runs.txt,
// table.md, timeline.html, any file) that is a link out of the store is
// not read: the run or comparison is shown as if the file were not there.
// A relative link to a file inside the store is followed.
func TestSymlinksOut(t *testing.T) {
	dir := t.TempDir()
	root, out := filepath.Join(dir, "store"), filepath.Join(dir, "outside")
	mkfile(t, filepath.Join(out, "test.edn"), `{:name "`+secret+`", :lock :setnx}`)
	mkfile(t, filepath.Join(out, "results.edn"), `{:valid? false, :lock-counter {:valid? false, :explanation "`+secret+`"}}`)
	mkfile(t, filepath.Join(out, "text"), secret)
	mkfile(t, filepath.Join(out, "dir", "T", "test.edn"), `{:name "`+secret+`"}`)
	const t1 = "20261201T094801.339Z"
	mkfile(t, filepath.Join(root, "c", t1, "runs.txt"), "1\t1\tsetnx\t...\n") // the review's: table.md -> /etc/passwd
	symlink(t, filepath.Join(out, "text"), filepath.Join(root, "c", t1, "table.md"))
	mkfile(t, filepath.Join(root, "r1", t1, "test.edn"), `{:name "r1", :lock :setnx}`)
	for name, target := range map[string]string{"results.edn": "results.edn", "timeline.html": "text", "history.edn": "text"} {
		symlink(t, filepath.Join(out, target), filepath.Join(root, "r1", t1, name))
	}
	symlink(t, filepath.Join(out, "test.edn"), filepath.Join(root, "r2", t1, "test.edn"))
	mkfile(t, filepath.Join(root, "r2", t1, "results.edn"), "{:valid? true}")
	symlink(t, filepath.Join(out, "text"), filepath.Join(root, "c2", t1, "runs.txt"))
	symlink(t, filepath.Join(out, "dir"), filepath.Join(root, "r3"))
	symlink(t, filepath.Join("..", "..", "r1", t1, "test.edn"), filepath.Join(root, "r4", t1, "test.edn"))
	h := newHandler(t, root)
	for _, tc := range []struct {
		target string
		code   int
		want   []string
		not    []string
	}{
		{"/", 200, []string{`href="/run/c/` + t1, `href="/run/r1/` + t1, `href="/run/r4/` + t1},
			[]string{`href="/run/r2/`, `href="/run/c2/`, `href="/run/r3/`, `href="/file/r1/`}},
		{"/run/c/" + t1, 200, []string{"comparison"}, []string{"<h2>Table</h2>"}},
		{"/run/r1/" + t1, 200, []string{"valid? unknown"}, []string{"timeline.html", "history.edn"}},
		{"/run/r4/" + t1, 200, []string{"r1"}, nil},
		{"/run/r2/" + t1, 404, nil, nil},
		{"/run/c2/" + t1, 404, nil, nil},
		{"/run/r3/T", 404, nil, nil},
		{"/file/c/" + t1 + "/table.md", 404, nil, nil},
		{"/file/r1/" + t1 + "/results.edn", 404, nil, nil},
		{"/file/r1/" + t1 + "/timeline.html", 404, nil, nil},
		{"/file/r1/" + t1 + "/history.edn", 404, nil, nil},
		{"/file/r2/" + t1 + "/test.edn", 404, nil, nil},
		{"/file/r3/T/test.edn", 404, nil, nil},
		{"/file/r4/" + t1 + "/test.edn", 200, []string{`{:name "r1"`}, nil},
	} {
		rec := request(t, h, http.MethodGet, tc.target)
		if rec == nil {
			continue
		}
		body := rec.Body.String()
		if rec.Code != tc.code || strings.Contains(body, secret) {
			t.Errorf("GET %s: %d, want %d; %q", tc.target, rec.Code, tc.code, body)
		}
		contains(t, "GET "+tc.target, body, tc.want, tc.not)
	}
}

// TestSpecialFiles: a FIFO (or a directory) where serve expects a file is
// not a file: every request answers at once, as if it were not there. A
// FIFO opened for reading would wait for a writer that never comes.
func TestSpecialFiles(t *testing.T) {
	root := t.TempDir()
	const t1 = "20261201T094801.339Z"
	run, cmp := "r/"+t1, "c/"+t1
	mkfile(t, filepath.Join(root, run, "test.edn"), `{:name "r", :lock :setnx}`)
	for _, name := range []string{"results.edn", "history.edn", "timeline.html"} {
		mkfifo(t, filepath.Join(root, run, name))
	}
	symlink(t, "history.edn", filepath.Join(root, run, "link-to-fifo"))
	mkfile(t, filepath.Join(root, cmp, "runs.txt"), "1\t1\tsetnx\t...\n")
	mkfifo(t, filepath.Join(root, cmp, "table.md"))
	mkfifo(t, filepath.Join(root, "q", t1, "test.edn"))
	mkfifo(t, filepath.Join(root, "c2", t1, "runs.txt"))
	if err := os.MkdirAll(filepath.Join(root, "d", t1, "test.edn"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHandler(t, root)
	for _, tc := range []struct {
		target string
		code   int
		want   []string
		not    []string
	}{
		{"/", 200, []string{`href="/run/` + run, `href="/run/` + cmp}, []string{"/run/q/", "/run/c2/", "/run/d/", "timeline.html"}},
		{"/run/" + run, 200, []string{"valid? unknown"}, []string{"timeline.html", "link-to-fifo"}},
		{"/run/" + cmp, 200, []string{"comparison"}, []string{"<h2>Table</h2>"}},
		{"/run/q/" + t1, 404, nil, nil},
		{"/run/c2/" + t1, 404, nil, nil},
		{"/run/d/" + t1, 404, nil, nil},
		{"/file/" + run + "/results.edn", 404, nil, nil},
		{"/file/" + run + "/history.edn", 404, nil, nil},
		{"/file/" + run + "/timeline.html", 404, nil, nil},
		{"/file/" + run + "/link-to-fifo", 404, nil, nil},
		{"/file/" + cmp + "/table.md", 404, nil, nil},
		{"/file/q/" + t1 + "/test.edn", 404, nil, nil},
		{"/file/d/" + t1 + "/test.edn", 404, nil, nil},
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			rec := request(t, h, method, tc.target)
			if rec == nil {
				continue
			}
			if rec.Code != tc.code {
				t.Errorf("%s %s: %d, want %d", method, tc.target, rec.Code, tc.code)
			}
			if method == http.MethodGet {
				contains(t, "GET "+tc.target, rec.Body.String(), tc.want, tc.not)
			}
		}
	}
}

// links are the links and sources of a page that lead into the server.
var links = regexp.MustCompile(`(?:href|src)="(/[^"]*)"`)

// TestOddNames: a run, comparison or file named with characters that mean
// something in a URL (#, ?, %, a %-escape of a dot, a backslash) is
// reachable by every link the pages give to it.
func TestOddNames(t *testing.T) {
	root := t.TempDir()
	const t1 = "20261201T094801.339Z"
	names := []string{"a#b", "q?x=1&y", "%2e%2e", "%2e", "per%cent", "%41", "sp ace", "semi;colon", "plus+",
		"uni✓", `back\slash`, `quote"`, "lt<gt>", "...", "bad\xffutf8", "latest!"}
	for _, n := range names {
		run := filepath.Join(root, n, t1)
		mkfile(t, filepath.Join(run, "test.edn"), `{:lock :setnx, :workers 3}`)
		mkfile(t, filepath.Join(run, "results.edn"), "{:valid? true}")
		mkfile(t, filepath.Join(run, "timeline.html"), "<!doctype html><title>t</title>")
		mkfile(t, filepath.Join(run, "rate.png"), "png")
		mkfile(t, filepath.Join(run, "odd #?%2e "+n+".png"), "png")
	}
	cmp := filepath.Join(root, "cmp#1?", t1)
	mkfile(t, filepath.Join(cmp, "runs.txt"), "1\t1\tsetnx\t...\n")
	mkfile(t, filepath.Join(cmp, "cell%2e?#", t1, "test.edn"), `{:lock :setnx}`)
	h := newHandler(t, root)
	base, _ := url.Parse("http://127.0.0.1/")
	seen := map[string]bool{}
	follow := func(from string) (string, bool) {
		rec := request(t, h, http.MethodGet, from)
		if rec == nil {
			return "", false
		}
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d", from, rec.Code)
		}
		return rec.Body.String(), rec.Code == http.StatusOK
	}
	index, _ := follow("/")
	var pages []string
	for _, m := range links.FindAllStringSubmatch(index, -1) {
		// As a browser reads the link: the fragment is not sent.
		u, err := base.Parse(html.UnescapeString(m[1]))
		if err != nil {
			t.Errorf("index link %q: %v", m[1], err)
			continue
		}
		pages = append(pages, u.RequestURI())
	}
	runs := 0
	for len(pages) > 0 {
		p := pages[0]
		pages = pages[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		body, ok := follow(p)
		if !ok || !strings.HasPrefix(p, "/run/") {
			continue
		}
		runs++
		for _, m := range links.FindAllStringSubmatch(body, -1) {
			if u, err := base.Parse(html.UnescapeString(m[1])); err != nil {
				t.Errorf("%s: link %q: %v", p, m[1], err)
			} else {
				pages = append(pages, u.RequestURI())
			}
		}
	}
	if want := len(names) + 2; runs != want {
		t.Errorf("%d run and comparison pages reached, want %d", runs, want)
	}
}

// csp parses a Content-Security-Policy: each directive's sources.
func csp(policy string) map[string][]string {
	m := map[string][]string{}
	for _, d := range strings.Split(policy, ";") {
		if f := strings.Fields(d); len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	return m
}

// inline finds the text of a page's inline elements of tag, but for JSON
// data blocks, which are never run.
func inline(page, tag string) []string {
	var out []string
	re := regexp.MustCompile(`(?s)<` + tag + `(\s[^>]*)?>(.*?)</` + tag + `>`)
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		if !strings.Contains(m[1], "application/json") {
			out = append(out, m[2])
		}
	}
	return out
}

// hashSource is the CSP source that allows an inline element of text.
func hashSource(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// TestHeaders: every response, whatever it is, says that it may be framed
// by the server's own pages only, that its type is not to be guessed and
// that no referrer leaves it, and carries a Content-Security-Policy that
// loads nothing from elsewhere: the pages' own style and script (which
// sorts a comparison's table) and the timeline's own script and style by
// their hashes, other files nothing at all, sandboxed.
func TestHeaders(t *testing.T) {
	root, run := fixture(t)
	mkfile(t, filepath.Join(root, run, "planted.html"), "<script>document.title='ran'</script>")
	grid, _ := gridFixture(t, root)
	h := newHandler(t, root)
	for _, tc := range []struct {
		method, target string
		code           int
		kind           string // page, timeline or file
	}{
		{"GET", "/", 200, "page"},
		{"GET", "/run/" + grid, 200, "page"},
		{"GET", "/?q=x&sort=name", 200, "page"},
		{"GET", "/run/" + run, 200, "page"},
		{"HEAD", "/run/" + run, 200, "page"},
		{"GET", "/file/" + run + "/timeline.html", 200, "timeline"},
		{"GET", "/file/" + run + "/planted.html", 200, "timeline"},
		{"GET", "/file/" + run + "/history.edn", 200, "file"},
		{"GET", "/file/" + run + "/rate.png", 200, "file"},
		{"GET", "/file/" + run + "/nothing", 404, "file"},
		{"GET", "/run/nothing", 404, "file"},
		{"GET", "/nothing", 404, "file"},
		{"POST", "/", 405, "file"},
	} {
		rec := request(t, h, tc.method, tc.target)
		if rec == nil {
			continue
		}
		what, hd := tc.method+" "+tc.target, rec.Result().Header
		if rec.Code != tc.code {
			t.Errorf("%s: %d, want %d", what, rec.Code, tc.code)
		}
		for k, v := range map[string]string{"X-Frame-Options": "SAMEORIGIN", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if hd.Get(k) != v {
				t.Errorf("%s: %s %q, want %q", what, k, hd.Get(k), v)
			}
		}
		policy := hd.Get("Content-Security-Policy")
		p := csp(policy)
		if !slices.Equal(p["default-src"], []string{"'none'"}) || !slices.Equal(p["frame-ancestors"], []string{"'self'"}) ||
			!slices.Equal(p["base-uri"], []string{"'none'"}) || strings.Contains(policy, "unsafe-inline") || strings.Contains(policy, "unsafe-eval") {
			t.Errorf("%s: Content-Security-Policy %q", what, policy)
			continue
		}
		body := rec.Body.String()
		switch tc.kind {
		case "page":
			for _, s := range inline(body, "style") {
				if !slices.Contains(p["style-src"], hashSource(s)) {
					t.Errorf("%s: the page's style is not allowed by %q", what, policy)
				}
			}
			// One script, by its hash: the one that sorts a comparison's table.
			for _, s := range inline(body, "script") {
				if !slices.Contains(p["script-src"], hashSource(s)) {
					t.Errorf("%s: the page's script is not allowed by %q", what, policy)
				}
			}
			if len(p["script-src"]) != 1 || !slices.Equal(p["img-src"], []string{"'self'"}) || !slices.Equal(p["frame-src"], []string{"'self'"}) {
				t.Errorf("%s: Content-Security-Policy %q", what, policy)
			}
		case "timeline":
			if len(p["script-src"]) != 1 || len(p["sandbox"]) > 0 {
				t.Errorf("%s: Content-Security-Policy %q", what, policy)
			}
		case "file":
			if _, ok := p["sandbox"]; !ok || len(p) != 5 {
				t.Errorf("%s: Content-Security-Policy %q, want default-src, base-uri, form-action, frame-ancestors and sandbox", what, policy)
			}
		}
	}
	// The timeline hiatus made runs: its script and style are allowed.
	rec := request(t, h, http.MethodGet, "/file/"+run+"/timeline.html")
	if rec == nil {
		return
	}
	p, body := csp(rec.Result().Header.Get("Content-Security-Policy")), rec.Body.String()
	scripts, styles := inline(body, "script"), inline(body, "style")
	if len(scripts) != 1 || len(styles) != 1 || !slices.Contains(p["script-src"], hashSource(scripts[0])) ||
		!slices.Contains(p["style-src"], hashSource(styles[0])) {
		t.Errorf("the timeline's %d scripts and %d styles are not allowed by %v", len(scripts), len(styles), p)
	}
}

// TestLoopbackOnly: on the loopback, serve answers requests for a loopback
// name only, so that a page elsewhere whose name it rebinds to 127.0.0.1
// cannot read the store through a visitor's browser.
func TestLoopbackOnly(t *testing.T) {
	root, _ := fixture(t)
	h := LoopbackOnly(newHandler(t, root))
	for host, code := range map[string]int{
		"localhost:8080": 200, "127.0.0.1:8080": 200, "127.1.2.3": 200, "[::1]:8080": 200, "localhost": 200,
		"evil.example:8080": http.StatusMisdirectedRequest, "evil.example": http.StatusMisdirectedRequest,
		"10.0.0.1:8080": http.StatusMisdirectedRequest, "localhost.evil.example": http.StatusMisdirectedRequest, "": http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != code || code != 200 && strings.Contains(rec.Body.String(), "lock-counter") {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, code)
		}
	}
}
