package compare

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

var faults = Faults{Pause: 800 * time.Millisecond, Interval: 700 * time.Millisecond, Every: 20}

func TestRanges(t *testing.T) {
	r := Row{Runs: []Figures{
		{Valid: "false", LockFigures: checker.LockFigures{Writes: 352, LostMin: 4, LostMax: 4, Overlapping: 53, Sections: 400}},
		{Valid: "false", LockFigures: checker.LockFigures{Writes: 379, LostMin: 3, LostMax: 3, Overlapping: 42, Sections: 420}},
		{Valid: "true", LockFigures: checker.LockFigures{Writes: 360, LostMin: 0, LostMax: 0, Overlapping: 42, Sections: 360}},
	}}
	for _, tc := range []struct {
		name string
		pick func(Figures) int64
		want Range
		text string
	}{
		{"writes", writes, Range{352, 379}, "352–379"},
		{"lost", lostMin, Range{0, 4}, "0–4"},
		{"overlapping", overlapping, Range{42, 53}, "42–53"},
		{"rejected", rejected, Range{0, 0}, "0"},
	} {
		if got := r.Range(tc.pick); got != tc.want || got.String() != tc.text {
			t.Errorf("%s: %v (%q), want %v (%q)", tc.name, got, got.String(), tc.want, tc.text)
		}
	}
	l := r.LostPer1000()
	// 4/400, 3/420 and 0/360 lost: 10, 7.14 and 0 per 1,000.
	if l.Min != 0 || l.Max != 10 || l.Mean < 5.714 || l.Mean > 5.715 {
		t.Errorf("lost per 1,000: min %v, max %v, mean %v; want 0, 10, 5.714…", l.Min, l.Max, l.Mean)
	}
	if v, i, u := r.Verdicts(); v != 1 || i != 2 || u != 0 {
		t.Errorf("verdicts %d valid, %d invalid, %d unknown; want 1, 2, 0", v, i, u)
	}
	if got := (Figures{}).LostPer1000(); got != 0 {
		t.Errorf("no sections: %v lost per 1,000, want 0", got)
	}
}

