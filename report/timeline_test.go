package report

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// timelineOf is the timeline of ops as a run or `hiatus timeline` makes it:
// the ops read into the timeline and a check at once, and the sections
// coloured by what the check found.
func timelineOf(ops []history.Op, workers int) *Timeline {
	return windowOf(ops, Timeline{Workers: workers})
}

func windowOf(ops []history.Op, t Timeline) *Timeline {
	s := checker.NewStream()
	for _, o := range ops {
		s.Add(o)
		t.Add(o)
	}
	s.FlagSections(t.Kept())
	if _, err := s.Check(checker.Options{Model: checker.ModelLockCounter}); err == nil {
		t.SetFlags(s.Flagged())
	}
	return &t
}

func flagged(t *Timeline, flag uint8) []*tlSection {
	var out []*tlSection
	for i := range t.secs {
		if t.secs[i].flags&flag != 0 {
			out = append(out, &t.secs[i])
		}
	}
	return out
}

// TestTimelineAgreesWithCheck: each section the timeline keeps carries the
// flags the check found of the section of its number (checker's TestFlagged
// holds those to the figures and the evidence), whole or in a window.
func TestTimelineAgreesWithCheck(t *testing.T) {
	ops, _, err := gen.Ops(gen.Config{Sections: 2000, Workers: 64, Lost: 12, Info: 10, Seed: 6})
	if err != nil {
		t.Fatal(err)
	}
	n := len(checker.Sections(ops))
	s := checker.NewStream()
	for _, o := range ops {
		s.Add(o)
	}
	s.FlagSections(0, n)
	if _, err := s.Check(checker.Options{Model: checker.ModelLockCounter}); err != nil {
		t.Fatal(err)
	}
	want := map[int]checker.SectionFlags{}
	for _, f := range s.Flagged() {
		want[f.Seq] = f
	}
	end := ops[len(ops)-1].Time - ops[0].Time
	for _, w := range []Timeline{{}, {From: end / 3, To: 2 * end / 3}, {MaxSections: 700}} {
		w.Workers = 64
		tl := windowOf(ops, w)
		tl.finish()
		stale := 0
		for _, sec := range tl.secs {
			f := want[sec.seq]
			f.Seq = sec.seq // an unflagged section's flags are all false
			got := checker.SectionFlags{Seq: sec.seq, Stale: sec.flags&flagStale != 0, Lost: sec.flags&flagLost != 0,
				Overlap: sec.flags&flagOverlap != 0, Late: sec.flags&flagLate != 0}
			if got.Stale {
				got.CounterWas, stale = sec.top, stale+1
			}
			if f != got {
				t.Errorf("window %+v: section %d coloured %+v, the check found %+v", w, sec.seq, got, f)
			}
		}
		if w.From == 0 && w.MaxSections == 0 && stale == 0 {
			t.Error("no stale write coloured in a history that lost updates")
		}
	}
}

