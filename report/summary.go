package report

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/history"
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
	s := Summary{Name: filepath.Base(filepath.Dir(dir)), Verdict: "unknown"}
	s.Started, _ = time.Parse(store.TimeLayout, filepath.Base(dir))
	if test, ok := ReadEDN(filepath.Join(dir, store.Test)); ok {
		s.Config = Describe(test)
		if n, ok := history.Int(test["workers"]); ok {
			s.Workers = int(n)
		}
		if name, ok := test["name"].(string); ok {
			s.Name = name
		}
	}
	if res, ok := ReadEDN(filepath.Join(dir, store.Results)); ok {
		s.SetResults(res)
	}
	return s
}

// SetResults takes the verdicts of results.edn, read as a map.
func (s *Summary) SetResults(res map[history.Keyword]any) {
	s.Verdict = verdict(res["valid?"])
	s.Checks, s.Figures = checks(res)
}

// ReadEDN reads a map from an EDN file.
func ReadEDN(p string) (map[history.Keyword]any, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
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

// Describe says in one line what test.edn configured, as `hiatus run`
// does.
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

// checks lists the checks of results.edn, and the key figures of the
// lock-counter one.
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
		if k == "lock-counter" {
			fig := func(name string) string { return string(history.AppendValue(nil, m[history.Keyword(name)])) }
			lost := fig("lost-min")
			if hi := fig("lost-max"); hi != lost {
				lost += "–" + hi
			}
			figures = fmt.Sprintf("writes %s, lost %s, overlapping-sections %s", fig("writes"), lost, fig("overlapping-sections"))
		}
	}
	return out, figures
}
