package web

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/store"
)

// A grid is what a comparison's page shows of its table.json: a row per
// setup, with its figures, verdict counts and runs.
type grid struct {
	Kind       string    `json:"kind"`
	Command    string    `json:"command"`
	Complete   bool      `json:"complete"`
	RunsPerRow int       `json:"runs_per_row"`
	Rows       []gridRow `json:"rows"`
}

// A span is the range of a figure over a row's runs.
type span struct {
	Min int64 `json:"min"`
	Max int64 `json:"max"`
}

func (s span) String() string {
	if s.Min == s.Max {
		return strconv.FormatInt(s.Min, 10)
	}
	return fmt.Sprintf("%d–%d", s.Min, s.Max)
}

type gridRow struct {
	Label       string                 `json:"label"`
	Writes      span                   `json:"writes"`
	LostMin     span                   `json:"lost-min"`
	LostMax     span                   `json:"lost-max"`
	Overlapping span                   `json:"overlapping-sections"`
	Rejected    span                   `json:"stale-rejected"`
	LostPer1000 struct{ Mean float64 } `json:"lost-per-1000-sections"`
	Valid       int                    `json:"valid"`
	Invalid     int                    `json:"invalid"`
	Unknown     int                    `json:"unknown"`
	Runs        []gridRun              `json:"runs"`
}

type gridRun struct {
	Dir   string `json:"dir"`
	Path  string `json:"path"` // inside the comparison's directory
	Valid string `json:"valid"`
	rel   string // the run's name in the store, when it is there
}

// Link is the run's page, "" when the run is not in the store.
func (r gridRun) Link() string {
	if r.rel == "" {
		return ""
	}
	return runURL(r.rel)
}

// Lost is the row's lost updates as table.md writes them: the range its
// runs' histories prove, and the most any may have lost when more.
func (r gridRow) Lost() string {
	if r.LostMax.Max > r.LostMin.Max {
		return fmt.Sprintf("%v (≤ %d)", r.LostMin, r.LostMax.Max)
	}
	return r.LostMin.String()
}

// Per1000 is the mean of the row's lost updates per 1,000 sections.
func (r gridRow) Per1000() string { return strconv.FormatFloat(r.LostPer1000.Mean, 'f', 1, 64) }

// Verdict is the class a run's verdict is coloured by.
func (r gridRun) Verdict() string {
	switch r.Valid {
	case "true", "false":
		return r.Valid
	}
	return "unknown"
}

// readGrid reads the table.json of the comparison named name, and finds
// each run's page: at its path inside the comparison, or, in a table
// written before table.json gave one, where a grid made in one process
// keeps it (its directory's last two elements). nil when the comparison
// has no table.json that reads, or is a sweep or a scenario pack, whose
// table.md has columns of its own (pause/lease; double grants, refusals
// and each finding's notes) that the grid's columns would drop.
func (s *Server) readGrid(name string) *grid {
	text := s.fsys.readText(path.Join(name, store.CompareTableJSON), maxTable)
	if text == "" {
		return nil
	}
	var g grid
	if err := json.Unmarshal([]byte(text), &g); err != nil || g.Kind == "sweep" || g.Kind == "scenario" {
		return nil
	}
	for i := range g.Rows {
		for j := range g.Rows[i].Runs {
			run := &g.Rows[i].Runs[j]
			rel := run.Path
			if rel == "" {
				parts := strings.Split(strings.ReplaceAll(run.Dir, `\`, "/"), "/")
				if len(parts) >= 2 {
					rel = path.Join(parts[len(parts)-2:]...)
				}
			}
			if at := path.Join(name, rel); rel != "" && validName(rel) && s.fsys.regular(path.Join(at, store.Test)) {
				run.rel = at
			}
		}
	}
	return &g
}

// gridStarted is when the comparison named name started, as its
// table.json says; zero when it cannot be read.
func (s *Server) gridStarted(name string) time.Time {
	var g struct {
		Started time.Time `json:"started"`
	}
	_ = json.Unmarshal([]byte(s.fsys.readText(path.Join(name, store.CompareTableJSON), maxTable)), &g)
	return g.Started
}