// TestFiguresOf reads a run's figures from the check of a real history:
// a generated one with 2 lost updates.
func TestFiguresOf(t *testing.T) {
	ops, st, err := gen.Ops(gen.Config{Sections: 200, Workers: 4, Lost: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := checker.Check(context.Background(), ops, checker.Options{Model: checker.ModelLockCounter})
	if err != nil {
		t.Fatal(err)
	}
	lc, _ := rs.LockFigures()
	f := FiguresOf(rs)
	if f.Valid != "false" || f.LockFigures != lc || lc.Writes != int64(st.Writes) || lc.LostMin != 2 || lc.LostMax != 2 ||
		lc.Sections != 200 || !f.Leased() || lc.Overlapping == 0 || lc.LateWrites == 0 {
		t.Errorf("FiguresOf = %+v: want the check's figures, 2 updates lost, overlapping sections and late writes", f)
	}
}

func TestGrids(t *testing.T) {
	ref := Reference(faults)
	var got []string
	for _, s := range ref {
		got = append(got, s.Slug())
	}
	want := []string{"setnx-500ms-none", "setnx-500ms-sigstop", "setnx-2s-sigstop", "setnx-500ms-sleep",
		"setnx-500ms-sigstop-fenced", "setnx-500ms-sleep-fenced"}
	if !slices.Equal(got, want) {
		t.Errorf("reference rows %v, want %v", got, want)
	}
	if l := ref[3].PauseLabel(); l != "blocking 800 ms pause in every 20th section" {
		t.Errorf("pause label %q", l)
	}
	g := Grid(faults, []string{"setnx", "renew"}, []string{PauseSigStop, PauseStop}, []bool{false, true}, time.Second)
	if len(g) != 8 || g[0].Lock != "setnx" || g[7].Lock != "renew" || !g[7].Fenced || g[7].Pause != PauseStop || g[7].Lease != time.Second {
		t.Errorf("grid %+v", g)
	}
}

func TestSweep(t *testing.T) {
	for _, tc := range []struct {
		in     string
		lo, hi float64
		bad    bool
	}{
		{in: "pause/lease=0.25..4", lo: 0.25, hi: 4},
		{in: "pause/lease=1..1", lo: 1, hi: 1},
		{in: "lease=1..2", bad: true},
		{in: "pause/lease=2", bad: true},
		{in: "pause/lease=0..2", bad: true},
		{in: "pause/lease=4..1", bad: true},
		{in: "pause/lease=a..b", bad: true},
	} {
		lo, hi, err := ParseSweep(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && (lo != tc.lo || hi != tc.hi)) {
			t.Errorf("ParseSweep(%q) = %v, %v, %v", tc.in, lo, hi, err)
		}
	}
	if got, want := Ratios(0.25, 4, 5), []float64{0.25, 0.5, 1, 2, 4}; !slices.Equal(got, want) {
		t.Errorf("Ratios(0.25, 4, 5) = %v, want %v", got, want)
	}
	if got := Ratios(0.5, 2, 1); !slices.Equal(got, []float64{0.5}) {
		t.Errorf("Ratios in 1 step = %v", got)
	}
	s := Sweep(faults, []string{"setnx"}, []string{PauseSigStop}, []bool{false, true}, []float64{0.25, 1, 3})
	var leases []time.Duration
	for _, r := range s {
		leases = append(leases, r.Lease)
	}
	ms := time.Millisecond
	if want := []time.Duration{3200 * ms, 800 * ms, 267 * ms, 3200 * ms, 800 * ms, 267 * ms}; !slices.Equal(leases, want) {
		t.Errorf("sweep leases %v, want %v (pause 800 ms / ratio, to the ms)", leases, want)
	}
	if s[0].Fenced || !s[3].Fenced || s[3].Ratio != 0.25 || s[2].PauseLen != 800*ms {
		t.Errorf("sweep rows %+v", s)
	}
}

// table is a small finished table, with a row not run.
func table(kind string) *Table {
	rows := Reference(faults)[:3]
	t := &Table{Kind: kind, Command: "hiatus compare", Started: time.Unix(0, 0), Versions: "Redis 8, PostgreSQL 17",
		Workers: 3, Limit: 10 * time.Second, Work: 20 * time.Millisecond, Runs: 2}
	for i, s := range rows {
		s.Ratio = float64(i + 1)
		t.Rows = append(t.Rows, Row{Setup: s})
	}
	t.Rows[0].Runs = []Figures{{Valid: "true", LockFigures: checker.LockFigures{Writes: 434, Sections: 434, LeasedSections: 1}}, {Valid: "true", LockFigures: checker.LockFigures{Writes: 440, Sections: 440, LeasedSections: 1}}}
	t.Rows[1].Runs = []Figures{{Valid: "false", LockFigures: checker.LockFigures{Writes: 352, LostMin: 4, LostMax: 4, Overlapping: 53, Sections: 400, LeasedSections: 1}},
		{Valid: "false", LockFigures: checker.LockFigures{Writes: 379, LostMin: 3, LostMax: 3, Overlapping: 42, Sections: 300, LeasedSections: 1}}}
	return t
}

func TestMarkdown(t *testing.T) {
	md := string(table("reference").Markdown())
	for _, want := range []string{
		"`hiatus compare`",
		"| setnx | 500 ms | no faults | no | 434–440 | 0 | 0 | 0 | 0.0 | 2 valid |",
		"| setnx | 500 ms | SIGSTOP 800 ms every 700 ms | no | 352–379 | 3–4 | 42–53 | 0 | 10.0 | 2 invalid |",
		"| setnx | 2 s | SIGSTOP 800 ms every 700 ms | no |  |  |  |  |  | not run |",
		"**Incomplete:**",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table.md lacks %q:\n%s", want, md)
		}
	}
	if md := string(table("sweep").Markdown()); !strings.Contains(md, "| pause/lease |") || !strings.Contains(md, "| no | 2 | 352–379 |") {
		t.Errorf("a sweep's table lacks its ratio column:\n%s", md)
	}
}

func TestCSVAndJSON(t *testing.T) {
	tab := table("reference")
	// A finding's or census cell's own settings are its row's too.
	tab.Rows[1].Delay, tab.Rows[1].Retry, tab.Rows[1].Probe, tab.Rows[1].AdapterStore = 800*time.Millisecond, 100*time.Millisecond, "delay", "redis-nodes"
	recs, err := csv.NewReader(bytes.NewReader(tab.CSV())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d CSV records, want a header and 3 rows", len(recs))
	}
	col := func(name string) int { return slices.Index(recs[0], name) }
	if r := recs[2]; r[col("writes_min")] != "352" || r[col("writes_max")] != "379" || r[col("lost_min_max")] != "4" ||
		r[col("lost_per_1000_max")] != "10.000" || r[col("invalid")] != "2" || r[col("runs")] != "2" ||
		r[col("delay_ms")] != "800" || r[col("retry_ms")] != "100" || r[col("probe")] != "delay" || r[col("adapter_store")] != "redis-nodes" {
		t.Errorf("CSV row %v", r)
	}
	b, err := tab.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		Complete bool
		Rows     []struct {
			Runs     []Figures
			Overlaps Range `json:"overlapping-sections"`
			Invalid  int
			DelayMS  int64 `json:"delay_ms"`
			Probe    string
		}
	}
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	if js.Complete || len(js.Rows) != 3 || js.Rows[1].Overlaps != (Range{42, 53}) || js.Rows[1].Invalid != 2 || js.Rows[1].DelayMS != 800 || js.Rows[1].Probe != "delay" ||
		js.Rows[2].Runs == nil || len(js.Rows[2].Runs) != 0 {
		t.Errorf("table.json %s", b)
	}
}

