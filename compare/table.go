package compare

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
)

// Figures are what one run gives a table: its verdict, and the
// lock-counter check's figures under their one name (results.edn's).
type Figures struct {
	Dir string `json:"dir"`
	// Path is the run directory inside the comparison's directory,
	// slash-separated: where `hiatus serve` finds it.
	Path  string `json:"path,omitempty"`
	Seed  int64  `json:"seed"`
	Valid string `json:"valid"` // true, false or :unknown, as results.edn writes it
	// Failed names the checks that found the run invalid, in results.edn's
	// order: what decided a verdict that no lost update explains.
	Failed []string `json:"failed,omitempty"`
	// Error is why a census's run could not be made (Run); "" for a
	// run that was made.
	Error string `json:"error,omitempty"`
	checker.LockFigures
}

// FiguresOf reads a run's figures from its checked results.
func FiguresOf(rs checker.Results) Figures {
	f := Figures{Valid: rs.Valid.String()}
	for _, c := range rs.Checks {
		if c.Valid == checker.Invalid {
			f.Failed = append(f.Failed, c.Name)
		}
	}
	f.LockFigures, _ = rs.LockFigures()
	return f
}

// Leased says the lock granted leases (the history records :lease-ms).
func (f Figures) Leased() bool { return f.LeasedSections > 0 }

// LostPer1000 is the run's lost updates per 1,000 critical sections: those
// its history proves.
func (f Figures) LostPer1000() float64 {
	if f.Sections == 0 {
		return 0
	}
	return float64(f.LostMin) * 1000 / float64(f.Sections)
}

// LostText is the run's lost updates: a count, or "min–max" when writes of
// unknown outcome leave it open.
func (f Figures) LostText() string {
	return Range{Min: f.LostMin, Max: f.LostMax}.String()
}

// A Row is a Setup and the figures of its runs.
type Row struct {
	Setup
	Runs []Figures
}

// A Range is the smallest and largest of a figure over a row's runs.
type Range struct {
	Min int64 `json:"min"`
	Max int64 `json:"max"`
}

func (r Range) String() string {
	if r.Min == r.Max {
		return strconv.FormatInt(r.Min, 10)
	}
	return fmt.Sprintf("%d–%d", r.Min, r.Max)
}

// Range returns the range of the figure f picks over the row's runs.
func (r Row) Range(f func(Figures) int64) Range {
	var out Range
	for i, run := range r.Runs {
		v := f(run)
		if i == 0 || v < out.Min {
			out.Min = v
		}
		if i == 0 || v > out.Max {
			out.Max = v
		}
	}
	return out
}

// A Spread is the mean, smallest and largest of a ratio over a row's runs.
type Spread struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func (s Spread) String() string {
	if s.Min == s.Max {
		return strconv.FormatFloat(s.Min, 'f', 1, 64)
	}
	return fmt.Sprintf("%.1f–%.1f", s.Min, s.Max)
}

// LostPer1000 is the spread of the lost updates the runs' histories prove,
// per 1,000 sections.
func (r Row) LostPer1000() Spread {
	var s Spread
	for i, run := range r.Runs {
		v := run.LostPer1000()
		s.Mean += v
		if i == 0 || v < s.Min {
			s.Min = v
		}
		if i == 0 || v > s.Max {
			s.Max = v
		}
	}
	if len(r.Runs) > 0 {
		s.Mean /= float64(len(r.Runs))
	}
	return s
}

// Verdicts counts the row's runs by verdict.
func (r Row) Verdicts() (valid, invalid, unknown int) {
	for _, run := range r.Runs {
		switch run.Valid {
		case checker.Valid.String():
			valid++
		case checker.Invalid.String():
			invalid++
		default:
			unknown++
		}
	}
	return valid, invalid, unknown
}

func (r Row) verdictText() string {
	v, i, u := r.Verdicts()
	var parts []string
	for _, c := range []struct {
		n    int
		word string
	}{{v, "valid"}, {i, "invalid"}, {u, "unknown"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.word))
		}
	}
	return strings.Join(parts, ", ")
}

// leaseText is the row's lease, or "none" when its lock granted none.
func (r Row) leaseText() string {
	for _, run := range r.Runs {
		if run.Leased() {
			return duration(r.Lease)
		}
	}
	if len(r.Runs) == 0 {
		return duration(r.Lease)
	}
	return "none"
}

// lostText is the row's lost updates: the range of what its runs' histories
// prove, and when writes of unknown outcome leave any run's open, the most
// that any may have lost, as "2–4 (≤ 6)".
func (r Row) lostText() string {
	proven, most := r.Range(lostMin), r.Range(lostMax)
	if most.Max > proven.Max {
		return fmt.Sprintf("%v (≤ %d)", proven, most.Max)
	}
	return proven.String()
}

