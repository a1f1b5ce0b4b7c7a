package web

import (
	"bufio"
	"crypto/rand"
	"html"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hiatus-dev/hiatus/internal/stacks"
)

// FuzzServe builds a store from tree — directories, files, FIFOs and
// symlinks, into the store and out of it, under names of any bytes — and
// asks serve for each line of targets, then for every link the pages it
// answered give. Whatever the store and the request:
//   - no answer holds a secret kept outside the store;
//   - every request is answered within requestBound, and none with a 5xx;
//   - every answer carries the Content-Security-Policy and framing headers;
//   - every link a page gives leads to a page or file (200);
//   - no goroutine is left running serve's code afterwards.
//
// tree has a line an entry, KIND<tab>PATH[<tab>ARG]: d a directory, f a file
// of ARG, p a FIFO, l a symlink to ARG, in which $OUT and $STORE stand for
// the absolute paths of the directory beside the store (which holds the
// secret: secret.txt, test.edn, results.edn, a FIFO fifo, a run d/T) and of
// the store. targets has a request a line: a request target, after HEAD or
// POST and a space for those methods.
//
//	go test ./web -run '^$' -fuzz FuzzServe -fuzztime 10m
func FuzzServe(f *testing.F) {
	for _, seed := range serveSeeds() {
		f.Add(seed[0], seed[1])
	}
	secret := "secret-" + rand.Text() // in no input the fuzzer could make
	f.Fuzz(func(t *testing.T, tree, targets string) {
		dir := t.TempDir()
		root, out := filepath.Join(dir, "store"), filepath.Join(dir, "outside")
		mkfile(t, filepath.Join(out, "secret.txt"), secret)
		mkfile(t, filepath.Join(out, "test.edn"), `{:name "`+secret+`"}`)
		mkfile(t, filepath.Join(out, "results.edn"), `{:valid? false, :lock-counter {:valid? false, :explanation "`+secret+`"}}`)
		mkfile(t, filepath.Join(out, "d", "T", "test.edn"), `{:name "`+secret+`"}`)
		mkfifo(t, filepath.Join(out, "fifo"))
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		build(t, root, out, tree)
		h := newHandler(t, root)
		var queue []ask
		for _, line := range append([]string{"/"}, strings.Split(targets, "\n")...) {
			a := ask{method: http.MethodGet, target: line}
			if m, rest, ok := strings.Cut(line, " "); ok && (m == http.MethodGet || m == http.MethodHead || m == http.MethodPost) {
				a.method, a.target = m, rest
			}
			queue = append(queue, a)
		}
		asked := map[ask]bool{}
		for len(queue) > 0 && len(asked) < 64 {
			a := queue[0]
			queue = queue[1:]
			if !asked[a] {
				asked[a] = true
				queue = append(queue, a.check(t, h, secret)...)
			}
		}
		if b := busy(); len(b) > 0 {
			t.Fatalf("goroutines left in serve's code:\n%s", strings.Join(b, "\n\n"))
		}
	})
}

// serveSeeds are FuzzServe's seeds: trees and the requests to make of them.
func serveSeeds() [][2]string {
	const run = "f\tr/T/test.edn\t{:name \"r\", :lock :setnx, :workers 3}\n"
	dotdot := []string{"/file/../outside/secret.txt", "/file/..%2Foutside%2Fsecret.txt", "/file/%2e%2e/outside/secret.txt",
		"/file/%2E%2e/outside/secret.txt", "/file/.%2e/outside/secret.txt", "/file/..%5coutside%5csecret.txt",
		"/file/%252e%252e/outside/secret.txt", "/file/..;/outside/secret.txt", "/file/%c0%ae%c0%ae/outside/secret.txt",
		"/file/r/T/../../../outside/secret.txt", "/file/r/T/%2e%2e/%2e%2e/%2e%2e/outside/secret.txt", "/file/r/T/out/secret.txt",
		"/file/r/T/secret", "/file/r/T/abs", "/file/r/T/up/outside/secret.txt", "/run/r/out-run/T", "/file/r/out-run/T/test.edn",
		"/run/latest", "/file/latest/test.edn", "/file/r/T/loop", "/file//etc/passwd", "POST /file/r/T/test.edn"}
	return [][2]string{
		// The review's probes: a table.md linked to /etc/passwd, a FIFO
		// named results.edn, runs named with #, ? and %2e.
		{"f\tc/T/runs.txt\tx\nl\tc/T/table.md\t/etc/passwd\nl\tc/T/test.edn\t$OUT/test.edn\n" +
			"l\tc/T/results.edn\t$OUT/results.edn\n", "/\n/run/c/T\n/file/c/T/table.md\n/file/c/T/test.edn"},
		{run + "p\tr/T/results.edn\np\tr/T/history.edn\np\tc/T/runs.txt\nf\tc2/T/runs.txt\t\np\tc2/T/table.md\n" +
			"p\tq/T/test.edn\nl\tr/T/fifo-link\thistory.edn\nl\tr/T/out-fifo\t$OUT/fifo\np\tr/T/timeline.html\n",
			"/run/r/T\n/file/r/T/history.edn\nHEAD /file/r/T/results.edn\n/file/r/T/fifo-link\n/file/r/T/out-fifo\n/run/c2/T\n/run/q/T"},
		{"f\ta#b/T/test.edn\t{:lock :setnx}\nf\tq?x=1/T/test.edn\t{}\nf\t%2e%2e/T/test.edn\t{}\nf\t%2e/T/test.edn\t{}\n" +
			"f\ta#b/T/timeline.html\t<p>\nf\ta#b/T/x #?%2e.png\tpng\nf\tback\\slash/T/test.edn\t{}\nf\tbad\xff/T/test.edn\t{}\n",
			"/run/a%23b/T\n/run/q%3Fx=1/T\n/run/%252e%252e/T\n/run/a#b/T\n/run/q?x=1/T"},
		// Every spelling of "..", and links out of the store and in it.
		{run + "l\tr/T/out\t$OUT\nl\tr/T/secret\t$OUT/secret.txt\nl\tr/T/abs\t$STORE/r/T/test.edn\nl\tr/T/up\t../../..\n" +
			"l\tr/out-run\t$OUT/d\nl\tlatest\tr/T\nl\tr/T/loop\tloop\n", strings.Join(dotdot, "\n")},
		// A run, a planted page and a comparison with its cells.
		{run + "f\tr/T/results.edn\t{:valid? false, :lock-counter {:valid? false, :writes 3, :explanation \"<script>x</script>\"}}\n" +
			"f\tr/T/planted.html\t<script>document.title=1</script>\nf\tr/T/rate.png\tpng\nd\tr/T/sub\n" +
			"f\tc/T/runs.txt\t1\nf\tc/T/table.md\t| a |\nf\tc/T/cell/T2/test.edn\t{}\nl\tc/T/cell2\t../../r\n",
			"/?q=r&sort=verdict\n/run/c/T\n/file/r/T/planted.html\n/file/r/T/sub\n/run/\n/file/\n*"},
		// A store that is a run itself.
		{"f\ttest.edn\t{:name \"root\"}\nf\ttable.md\tt\nf\truns.txt\t1\n", "/run/\n/run/.\n/file/test.edn"},
	}
}

