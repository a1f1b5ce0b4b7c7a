// Package web serves a store of runs as web pages, for `hiatus serve`: an
// index of every run and comparison with its verdict and key figures, a page
// for each with its explanations, timeline, plots and files, and the raw
// files.
//
// It only reads the store, and only its directories and regular files: no
// request writes; no name, however spelt ("..", encoded slashes) and
// whatever symlinks it crosses, is read outside the store; a FIFO or a
// device is never read nor waited on. Every answer carries a
// Content-Security-Policy under which the only scripts that run are those
// of the timelines hiatus makes and the pages' own, which sorts a
// comparison's table.
package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/report"
	"github.com/hiatus-dev/hiatus/store"
)

// The Content-Security-Policy of every answer but the pages and the
// store's HTML files: nothing loads, nothing runs, and a file the browser
// takes for a page (an SVG, an HTML file by another name) is sandboxed.
const fileCSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox"

// pageTimeout bounds the index and run pages, which read a few small files
// a run: only a store of a great many runs, or a disk that hangs, comes
// near it.
const pageTimeout = 30 * time.Second

// maxTable is the most of a comparison's table.md a page shows.
const maxTable = 1 << 20

// A Server serves one store.
type Server struct {
	dir         string // the store, symlinks resolved, as the index names it
	fsys        storeFS
	handler     http.Handler
	pageCSP     string // the index's and run pages'
	timelineCSP string // the store's HTML files'
}

// Open serves the store at dir, a directory, until Close. The store is
// read at each request, so runs that finish while it serves appear.
func Open(dir string) (*Server, error) {
	abs, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if abs, err = filepath.Abs(abs); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	// "/." makes the open fail on anything but a directory: a FIFO would
	// make it wait for a writer.
	root, err := os.OpenRoot(abs + string(filepath.Separator) + ".")
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	s := &Server{
		dir:  abs,
		fsys: storeFS{root},
		pageCSP: "default-src 'none'; script-src " + report.CSPHash(sortJS) + "; style-src " + report.CSPHash(css) +
			"; img-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'self'",
		timelineCSP: report.TimelineCSP() + "; frame-ancestors 'self'",
	}
	mux := http.NewServeMux()
	// The pages read a file or two a run: a store so large that they take
	// long is cut short, and its walk stops with the request's context.
	mux.Handle("/{$}", http.TimeoutHandler(http.HandlerFunc(s.index), pageTimeout, "the store is too large to list in time"))
	mux.Handle("/run/", http.TimeoutHandler(http.HandlerFunc(s.run), pageTimeout, "the run is too large to show in time"))
	mux.HandleFunc("/file/", s.file)
	s.handler = guard(mux)
	return s, nil
}

// Close stops reading the store; requests after it find nothing.
func (s *Server) Close() error { return s.fsys.root.Close() }