// csvFigures are the figures table.csv gives each row's range of, under
// their names in results.edn.
func csvFigures() []struct {
	name string
	pick func(Figures) int64
} {
	return []struct {
		name string
		pick func(Figures) int64
	}{{"writes", writes}, {"lost-min", lostMin}, {"lost-max", lostMax}, {"overlapping-sections", overlapping},
		{"stale-rejected", rejected}, {"sections", sections}, {"change-rejected", changed}, {"lock-overlapping-sections", lockOverlap}}
}

// Figure pickers, for Row.Range.
func writes(f Figures) int64      { return f.Writes }
func lostMin(f Figures) int64     { return f.LostMin }
func lostMax(f Figures) int64     { return f.LostMax }
func overlapping(f Figures) int64 { return f.Overlapping }
func rejected(f Figures) int64    { return f.StaleRejected }
func sections(f Figures) int64    { return f.Sections }
func lockOverlap(f Figures) int64 { return f.LockOverlapping }
func changed(f Figures) int64     { return f.ChangeRejected }
func refused(f Figures) int64     { return f.StaleRejected + f.ChangeRejected }

// A Table is a finished (or interrupted) grid.
type Table struct {
	Kind     string // reference, grid or sweep
	Command  string // the command line that made it
	Started  time.Time
	Versions string // the servers', as "Redis 7.0.15, PostgreSQL 15.20"
	Workers  int
	Limit    time.Duration // each run's time limit
	Work     time.Duration
	Runs     int // runs per row asked for
	Rows     []Row
}

// Complete reports whether every row has all its runs.
func (t *Table) Complete() bool {
	for _, r := range t.Rows {
		if len(r.Runs) < t.Runs {
			return false
		}
	}
	return true
}

func (t *Table) sweep() bool { return t.Kind == "sweep" }