// An ask is a request FuzzServe makes.
type ask struct {
	method, target string
	link           bool // a link a page gave
}

// check makes the request of h and fails the test if the answer breaks a
// rule of FuzzServe's; it returns the links of a page to ask for next.
func (a ask) check(t *testing.T, h http.Handler, secret string) []ask {
	t.Helper()
	line := a.method + " " + a.target
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(line + " HTTP/1.1\r\nHost: hiatus\r\n\r\n")))
	if err != nil {
		return nil // the server answers 400 before any handler
	}
	rec := serveWithin(t, h, req)
	if rec == nil {
		t.FailNow()
	}
	body, hd := rec.Body.String(), rec.Result().Header
	switch {
	case strings.Contains(body, secret):
		t.Fatalf("%s: the answer holds the secret kept outside the store:\n%s", line, body)
	case rec.Code >= 500:
		t.Fatalf("%s: %d %s", line, rec.Code, body)
	case !strings.HasPrefix(hd.Get("Content-Security-Policy"), "default-src 'none';") || hd.Get("X-Frame-Options") != "SAMEORIGIN":
		t.Fatalf("%s: headers %v", line, hd)
	case a.link && rec.Code != http.StatusOK:
		t.Fatalf("%s: %d, from a link a page gave", line, rec.Code)
	}
	var next []ask
	if a.method == http.MethodGet && rec.Code == http.StatusOK && strings.HasPrefix(hd.Get("Content-Type"), "text/html") &&
		(req.URL.Path == "/" || strings.HasPrefix(req.URL.Path, "/run/")) {
		for _, l := range pageLinks(body) {
			next = append(next, ask{method: http.MethodGet, target: l, link: true})
		}
	}
	return next
}

// build makes the entries tree lists (see FuzzServe) in the directory
// dir; an entry that cannot be made is left out. It makes them through an
// os.Root, so that no entry is made through a symlink out of dir, nor by
// opening a FIFO.
func build(t testing.TB, dir, out, tree string) {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	links := strings.NewReplacer("$OUT", out, "$STORE", dir)
	lines := strings.Split(tree, "\n")
	for _, line := range lines[:min(len(lines), 64)] {
		kind, rest, _ := strings.Cut(line, "\t")
		p, arg, _ := strings.Cut(rest, "\t")
		var parts []string
		for _, seg := range strings.Split(p, "/") {
			if seg != "" && seg != "." && seg != ".." && !strings.ContainsRune(seg, 0) {
				parts = append(parts, seg[:min(len(seg), 255)])
			}
		}
		if len(parts) == 0 || len(parts) > 6 {
			continue
		}
		name := strings.Join(parts, "/")
		if root.MkdirAll(path.Dir(name), 0o755) != nil {
			continue
		}
		switch kind {
		case "d":
			_ = root.MkdirAll(name, 0o755)
		case "f":
			if f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
				_, _ = f.WriteString(arg)
				f.Close()
			}
		case "p":
			if d, err := root.OpenFile(path.Dir(name), os.O_RDONLY|syscall.O_DIRECTORY, 0); err == nil {
				_ = unix.Mkfifoat(int(d.Fd()), path.Base(name), 0o644)
				d.Close()
			}
		case "l":
			_ = root.Symlink(links.Replace(arg), name)
		}
	}
}

// pageLinks are the request targets of the links and sources of a page
// that lead into the server, as a browser would send them.
func pageLinks(page string) []string {
	base, _ := url.Parse("http://hiatus/")
	var out []string
	for _, m := range links.FindAllStringSubmatch(page, -1) {
		if u, err := base.Parse(html.UnescapeString(m[1])); err == nil {
			out = append(out, u.RequestURI())
		}
	}
	return out
}

// busy returns the stacks of the goroutines running serve's code: any
// frame of this module's but in a test file.
func busy() []string {
	var out []string
	for _, g := range stacks.Goroutines() {
		lines := strings.Split(g, "\n")
		for i := 1; i+1 < len(lines); i += 2 {
			fn, file := lines[i], strings.TrimSpace(lines[i+1])
			if strings.HasPrefix(fn, "github.com/hiatus-dev/hiatus/") && !strings.Contains(file, "_test.go:") {
				out = append(out, g)
				break
			}
		}
	}
	return slices.Clip(out)
}
