package report

import (
	"cmp"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/store"
)

// A Summary is what a run directory says of its run in words: its
// configuration from test.edn and its verdicts from results.edn. The
// timeline's header and the pages of `hiatus serve` show it.
type Summary struct {
	Name    string
	Started time.Time // zero when unknown
	Config  string    // one line, as `hiatus run` prints it
	Verdict string    // "true", "false" or "unknown", as results.edn's :valid?
	Figures string    // the lock-counter check's key figures, in one line
	Checks  []Check
	Workers int // worker slots, 0 when unknown
	// Model is the model the run's history is checked against, as
	// test.edn says (:model); "" when it does not.
	Model string
}

// RunModel is the model of the history of the run in dir, as its test.edn
// says; the lock-counter's, every run's before a run had workloads, when
// it says none.
func (s Summary) RunModel() string {
	return cmp.Or(s.Model, checker.ModelLockCounter)
}

// A Check is one check of results.edn.
type Check struct {
	Name, Verdict, Explanation string
}

// ReadSummary reads the summary of the run in dir; what dir lacks is left
// empty, and the verdict unknown.
func ReadSummary(dir string) Summary {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // store/latest names no run
	}
	return summarize(filepath.Base(filepath.Dir(dir)), filepath.Base(dir), func(name string) (map[history.Keyword]any, bool) {
		return readEDN(dir, name)
	})
}

// maxSummaryFile is the most of a test.edn or results.edn a summary
// reads: hiatus writes them in kilobytes, and a store served to others
// may hold anything under those names.
const maxSummaryFile = 16 << 20

// ReadSummaryFS is ReadSummary for the run in dir, a slash-separated path
// in fsys, which every file is read through: fsys decides what may be
// read (`hiatus serve` gives one that opens only regular files inside the
// store). A file longer than 16 MiB is read as if it were not there. The
// run's name and start time come from dir's path as ReadSummary's do:
// dir "." has neither but what test.edn says.
func ReadSummaryFS(fsys fs.FS, dir string) Summary {
	return summarize(path.Base(path.Dir(dir)), path.Base(dir), func(name string) (map[history.Keyword]any, bool) {
		f, err := fsys.Open(path.Join(dir, name))
		if err != nil {
			return nil, false
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxSummaryFile+1))
		if err != nil || len(b) > maxSummaryFile {
			return nil, false
		}
		return parseEDNMap(b)
	})
}

// summarize makes the summary of a run named name (its test's), started at
// start (its directory's name), from its files as read reads them.
func summarize(name, start string, read func(name string) (map[history.Keyword]any, bool)) Summary {
	s := Summary{Name: name, Verdict: "unknown"}
	s.Started, _ = time.Parse(store.TimeLayout, start)
	if test, ok := read(store.Test); ok {
		// The run's own words for its settings (harness.Config.Describe);
		// a run made before test.edn kept them, these.
		if d, ok := test["description"].(string); ok {
			s.Config = d
		} else {
			s.Config = Describe(test)
		}
		if n, ok := history.Int(test["workers"]); ok {
			s.Workers = int(n)
		}
		if name, ok := test["name"].(string); ok {
			s.Name = name
		}
		if m, ok := test["model"].(history.Keyword); ok {
			s.Model = string(m)
		}
	}
	if res, ok := read(store.Results); ok {
		s.SetResults(res)
	}
	return s
}

// SetResults takes the verdicts of results.edn, read as a map.
func (s *Summary) SetResults(res map[history.Keyword]any) {
	s.Verdict = verdict(res["valid?"])
	s.Checks, s.Figures = checks(res)
}

// readEDN reads a map from the EDN file name of the run directory dir: a
// regular file of its own (not a link), of at most maxSummaryFile bytes.
func readEDN(dir, name string) (map[history.Keyword]any, bool) {
	d, err := files.OpenDir(dir)
	if err != nil {
		return nil, false
	}
	defer d.Close()
	b, err := d.ReadFile(name, maxSummaryFile)
	if err != nil {
		return nil, false
	}
	return parseEDNMap(b)
}

// parseEDNMap reads b as an EDN map.
func parseEDNMap(b []byte) (map[history.Keyword]any, bool) {
	v, err := history.ParseValue(string(b))
	m, ok := v.(map[history.Keyword]any)
	return m, err == nil && ok
}

func verdict(v any) string {
	switch v {
	case true:
		return "true"
	case false:
		return "false"
	}
	return "unknown"
}

// Describe says in one line what test.edn configured, for a run made
// before test.edn kept the run's own words for it (:description).
func Describe(t map[history.Keyword]any) string {
	get := func(k string) string {
		if s, ok := t[history.Keyword(k)].(string); ok {
			return s // an adapter's command (exec:…), unquoted
		}
		return strings.TrimPrefix(string(history.AppendValue(nil, t[history.Keyword(k)])), ":")
	}
	ms := func(k string) string {
		n, _ := history.Int(t[history.Keyword(k)])
		return (time.Duration(n) * time.Millisecond).String()
	}
	s := fmt.Sprintf("%s, %s workers, %s, lease %s, work %s, nemesis %s", get("lock"), get("workers"),
		ms("time-limit-ms"), ms("lease-ms"), ms("work-ms"), get("nemesis"))
	if n, _ := history.Int(t["inject-every"]); n > 0 {
		s += fmt.Sprintf(", in-section %s %s every %d", get("pause-kind"), ms("pause-ms"), n)
	}
	if t["fenced?"] == true {
		s += ", fenced"
	}
	return s
}

// checks lists the checks of results.edn, and the key figures of the one
// with a lock's sections' (the lock-counter's, the list-append's).
func checks(res map[history.Keyword]any) ([]Check, string) {
	var out []Check
	var figures string
	keys := make([]string, 0, len(res))
	for k := range res {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	for _, k := range keys {
		m, ok := res[history.Keyword(k)].(map[history.Keyword]any)
		if !ok {
			continue
		}
		c := Check{Name: k, Verdict: verdict(m["valid?"])}
		c.Explanation, _ = m["explanation"].(string)
		out = append(out, c)
		if !checker.HasLockFigures(k) {
			continue
		}
		if f, ok := checker.ReadLockFigures(m); ok {
			lost := "nil"
			if f.Counted {
				lost = fmt.Sprint(f.LostMin)
				if f.LostMax != f.LostMin {
					lost += fmt.Sprintf("–%d", f.LostMax)
				}
			}
			figures = fmt.Sprintf("writes %d, lost %s, overlapping-sections %d", f.Writes, lost, f.Overlapping)
		}
	}
	return out, figures
}