// Markdown renders the table with a caption: min–max of each figure over
// each row's runs.
func (t *Table) Markdown() []byte {
	if t.Kind == "scenario" && slices.ContainsFunc(t.Rows, func(r Row) bool { return r.Probe != "" }) {
		return t.censusMarkdown()
	}
	if t.Kind == "scenario" {
		return t.scenarioMarkdown()
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "`%s`\n\n", t.Command)
	fmt.Fprintf(&b, "%d workers, %s per run, %s of work per section, %s per row; %s; started %s.\n",
		t.Workers, duration(t.Limit), duration(t.Work), plural(t.Runs, "run"), t.Versions, t.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "Each cell is min–max over the row's runs.\n")
	if !t.Complete() {
		fmt.Fprintf(&b, "**Incomplete:** the comparison was cut short; rows with fewer runs are marked.\n")
	}
	b.WriteString("\n")
	head := []string{"lock", "lease", "pause", "fenced"}
	if t.sweep() {
		head = append(head, "pause/lease")
	}
	head = append(head, "writes", "lost", "overlapping-sections", "stale-rejected", "lost / 1,000 sections", "verdicts")
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for i := range head {
		// Words to the left, figures to the right.
		if i < 4 || (t.sweep() && i == 4) || i == len(head)-1 {
			b.WriteString(" --- |")
		} else {
			b.WriteString(" ---: |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		fenced := "no"
		if r.Fenced {
			fenced = "yes"
		}
		cells := []string{client.LockLabel(r.Lock), r.leaseText(), r.PauseLabel(), fenced}
		if t.sweep() {
			cells = append(cells, strconv.FormatFloat(r.Ratio, 'g', 3, 64))
		}
		if len(r.Runs) == 0 {
			cells = append(cells, "", "", "", "", "", "not run")
		} else {
			verdicts := r.verdictText()
			if len(r.Runs) < t.Runs {
				verdicts += fmt.Sprintf(" (%d of %d runs)", len(r.Runs), t.Runs)
			}
			cells = append(cells, r.Range(writes).String(), r.lostText(),
				r.Range(overlapping).String(), r.Range(rejected).String(), r.LostPer1000().String(), verdicts)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.Bytes()
}

// CSV renders one line per row: the setup, then min and max of each figure.
func (t *Table) CSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	head := []string{"lock", "lease_ms", "leased", "pause", "pause_ms", "interval_ms", "every", "fenced", "ratio", "runs",
		"scenario", "nemesis", "guard"}
	// The figures under their one name, spelt as CSV readers (R, pandas)
	// take a column's: lost-min is lost_min.
	for _, f := range csvFigures() {
		name := strings.ReplaceAll(f.name, "-", "_")
		head = append(head, name+"_min", name+"_max")
	}
	head = append(head, "lost_per_1000_mean", "lost_per_1000_min", "lost_per_1000_max", "valid", "invalid", "unknown",
		"side", "version", "extend_before_write", "node_aof", // last: a reader by position keeps its columns
		"probe", "delay_ms", "retry_ms", "work_ms", "time_limit_ms", "workers", "nodes", "adapter_store")
	w.Write(head)
	for _, r := range t.Rows {
		rec := []string{r.Lock, ms(r.Lease), strconv.FormatBool(r.leaseText() != "none"), r.Pause,
			ms(r.PauseLen), ms(r.Interval), strconv.Itoa(r.Every), strconv.FormatBool(r.Fenced),
			strconv.FormatFloat(r.Ratio, 'g', -1, 64), strconv.Itoa(len(r.Runs)), r.Scenario, r.Nemesis, string(r.Guard)}
		for _, f := range csvFigures() {
			rg := r.Range(f.pick)
			rec = append(rec, strconv.FormatInt(rg.Min, 10), strconv.FormatInt(rg.Max, 10))
		}
		l := r.LostPer1000()
		v, i, u := r.Verdicts()
		rec = append(rec, fmtFloat(l.Mean), fmtFloat(l.Min), fmtFloat(l.Max),
			strconv.Itoa(v), strconv.Itoa(i), strconv.Itoa(u), r.Side, r.Version, strconv.FormatBool(r.Extend), strconv.FormatBool(r.NodeAOF),
			r.Probe, ms(r.Delay), ms(r.Retry), ms(r.Work), ms(r.Limit), strconv.Itoa(r.Workers), strconv.Itoa(r.Nodes), r.AdapterStore)
		w.Write(rec)
	}
	w.Flush()
	return b.Bytes()
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

// JSON renders the whole table: every run's figures and run directory, and
// each row's ranges.
func (t *Table) JSON() ([]byte, error) {
	type row struct {
		Lock       string  `json:"lock"`
		LeaseMS    int64   `json:"lease_ms"`
		Leased     bool    `json:"leased"`
		Pause      string  `json:"pause"`
		PauseMS    int64   `json:"pause_ms"`
		IntervalMS int64   `json:"interval_ms"`
		Every      int     `json:"every"`
		Fenced     bool    `json:"fenced"`
		Ratio      float64 `json:"ratio,omitempty"`
		Scenario   string  `json:"scenario,omitempty"`
		Nemesis    string  `json:"nemesis,omitempty"`
		Guard      string  `json:"guard,omitempty"`
		Side       string  `json:"side,omitempty"`
		Version    string  `json:"version,omitempty"`
		Extend     bool    `json:"extend_before_write,omitempty"`
		NodeAOF    bool    `json:"node_aof,omitempty"`
		// A scenario's own settings, where it has them (0 or "": the
		// table's, or the run's defaults).
		Probe        string    `json:"probe,omitempty"`
		DelayMS      int64     `json:"delay_ms,omitempty"`
		RetryMS      int64     `json:"retry_ms,omitempty"`
		WorkMS       int64     `json:"work_ms,omitempty"`
		LimitMS      int64     `json:"time_limit_ms,omitempty"`
		Workers      int       `json:"workers,omitempty"`
		Nodes        int       `json:"nodes,omitempty"`
		AdapterStore string    `json:"adapter_store,omitempty"`
		Label        string    `json:"label"`
		Runs         []Figures `json:"runs"`
		Writes       Range     `json:"writes"`
		LostMin      Range     `json:"lost-min"`
		LostMax      Range     `json:"lost-max"`
		Overlapping  Range     `json:"overlapping-sections"`
		Rejected     Range     `json:"stale-rejected"`
		Sections     Range     `json:"sections"`
		LostPer1000  Spread    `json:"lost-per-1000-sections"`
		Valid        int       `json:"valid"`
		Invalid      int       `json:"invalid"`
		Unknown      int       `json:"unknown"`
	}
	out := struct {
		Kind        string `json:"kind"`
		Command     string `json:"command"`
		Started     string `json:"started"`
		Versions    string `json:"versions"`
		Workers     int    `json:"workers"`
		TimeLimitMS int64  `json:"time_limit_ms"`
		WorkMS      int64  `json:"work_ms"`
		RunsPerRow  int    `json:"runs_per_row"`
		Complete    bool   `json:"complete"`
		Rows        []row  `json:"rows"`
	}{Kind: t.Kind, Command: t.Command, Started: t.Started.UTC().Format(time.RFC3339Nano), Versions: t.Versions,
		Workers: t.Workers, TimeLimitMS: t.Limit.Milliseconds(), WorkMS: t.Work.Milliseconds(), RunsPerRow: t.Runs,
		Complete: t.Complete(), Rows: []row{}}
	for _, r := range t.Rows {
		v, i, u := r.Verdicts()
		runs := r.Runs
		if runs == nil {
			runs = []Figures{}
		}
		out.Rows = append(out.Rows, row{Lock: r.Lock, LeaseMS: r.Lease.Milliseconds(), Leased: r.leaseText() != "none",
			Pause: r.Pause, PauseMS: r.PauseLen.Milliseconds(), IntervalMS: r.Interval.Milliseconds(), Every: r.Every,
			Fenced: r.Fenced, Ratio: r.Ratio, Scenario: r.Scenario, Nemesis: r.Nemesis, Guard: string(r.Guard), Side: r.Side, Version: r.Version, Extend: r.Extend, NodeAOF: r.NodeAOF,
			Probe: r.Probe, DelayMS: r.Delay.Milliseconds(), RetryMS: r.Retry.Milliseconds(), WorkMS: r.Work.Milliseconds(), LimitMS: r.Limit.Milliseconds(),
			Workers: r.Workers, Nodes: r.Nodes, AdapterStore: r.AdapterStore, Label: r.Short() + ", " + r.PauseLabel(), Runs: runs,
			Writes: r.Range(writes), LostMin: r.Range(lostMin), LostMax: r.Range(lostMax), Overlapping: r.Range(overlapping), Rejected: r.Range(rejected),
			Sections: r.Range(sections), LostPer1000: r.LostPer1000(), Valid: v, Invalid: i, Unknown: u})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("table.json: %w", err)
	}
	return append(b, '\n'), nil
}

// findingNotes says, under a table with findings' rows, what each finding
// is: its report, its mechanism, how the runs use the library, and what
// the affected version is expected to show.
func (t *Table) findingNotes() []byte {
	var b bytes.Buffer
	for _, f := range Findings() {
		if slices.ContainsFunc(t.Rows, func(r Row) bool { return r.Scenario == f.Name && r.Side != "" }) {
			fmt.Fprintf(&b, "\n**%s** (%s): %s The runs: %s. Expected of the affected version: %s.\n",
				f.Name, f.Upstream, f.Mechanism, f.Use, f.Anomaly)
		}
	}
	return b.Bytes()
}

// scenarioMarkdown renders a scenario pack: per scenario and guard, what
// the lock did (double grants) and what the resource kept (lost updates,
// writes refused).
func (t *Table) scenarioMarkdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "`%s`\n\n", t.Command)
	fmt.Fprintf(&b, "%d workers, %s per run and %s of work per section unless the fault says otherwise, %s per row; %s; started %s.\n",
		t.Workers, duration(t.Limit), duration(t.Work), plural(t.Runs, "run"), t.Versions, t.Started.UTC().Format(time.RFC3339))
	b.WriteString("Each cell is min–max over the row's runs. Double-granted: sections the lock granted while another " +
		"holder's overlapped them (`:lock-overlapping-sections`); refused: writes (and fence-rmw reads) the guard turned away.\n")
	if !t.Complete() {
		b.WriteString("**Incomplete:** the comparison was cut short; rows with fewer runs are marked.\n")
	}
	b.WriteString("\n| scenario | lock | lease | fault | guard | writes | lost | double-granted | refused | verdicts |\n")
	b.WriteString("| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |\n")
	for _, r := range t.Rows {
		fault := r.PauseLabel()
		var own []string
		if r.Work > 0 {
			own = append(own, duration(r.Work)+" work")
		}
		if r.Limit > 0 {
			own = append(own, duration(r.Limit)+" runs")
		}
		if r.Workers > 0 {
			own = append(own, fmt.Sprintf("%d workers", r.Workers))
		}
		if r.Nodes > 0 {
			own = append(own, fmt.Sprintf("%d nodes", r.Nodes))
		}
		if r.NodeAOF {
			own = append(own, "nodes fsync every write")
		}
		if r.Delay > 0 {
			own = append(own, duration(r.Delay)+" delay")
		}
		if r.Retry > 0 {
			own = append(own, duration(r.Retry)+" retry")
		}
		if len(own) > 0 {
			fault += " (" + strings.Join(own, ", ") + ")"
		}
		scenario := r.Scenario
		if r.Side != "" {
			scenario = fmt.Sprintf("%s: %s, %s", r.Scenario, r.Side, r.Version)
		}
		cells := []string{scenario, client.LockLabel(r.Lock), r.leaseText(), fault, string(r.Guard)}
		if len(r.Runs) == 0 {
			cells = append(cells, "", "", "", "", "not run")
		} else {
			verdicts := r.verdictText()
			if len(r.Runs) < t.Runs {
				verdicts += fmt.Sprintf(" (%d of %d runs)", len(r.Runs), t.Runs)
			}
			cells = append(cells, r.Range(writes).String(), r.lostText(), r.Range(lockOverlap).String(),
				r.Range(refused).String(), verdicts)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.Write(t.findingNotes())
	return b.Bytes()
}