func TestWrite(t *testing.T) {
	root := t.TempDir()
	for _, kind := range []string{"reference", "sweep"} {
		dir, err := CreateDir(root, kind, time.Unix(1, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := Write(dir, table(kind)); err != nil {
			t.Fatal(err)
		}
		for name, magic := range map[string]string{PlotPNG: "\x89PNG", PlotSVG: "<?xml", TableMarkdown: "`hiatus",
			TableJSON: "{", TableCSV: "lock,", RunList: ""} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !bytes.HasPrefix(b, []byte(magic)) {
				t.Errorf("%s/%s: %v, starts %.10q", kind, name, err, b)
			}
		}
		if got, err := filepath.EvalSymlinks(filepath.Join(root, kind, "latest")); err != nil || got != dir {
			t.Errorf("%s/latest → %s (%v), want %s", kind, got, err, dir)
		}
	}
}

func TestRun(t *testing.T) {
	setups := Reference(faults)[:2]
	fail := errors.New("no servers")
	for _, tc := range []struct {
		name     string
		failAt   int // the run that fails, from 1; 0 none
		cancelAt int // the run during which ctx ends, from 1; 0 never
		runs     []int
		err      error
	}{
		{name: "all", runs: []int{3, 3}},
		{name: "failed", failAt: 4, runs: []int{3, 0}, err: fail},
		{name: "interrupted", cancelAt: 2, runs: []int{1, 0}, err: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tab := &Table{Runs: 3}
			n := 0
			var reports []Progress
			err := Run(ctx, tab, setups, func(ctx context.Context, s Setup, i int) (Figures, error) {
				n++
				if n == tc.cancelAt {
					cancel()
				}
				if n == tc.failAt {
					return Figures{}, fail
				}
				return Figures{Seed: int64(i), LockFigures: checker.LockFigures{Writes: int64(n)}}, nil
			}, time.Second, func(p Progress) { reports = append(reports, p) })
			if !errors.Is(err, tc.err) {
				t.Errorf("Run: %v, want %v", err, tc.err)
			}
			for i, r := range tab.Rows {
				if len(r.Runs) != tc.runs[i] {
					t.Errorf("row %d has %d runs, want %d", i, len(r.Runs), tc.runs[i])
				}
			}
			if tc.name != "all" {
				return
			}
			if got := tab.Rows[1].Range(writes); got != (Range{4, 6}) {
				t.Errorf("row 2 writes %v, want 4–6", got)
			}
			last := reports[len(reports)-1]
			if len(reports) != 12 || last.Done != 6 || last.Total != 6 || last.Left != 0 || last.Finished == nil ||
				reports[0].Left != 6*time.Second || reports[0].Row != 1 || reports[2].Run != 2 {
				t.Errorf("reports %+v", reports)
			}
		})
	}
}

