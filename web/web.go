// Package web serves a store of runs as web pages, for `hiatus serve`: an
// index of every run and comparison with its verdict and key figures, a page
// for each with its explanations, timeline, plots and files, and the raw
// files. It only reads the store: no request writes, and no path outside
// the store can be read, through "..", encoded slashes or symlinks.
package web

import (
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hiatus-dev/hiatus/report"
	"github.com/hiatus-dev/hiatus/store"
)

// A server serves one store.
type server struct {
	root string // the store, symlinks resolved
}

// Handler serves the store at dir. The store is read at each request, so
// runs that finish while it serves appear.
func Handler(dir string) (http.Handler, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	s := &server{root: root}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", s.index)
	mux.HandleFunc("/run/", s.run)
	mux.HandleFunc("/file/", s.file)
	return readOnly(mux), nil
}

// readOnly refuses every method but GET and HEAD.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// resolve maps rel, a slash-separated path from a URL, to a path inside
// the store, or fails: a ".." anywhere, an absolute path, or a symlink that
// leads out of the store.
func (s *server) resolve(rel string) (string, error) {
	rel = strings.TrimPrefix(rel, "/")
	for _, seg := range strings.Split(rel, "/") {
		if seg == ".." || strings.ContainsRune(seg, '\\') || strings.ContainsRune(seg, 0) {
			return "", errors.New("not a path in the store")
		}
	}
	p := filepath.Join(s.root, filepath.FromSlash(path.Clean("/"+rel)))
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	if real != s.root && !strings.HasPrefix(real, s.root+string(filepath.Separator)) {
		return "", errors.New("not a path in the store")
	}
	return real, nil
}

// rel is p as a slash-separated path from the store's root.
func (s *server) rel(p string) string {
	r, err := filepath.Rel(s.root, p)
	if err != nil {
		return ""
	}
	return filepath.ToSlash(r)
}

func (s *server) file(w http.ResponseWriter, r *http.Request) {
	p, err := s.resolve(strings.TrimPrefix(r.URL.Path, "/file/"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(p)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	if strings.HasSuffix(p, ".edn") || strings.HasSuffix(p, ".log") || strings.HasSuffix(p, ".txt") {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

// A runInfo is what the index and a run's page say of a run.
type runInfo struct {
	report.Summary
	Rel      string // path from the store's root
	Compare  bool   // a comparison's directory, not a run
	Timeline bool   // the run has a timeline.html
	Files    []string
	Plots    []string
	Table    string // a comparison's table.md
	Children []runInfo
}

// runs finds every run and comparison under the store: a run is a
// directory with a test.edn, a comparison one with a runs.txt. Symlinks
// (latest) are not followed.
func (s *server) runs() ([]runInfo, error) {
	var out []runInfo
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // an unreadable corner of the store is skipped, not fatal
		}
		if rel := s.rel(p); rel != "." && strings.Count(rel, "/") > 1 {
			return fs.SkipDir // runs and comparisons are STORE/NAME/TIME
		}
		switch {
		case exists(filepath.Join(p, store.CompareRuns)):
			out = append(out, s.info(p))
			return fs.SkipDir
		case exists(filepath.Join(p, store.Test)):
			out = append(out, s.info(p))
			return fs.SkipDir
		}
		return nil
	})
	slices.SortFunc(out, func(a, b runInfo) int { return b.Started.Compare(a.Started) })
	return out, err
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// info reads what the pages show of the run or comparison at p.
func (s *server) info(p string) runInfo {
	ri := runInfo{Rel: s.rel(p), Summary: report.ReadSummary(p)}
	ri.Compare = exists(filepath.Join(p, store.CompareRuns))
	ri.Timeline = exists(filepath.Join(p, report.TimelineFile))
	if ri.Compare {
		ri.Config = "comparison"
		if b, err := os.ReadFile(filepath.Join(p, "table.md")); err == nil {
			ri.Table = string(b)
		}
	}
	return ri
}

func (s *server) index(w http.ResponseWriter, r *http.Request) {
	runs, err := s.runs()
	if err != nil {
		http.Error(w, "cannot read the store", http.StatusInternalServerError)
		return
	}
	q := strings.ToLower(r.URL.Query().Get("q"))
	var shown []runInfo
	for _, ri := range runs {
		if q == "" || strings.Contains(strings.ToLower(ri.Name+" "+ri.Config+" "+ri.Verdict+" "+ri.Rel), q) {
			shown = append(shown, ri)
		}
	}
	sortRuns(shown, r.URL.Query().Get("sort"))
	page(w, indexPage, map[string]any{"Store": s.root, "Runs": shown, "Q": r.URL.Query().Get("q"), "Total": len(runs)})
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

func (s *server) run(w http.ResponseWriter, r *http.Request) {
	p, err := s.resolve(strings.TrimPrefix(r.URL.Path, "/run/"))
	if err != nil || !(exists(filepath.Join(p, store.Test)) || exists(filepath.Join(p, store.CompareRuns))) {
		http.NotFound(w, r)
		return
	}
	ri := s.info(p)
	entries, _ := os.ReadDir(p)
	for _, e := range entries {
		switch {
		case e.IsDir() && ri.Compare:
			// A comparison's cells: NAME-ROW/TIME/.
			sub, _ := os.ReadDir(filepath.Join(p, e.Name()))
			for _, t := range sub {
				if q := filepath.Join(p, e.Name(), t.Name()); t.IsDir() && exists(filepath.Join(q, store.Test)) {
					ri.Children = append(ri.Children, s.info(q))
				}
			}
		case e.Type().IsRegular():
			ri.Files = append(ri.Files, e.Name())
			if strings.HasSuffix(e.Name(), ".png") {
				ri.Plots = append(ri.Plots, e.Name())
			}
		}
	}
	// The plots in the order Jepsen shows them; others after.
	first := []string{report.LatencyRaw, report.LatencyQuantiles, report.Rate}
	slices.SortStableFunc(ri.Plots, func(a, b string) int { return rank(first, a) - rank(first, b) })
	page(w, runPage, ri)
}

// rank is where name comes in order; after it when it is not there.
func rank(order []string, name string) int {
	if i := slices.Index(order, name); i >= 0 {
		return i
	}
	return len(order)
}

func page(w http.ResponseWriter, t *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := t.Execute(w, data); err != nil {
		http.Error(w, "page: "+err.Error(), http.StatusInternalServerError)
	}
}