// TestTimelineRows: a process renumbered after an :info stays in its
// worker's row, whether the worker count is given or read from the history
// (the processes before the first :info), and the final read has a row of
// its own; a history without an :info has a row a process.
func TestTimelineRows(t *testing.T) {
	renumbered, _, err := gen.Ops(gen.Config{Sections: 200, Workers: 4, Info: 20, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	plain, _, err := gen.Ops(gen.Config{Sections: 200, Workers: 3, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		ops           []history.Op
		workers, want int // given, and the slots drawn (0: a row a process)
	}{
		{"given", renumbered, 4, 4},
		{"read from the history", renumbered, 0, 4},
		{"no :info", plain, 0, 0},
	} {
		rowOf, rows := timelineOf(tc.ops, tc.workers).rows()
		procs := map[history.Process]bool{}
		for _, o := range tc.ops {
			if o.Process >= 0 {
				procs[o.Process] = true
			}
		}
		want := tc.want + 1 // the final read's row
		if tc.want == 0 {
			want = len(procs)
		}
		if len(rows) != want || rows[len(rows)-1].Label != "final read" {
			t.Errorf("%s: %d rows, the last %q; want %d, the final read's", tc.name, len(rows), rows[len(rows)-1].Label, want)
		}
		for p := range procs {
			r, ok := rowOf[p]
			if !ok || tc.want > 0 && r != int(p)%tc.want && rows[r].Label != "final read" {
				t.Errorf("%s: process %d in row %d", tc.name, p, r)
			}
		}
	}
}

// TestTimelineNamedProcess: a process a history writes as a name (which
// the Reader numbers below -1) is drawn in a row of its own, with or
// without worker slots, beside the workers' (its number once made a row
// index of -2).
func TestTimelineNamedProcess(t *testing.T) {
	h := `{:time 1, :type :invoke, :process :x, :f :acquire, :value nil}
{:time 2, :type :ok, :process :x, :f :acquire, :value nil, :lease-ms 500}
{:time 3, :type :invoke, :process 0, :f :acquire, :value nil}
{:time 4, :type :info, :process 0, :f :acquire, :value nil}
{:time 5, :type :invoke, :process :x, :f :read, :value nil}
{:time 6, :type :ok, :process :x, :f :read, :value 0}
`
	ops, err := history.ReadAll(strings.NewReader(h), "h.edn")
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{0, 3} {
		rowOf, rows := timelineOf(ops, workers).rows()
		r, ok := rowOf[ops[0].Process]
		if !ok || r < 0 || r >= len(rows) || rows[r].Label != "process -2" {
			t.Errorf("workers %d: the named process in row %d of %v", workers, r, rows)
		}
	}
}

// TestTimelineWindow: From, To and MaxSections keep the sections that begin
// inside them, and the page says how many of the history's it holds.
func TestTimelineWindow(t *testing.T) {
	ops, _, err := gen.Ops(gen.Config{Sections: 400, Workers: 4, Lost: 2, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	end := ops[len(ops)-1].Time
	for _, tc := range []struct {
		name string
		tl   Timeline
		kept func(start int64) bool
	}{
		{"all", Timeline{}, func(int64) bool { return true }},
		{"from", Timeline{From: end / 2}, func(s int64) bool { return s-ops[0].Time >= end/2 }},
		{"to", Timeline{To: end / 3}, func(s int64) bool { return s-ops[0].Time < end/3 }},
		{"max", Timeline{MaxSections: 50}, nil},
	} {
		tc.tl.Workers = 4
		tl := windowOf(ops, tc.tl)
		want := 0
		for _, s := range checker.Sections(ops) {
			if tc.kept == nil || tc.kept(s.Start) {
				want++
			}
		}
		if tc.kept == nil {
			want = 50
		}
		if len(tl.secs) != want || tl.total != len(checker.Sections(ops)) {
			t.Errorf("%s: kept %d of %d sections, want %d of %d", tc.name, len(tl.secs), tl.total, want, len(checker.Sections(ops)))
		}
		var buf bytes.Buffer
		if err := tl.WriteHTML(&buf, TimelinePage{}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if note := strings.Contains(buf.String(), "This timeline holds"); note != (tc.name != "all") {
			t.Errorf("%s: the page says it holds part of the history: %v", tc.name, note)
		}
	}
}

// TestTimelineEscapes: words from a history or its results are text on the
// page, never markup or script.
func TestTimelineEscapes(t *testing.T) {
	ops, _, err := gen.Ops(gen.Config{Sections: 20, Workers: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	evil := "</script><script>alert(1)</script>"
	ops = append(ops, history.Op{Index: int64(len(ops)), Time: ops[len(ops)-1].Time, Type: history.Info,
		Process: history.Nemesis, F: history.FPause, Value: map[history.Keyword]any{"kind": history.Keyword(evil), "process": int64(0)}})
	tl := timelineOf(ops, 2)
	var buf bytes.Buffer
	page := TimelinePage{Summary: Summary{Name: evil, Config: evil, Verdict: "false",
		Checks: []Check{{Name: "lock-counter", Verdict: "false", Explanation: evil}}}}
	if err := tl.WriteHTML(&buf, page); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(buf.String(), "<script"); got != 2 {
		t.Errorf("the page has %d <script elements, want its own 2", got)
	}
	if strings.Contains(buf.String(), "alert(1)</script>") {
		t.Error("a history's words end a script element")
	}
}

func TestTimelineNothingToDraw(t *testing.T) {
	untimed := timelineOf([]history.Op{{Index: 0, Time: history.Unset, Type: history.Invoke, Process: 0, F: history.FAcquire}}, 0)
	empty := timelineOf([]history.Op{{Index: 0, Time: 5, Type: history.Invoke, Process: 0, F: history.FAcquire}}, 0)
	for _, tc := range []struct {
		tl   *Timeline
		want error
	}{{untimed, ErrUntimed}, {empty, ErrNoSections}} {
		if err := tc.tl.WriteHTML(&bytes.Buffer{}, TimelinePage{}); !errors.Is(err, tc.want) {
			t.Errorf("WriteHTML: %v, want %v", err, tc.want)
		}
	}
}

// section is the ops of one critical section of process p: acquire at a,
// read r at a+1, write w sent at ws and acknowledged at we (no write when
// w is noWrite), release at end.
func section(p history.Process, a, ws, we, end int64, r, w int64) []history.Op {
	op := func(at int64, typ history.Type, f history.Keyword, v any) history.Op {
		return history.Op{Time: at, Type: typ, Process: p, F: f, Value: v}
	}
	ops := []history.Op{op(a-1, history.Invoke, history.FAcquire, nil), op(a, history.Ok, history.FAcquire, nil),
		op(a+1, history.Invoke, history.FRead, nil), op(a+1, history.Ok, history.FRead, r)}
	if w != noWrite {
		ops = append(ops, op(ws, history.Invoke, history.FWrite, w), op(we, history.Ok, history.FWrite, w))
	}
	return append(ops, op(end, history.Invoke, history.FRelease, nil), op(end+1, history.Ok, history.FRelease, nil))
}

const noWrite = math.MinInt64

// sorted indexes ops in time order, as a history is.
func sorted(parts ...[]history.Op) []history.Op {
	var ops []history.Op
	for _, p := range parts {
		ops = append(ops, p...)
	}
	slices.SortStableFunc(ops, func(a, b history.Op) int { return int(a.Time - b.Time) })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

// TestTimelineFlagsEdges: the edges of the flags' definitions, each as the
// check draws it — a section that wrote nothing overlaps nobody, and a
// write sent at the very time another is acknowledged has not seen it.
func TestTimelineFlagsEdges(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ops            []history.Op
		overlap, stale int
	}{
		{"overlap of writers", sorted(section(0, 10, 20, 21, 30, 0, 1), section(1, 15, 40, 41, 50, 1, 2)), 2, 0},
		{"a reader overlaps nobody", sorted(section(0, 10, 20, 21, 30, 0, 1), section(1, 15, 0, 0, 50, 1, noWrite)), 0, 0},
		{"same time is not before", sorted(section(0, 10, 20, 25, 30, 0, 1), section(1, 22, 25, 45, 50, 0, 1)), 2, 0},
		{"stale", sorted(section(0, 10, 20, 24, 30, 0, 1), section(1, 22, 25, 45, 50, 0, 1)), 2, 1},
		{"negative values", sorted(section(0, 10, 20, 21, 30, -6, -5), section(1, 40, 42, 45, 50, -5, -4)), 0, 0},
	} {
		ops := tc.ops
		rs, err := checker.Check(context.Background(), ops, checker.Options{Model: checker.ModelLockCounter, Initial: int64(-6)})
		if err != nil {
			t.Fatal(err)
		}
		fig, _ := rs.LockFigures()
		tl := timelineOf(ops, 2)
		tl.finish()
		overlap, stale := len(flagged(tl, flagOverlap)), len(flagged(tl, flagStale))
		if overlap != tc.overlap || int64(overlap) != fig.Overlapping || stale != tc.stale {
			t.Errorf("%s: %d overlapping, %d stale; want %d, %d (the check: %d overlapping)",
				tc.name, overlap, stale, tc.overlap, tc.stale, fig.Overlapping)
		}
	}
}

// TestTimelineReviewedEdges: what a review of the page found, each kept
// fixed — a section overlapping one that began before the window is
// coloured as the check counts it; a write of a section's second write
// does not make a third's stale; an unsorted history is refused; a fault
// that failed to begin is an instant; a write no lock held is marked.
func TestTimelineReviewedEdges(t *testing.T) {
	// Process 0 holds the lock from 10 to 60 (frozen); process 1 takes it
	// at 40 and writes: both overlap, and the window begins at 35.
	edge := sorted(section(0, 10, 50, 55, 60, 0, 1), section(1, 40, 42, 44, 46, 0, 1))
	tl := windowOf(edge, Timeline{From: 35 - edge[0].Time, Workers: 2})
	tl.finish()
	if len(tl.secs) != 1 || tl.secs[0].flags&flagOverlap == 0 {
		t.Errorf("window from 35: %d sections, flags %b; want process 1's, overlapping", len(tl.secs), tl.secs[0].flags)
	}

	// Process 0 writes 5 and then 6 in one section; process 1 writes 4
	// between them: the check's section keeps its last write, and nothing
	// is stale.
	two := sorted(section(0, 10, 20, 21, 45, 4, 5), section(1, 25, 30, 31, 35, 3, 4))
	two = append(two[:0:0], two...)
	for i, o := range two {
		if o.Process == 0 && o.F == history.FRelease && o.Type == history.Invoke {
			extra := []history.Op{{Time: o.Time - 5, Type: history.Invoke, Process: 0, F: history.FWrite, Value: int64(6)},
				{Time: o.Time - 4, Type: history.Ok, Process: 0, F: history.FWrite, Value: int64(6)}}
			two = sorted(two[:i], extra, two[i:])
			break
		}
	}
	tl = timelineOf(two, 2)
	tl.finish()
	if got := len(flagged(tl, flagStale)); got != 0 {
		t.Errorf("two writes in a section: %d stale, want none, as the check", got)
	}

	unsorted := sorted(section(0, 10, 20, 21, 30, 0, 1))
	unsorted[2].Time, unsorted[3].Time = unsorted[3].Time+1, unsorted[2].Time
	if err := timelineOf(unsorted, 1).WriteHTML(&bytes.Buffer{}, TimelinePage{}); !errors.Is(err, ErrUnsorted) {
		t.Errorf("unsorted history: %v, want %v", err, ErrUnsorted)
	}

	faults := sorted(section(0, 10, 20, 21, 30, 0, 1), []history.Op{
		{Time: 12, Type: history.Info, Process: history.Nemesis, F: history.FPause,
			Value: map[history.Keyword]any{"kind": history.Keyword("sigstop"), "process": int64(0), "error": "no such process"}},
		{Time: 40, Type: history.Ok, Process: 1, F: history.FWrite, Value: int64(7)},
	})
	tl = timelineOf(faults, 2)
	tl.finish()
	if fs := tl.faults.faults; len(fs) != 1 || !fs[0].Failed || fs[0].End != fs[0].Start {
		t.Errorf("failed pause: %+v, want one instant, failed", fs)
	}
	if len(tl.marks) != 1 || !strings.Contains(tl.marks[0].Label, "outside any section") {
		t.Errorf("marks %+v, want the unguarded write", tl.marks)
	}
}

// TestTimelineExtends: a section's extend before its write is in the
// page's data as its outcome, and a section without one says none.
func TestTimelineExtends(t *testing.T) {
	h := `{:time 1, :type :invoke, :process 0, :f :acquire, :value nil}
{:time 2, :type :ok, :process 0, :f :acquire, :value nil, :lease-ms 500}
{:time 3, :type :invoke, :process 0, :f :read, :value nil}
{:time 4, :type :ok, :process 0, :f :read, :value 0}
{:time 5, :type :invoke, :process 0, :f :extend, :value nil}
{:time 6, :type :fail, :process 0, :f :extend, :value nil, :error :lost}
{:time 7, :type :invoke, :process 0, :f :release, :value nil}
{:time 8, :type :ok, :process 0, :f :release, :value nil}
{:time 9, :type :invoke, :process 1, :f :acquire, :value nil}
{:time 10, :type :ok, :process 1, :f :acquire, :value nil, :lease-ms 500}
{:time 11, :type :invoke, :process 1, :f :extend, :value nil}
{:time 12, :type :ok, :process 1, :f :extend, :value nil}
{:time 13, :type :invoke, :process 1, :f :release, :value nil}
{:time 14, :type :ok, :process 1, :f :release, :value nil}
{:time 15, :type :invoke, :process 2, :f :acquire, :value nil}
{:time 16, :type :ok, :process 2, :f :acquire, :value nil, :lease-ms 500}
`
	ops, err := history.ReadAll(strings.NewReader(h), "h.edn")
	if err != nil {
		t.Fatal(err)
	}
	tl := timelineOf(ops, 3)
	tl.finish()
	d := tl.data()
	var got []history.Keyword
	for _, e := range d.S.Ext {
		got = append(got, d.Rels[e])
	}
	if want := []history.Keyword{"lost", "ok", ""}; !slices.Equal(got, want) {
		t.Errorf("the sections' extends: %q, want %q", got, want)
	}
}