// TestLostText: a run whose writes of unknown outcome leave its lost
// updates open shows the bound; a row with one says the most any may have
// lost.
func TestLostText(t *testing.T) {
	settled := Figures{LockFigures: checker.LockFigures{LostMin: 2, LostMax: 2}}
	open := Figures{LockFigures: checker.LockFigures{LostMin: 0, LostMax: 3}}
	for _, tc := range []struct {
		runs []Figures
		want string
	}{
		{[]Figures{settled}, "2"},
		{[]Figures{settled, {LockFigures: checker.LockFigures{LostMin: 4, LostMax: 4}}}, "2–4"},
		{[]Figures{settled, open}, "0–2 (≤ 3)"},
	} {
		if got := (Row{Runs: tc.runs}).lostText(); got != tc.want {
			t.Errorf("%+v: lost %q, want %q", tc.runs, got, tc.want)
		}
	}
	if got := open.LostText(); got != "0–3" {
		t.Errorf("a run with lost 0–3 says %q", got)
	}
}

// TestFindings: each finding is two rows, its affected and fixed versions
// (or the contrast, where no fixed one exists),
// whose runs differ in the lock alone, on the schedule's settings (its
// guard, nemesis, delay and extending before the write, where the finding
// has them); and a missing adapter is said before any run.
func TestFindings(t *testing.T) {
	rows, err := ScenarioSetups(FindingsName)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*len(Findings()) {
		t.Fatalf("%d rows for %d findings", len(rows), len(Findings()))
	}
	p := Plan{Runs: 1, Name: "findings", Base: harness.DefaultConfig(), Setups: rows}
	for i := 0; i < len(rows); i += 2 {
		affected, fixed := p.Config(rows[i], 0), p.Config(rows[i+1], 0)
		other := Findings()[i/2].otherSide()
		if rows[i].Side != "affected" || rows[i+1].Side != other || affected.Lock == fixed.Lock {
			t.Errorf("%s: rows %q (%s) and %q (%s): want affected, then %s, on two locks", rows[i].Scenario,
				rows[i].Side, affected.Lock, rows[i+1].Side, fixed.Lock, other)
		}
		fixed.Lock, fixed.Name = affected.Lock, affected.Name
		if !reflect.DeepEqual(affected, fixed) {
			t.Errorf("%s: the two sides' runs differ in more than the lock:\n%+v\n%+v", rows[i].Scenario, affected, fixed)
		}
		sched := Findings()[i/2].Schedule
		if affected.ExtendBeforeWrite != sched.Extend || affected.Resolved().Guard != cmp.Or(sched.Guard, client.GuardNone) ||
			string(affected.Nemesis) != cmp.Or(sched.Nemesis, "none") || affected.Delay != sched.Delay {
			t.Errorf("%s: extend %v, guard %s, nemesis %s, delay %v: want the schedule's (%v, %s, %s, %v)", rows[i].Scenario,
				affected.ExtendBeforeWrite, affected.Resolved().Guard, affected.Nemesis, affected.Delay, sched.Extend, sched.Guard, sched.Nemesis, sched.Delay)
		}
		if err := affected.Validate(); err != nil {
			t.Errorf("%s: %v", rows[i].Scenario, err)
		}
	}
	tab := &Table{Kind: "scenario", Runs: 1}
	for _, s := range rows {
		tab.Rows = append(tab.Rows, Row{Setup: s})
	}
	for _, f := range Findings() {
		if md := string(tab.Markdown()); !strings.Contains(md, f.Upstream) || !strings.Contains(md, f.Mechanism) {
			t.Errorf("the table does not say what %s is (its report and mechanism):\n%s", f.Name, md)
		}
	}
	missing := []Setup{{Lock: "exec:" + filepath.Join(t.TempDir(), "redsync-v0"), Side: "affected"},
		{Lock: "exec:node " + filepath.Join(t.TempDir(), "gone.js") + " --readme", Side: "contrast"}}
	if m := MissingAdapters(missing); !strings.Contains(m, "redsync-v0") || !strings.Contains(m, "gone.js") || !strings.Contains(m, "scripts/setup --adapters") {
		t.Errorf("MissingAdapters = %q: want each adapter named (an interpreter's script too), and how to build it", m)
	}
}