// ServeHTTP answers a request for a page or file of the store.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// guard gives every answer the headers that keep a page of the store from
// doing harm — it may be framed by serve's own pages only, its type is not
// guessed, it sends no referrer, and by default nothing in it loads or runs
// (the pages and HTML files set their own policy) — and refuses every
// method but GET and HEAD.
func guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", fileCSP)
		hd.Set("X-Frame-Options", "SAMEORIGIN")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			hd.Set("Allow", "GET, HEAD")
			http.Error(w, "read-only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// storeName maps rel, the rest of a URL's path (decoded), to a name in the
// store: "." for the store itself. A ".." is refused: os.Root would keep
// it inside the store, but no link of serve's has one.
func storeName(rel string) (string, bool) {
	var segs []string
	for _, seg := range strings.Split(rel, "/") {
		switch seg {
		case "..":
			return "", false
		case "", ".":
		default:
			segs = append(segs, seg)
		}
	}
	if len(segs) == 0 {
		return ".", true
	}
	return strings.Join(segs, "/"), true
}

func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	name, ok := storeName(strings.TrimPrefix(r.URL.Path, "/file/"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	f, fi, err := s.fsys.open(name, fs.FileMode.IsRegular)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	switch path.Ext(name) {
	case ".html", ".htm":
		// Only a timeline's own script and style, by their hashes: a page
		// planted in the store runs nothing.
		w.Header().Set("Content-Security-Policy", s.timelineCSP)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	case ".edn", ".log", ".txt", ".md", ".prom":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

// A runInfo is what the index and a run's page say of a run.
type runInfo struct {
	report.Summary
	Rel      string // name in the store
	Compare  bool   // a comparison's directory, not a run
	Timeline bool   // the run has a timeline.html
	Files    []string
	Plots    []string
	Table    string // a comparison's table.md
	Grid     *grid  // a comparison's table.json, on its page
	Children []runInfo
}

// runs finds every run and comparison under the store: a run is a
// directory with a test.edn, a comparison one with a runs.txt. Symlinks
// (latest) are not followed. The walk stops when ctx ends.
func (s *Server) runs(ctx context.Context) []runInfo {
	var out []runInfo
	_ = fs.WalkDir(s.fsys, ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil || !d.IsDir():
			return nil // an unreadable corner of the store is skipped, not fatal
		case p != "." && strings.Count(p, "/") > 1:
			return fs.SkipDir // runs and comparisons are STORE/NAME/TIME
		case s.fsys.regular(path.Join(p, store.CompareRuns)), s.fsys.regular(path.Join(p, store.Test)):
			out = append(out, s.info(p))
			return fs.SkipDir
		}
		return nil
	})
	slices.SortFunc(out, func(a, b runInfo) int { return b.Started.Compare(a.Started) })
	return out
}

// info reads what the pages show of the run or comparison named name.
func (s *Server) info(name string) runInfo {
	ri := runInfo{Rel: name, Summary: report.ReadSummaryFS(s.fsys, name)}
	if name == "." {
		// The store is a run (serve --store store/latest): its own path
		// names it, as a run's does in a store.
		if ri.Name == "." {
			ri.Name = filepath.Base(filepath.Dir(s.dir))
		}
		ri.Started, _ = time.Parse(store.TimeLayout, filepath.Base(s.dir))
	}
	ri.Compare = s.fsys.regular(path.Join(name, store.CompareRuns))
	ri.Timeline = s.fsys.regular(path.Join(name, report.TimelineFile))
	if ri.Compare {
		ri.Config = "comparison"
		ri.Table = s.fsys.readText(path.Join(name, store.CompareTable), maxTable)
		if ri.Started.IsZero() {
			// A grid collected from cells lies where its job put it,
			// under any name: its table says when it started.
			ri.Started = s.gridStarted(name)
		}
	}
	return ri
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	runs := s.runs(r.Context())
	if r.Context().Err() != nil {
		return // timed out or gone: no one reads the answer
	}
	q := strings.ToLower(r.URL.Query().Get("q"))
	var shown []runInfo
	for _, ri := range runs {
		if q == "" || strings.Contains(strings.ToLower(ri.Name+" "+ri.Config+" "+ri.Verdict+" "+ri.Rel), q) {
			shown = append(shown, ri)
		}
	}
	sortRuns(shown, r.URL.Query().Get("sort"))
	s.page(w, indexPage, map[string]any{"Store": s.dir, "Runs": shown, "Q": r.URL.Query().Get("q"), "Total": len(runs)})
}

// sortRuns orders runs by a column of the index: name, verdict, or (the
// default) start time, newest first.
func sortRuns(runs []runInfo, by string) {
	switch by {
	case "name":
		slices.SortStableFunc(runs, func(a, b runInfo) int { return strings.Compare(a.Name, b.Name) })
	case "verdict":
		slices.SortStableFunc(runs, func(a, b runInfo) int { return strings.Compare(a.Verdict, b.Verdict) })
	}
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	name, ok := storeName(strings.TrimPrefix(r.URL.Path, "/run/"))
	if !ok || !(s.fsys.regular(path.Join(name, store.Test)) || s.fsys.regular(path.Join(name, store.CompareRuns))) {
		http.NotFound(w, r)
		return
	}
	ri := s.info(name)
	if ri.Compare {
		ri.Grid = s.readGrid(name)
	}
	entries, _ := fs.ReadDir(s.fsys, name)
	for _, e := range entries {
		switch {
		case e.IsDir() && ri.Compare && ri.Grid != nil:
			// Its runs are those its table links, wherever they lie
			// inside it (a grid collected from cells keeps them in
			// cell-N/NAME-ROW/TIME/).
		case e.IsDir() && ri.Compare:
			// A comparison's cells: NAME-ROW/TIME/.
			sub, _ := fs.ReadDir(s.fsys, path.Join(name, e.Name()))
			for _, t := range sub {
				if cell := path.Join(name, e.Name(), t.Name()); t.IsDir() && s.fsys.regular(path.Join(cell, store.Test)) {
					ri.Children = append(ri.Children, s.info(cell))
				}
			}
		case e.IsDir() && e.Name() == store.Metrics:
			// The workers' guard metrics: metrics/worker-N.prom.
			sub, _ := fs.ReadDir(s.fsys, path.Join(name, e.Name()))
			for _, m := range sub {
				if m.Type().IsRegular() {
					ri.Files = append(ri.Files, path.Join(e.Name(), m.Name()))
				}
			}
		case e.Type().IsRegular():
			ri.Files = append(ri.Files, e.Name())
			if strings.HasSuffix(e.Name(), ".png") {
				ri.Plots = append(ri.Plots, e.Name())
			}
		}
	}
	if ri.Grid != nil {
		for _, r := range ri.Grid.Rows {
			for _, run := range r.Runs {
				if run.rel != "" {
					ri.Children = append(ri.Children, s.info(run.rel))
				}
			}
		}
	}
	// The plots in the order Jepsen shows them; others after.
	first := []string{report.LatencyRaw, report.LatencyQuantiles, report.Rate}
	slices.SortStableFunc(ri.Plots, func(a, b string) int { return rank(first, a) - rank(first, b) })
	s.page(w, runPage, ri)
}

// rank is where name comes in order; after it when it is not there.
func rank(order []string, name string) int {
	if i := slices.Index(order, name); i >= 0 {
		return i
	}
	return len(order)
}

// page answers with t executed on data, under the pages' policy.
func (s *Server) page(w http.ResponseWriter, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		http.Error(w, "page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Security-Policy", s.pageCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = buf.WriteTo(w) // a client gone is no error of the server's
}

// storeFS reads the store through an os.Root, so that no name, whatever
// symlinks it crosses, leads out of it (a symlink must be relative and
// stay inside), and opens only directories and regular files. Its names
// are slash-separated, of any bytes: not only UTF-8, as fs.ValidPath
// would have them, since a run's directory may be named in any.
type storeFS struct{ root *os.Root }

// errSpecial refuses a file that is neither a directory nor a regular file.
var errSpecial = errors.New("not a directory or regular file")

func (s storeFS) Open(name string) (fs.File, error) {
	f, _, err := s.open(name, func(m fs.FileMode) bool { return m.IsDir() || m.IsRegular() })
	if err != nil {
		return nil, err
	}
	return f, nil
}

// open opens name if its mode, before it is opened and once open, is one
// ok takes. The stat first keeps a special file from being opened at all
// (opening a device can act); O_NONBLOCK keeps one swapped in after it
// from making the open wait (a FIFO waits for a writer), and the fstat
// then refuses it. On a directory or regular file O_NONBLOCK does nothing.
func (s storeFS) open(name string, ok func(fs.FileMode) bool) (*os.File, fs.FileInfo, error) {
	if !validName(name) {
		return nil, nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if fi, err := s.root.Stat(name); err != nil {
		return nil, nil, err
	} else if !ok(fi.Mode()) {
		return nil, nil, &fs.PathError{Op: "open", Path: name, Err: errSpecial}
	}
	f, err := s.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !ok(fi.Mode()) {
		err = &fs.PathError{Op: "open", Path: name, Err: errSpecial}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// regular reports whether name is a regular file in the store.
func (s storeFS) regular(name string) bool {
	if !validName(name) {
		return false
	}
	fi, err := s.root.Stat(name)
	return err == nil && fi.Mode().IsRegular()
}

// readText reads the regular file name; "" if it cannot, or if it is
// longer than limit.
func (s storeFS) readText(name string, limit int64) string {
	f, _, err := s.open(name, fs.FileMode.IsRegular)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil || int64(len(b)) > limit {
		return ""
	}
	return string(b)
}

// validName reports whether name is "." or a relative slash-separated path
// of no empty, "." or ".." element.
func validName(name string) bool {
	if name == "." {
		return true
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// LoopbackOnly answers only requests whose Host names this machine's
// loopback (localhost, 127.0.0.1, [::1]), as a browser sends them to a
// server it reached there. A page elsewhere that points a name of its own
// at 127.0.0.1 (DNS rebinding) would otherwise read the store through the
// visitor's browser: its requests carry its own name.
func LoopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if ip := net.ParseIP(host); !(host == "localhost" || ip != nil && ip.IsLoopback()) {
			w.Header().Set("Content-Security-Policy", fileCSP)
			http.Error(w, "serve answers requests for the loopback address it listens on, not for "+r.Host, http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}