// TestScenarios: the pack is every scenario under every guard, each row a
// run configuration that validates; names are checked, and a scenario
// fixes what the grid flags would set.
func TestScenarios(t *testing.T) {
	all, err := ScenarioSetups(DebateName)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(Scenarios()) * len(client.Guards()); len(all) != want {
		t.Fatalf("%d rows, want %d", len(all), want)
	}
	p := Plan{Runs: 1, Name: "scenario", Base: harness.DefaultConfig(), Setups: all}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	slugs := map[string]bool{}
	for _, s := range all {
		cfg := p.Config(s, 0)
		if string(cfg.Nemesis) != s.Nemesis || cfg.Resolved().Guard != s.Guard || cfg.Lock != s.Lock {
			t.Errorf("%s: run configured with nemesis %s, guard %s, lock %s", s.Slug(), cfg.Nemesis, cfg.Resolved().Guard, cfg.Lock)
		}
		if slugs[s.Slug()] {
			t.Errorf("two rows named %s", s.Slug())
		}
		slugs[s.Slug()] = true
	}
	failover, err := ScenarioSetups("failover")
	if err != nil || len(failover) != len(client.Guards()) {
		t.Fatalf("failover alone: %d rows, %v", len(failover), err)
	}
	if cfg := p.Config(failover[0], 0); cfg.Work != 3*time.Second || cfg.TimeLimit != 24*time.Second {
		t.Errorf("failover's run: work %v, limit %v; want its own 3s, 24s", cfg.Work, cfg.TimeLimit)
	}
	for _, ch := range []Choices{
		{Scenario: "paxos", Faults: faults},
		{Scenario: "failover", Locks: "setnx", Faults: faults},
		{Scenario: "failover", Fencing: "on", Faults: faults},
	} {
		if _, _, err := ch.Setups(); err == nil {
			t.Errorf("%+v: no error", ch)
		}
	}
	tab := &Table{Kind: "scenario", Command: "hiatus compare --scenario failover", Runs: 1, Workers: 3,
		Limit: 10 * time.Second, Work: 20 * time.Millisecond}
	tab.Rows = []Row{{Setup: failover[0], Runs: []Figures{{Valid: "false", LockFigures: checker.LockFigures{Writes: 9, LostMin: 3, LostMax: 3, LockOverlapping: 6, LeasedSections: 1}}}},
		{Setup: failover[3], Runs: []Figures{{Valid: "true", LockFigures: checker.LockFigures{Writes: 7, ChangeRejected: 2, LockOverlapping: 4, LeasedSections: 1}}}}}
	md := string(tab.Markdown())
	for _, want := range []string{
		"| failover | setnx | 4 s | failover 6 s every 2 s (3 s work, 24 s runs) | none | 9 | 3 | 6 | 0 | 1 invalid |",
		"| failover | setnx | 4 s | failover 6 s every 2 s (3 s work, 24 s runs) | cas | 7 | 0 | 4 | 2 | 1 valid |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table.md lacks %q:\n%s", want, md)
		}
	}
}

// TestCSVFigureNames: each CSV column is named after the figure its values
// are, as results.edn names it: a figure read back by that name is the one
// the column picks.
func TestCSVFigureNames(t *testing.T) {
	for i, c := range csvFigures() {
		check := map[history.Keyword]any{"lost-min": int64(0)} // a final read
		check[history.Keyword(c.name)] = int64(1000 + i)
		f, ok := checker.ReadLockFigures(check)
		if got := c.pick(Figures{LockFigures: f}); !ok || got != int64(1000+i) {
			t.Errorf("column %s picks %d, not the figure %q (%d)", c.name, got, c.name, 1000+i)
		}
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
