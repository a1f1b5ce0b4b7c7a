package checker

import (
	"context"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
)

// sec returns the ops of one critical section of process p: acquired at
// t0 (ms), read value r at t0+1, write r+1 from t1-1 to t1 with outcome wt,
// release invoked at t1+1.
func sec(p history.Process, t0, t1, r int64, wt history.Type, fence int64) []history.Op {
	ms := int64(1e6)
	acq := map[history.Keyword]any{history.KeyLeaseMS: int64(500)}
	var wx map[history.Keyword]any
	if fence > 0 {
		acq[history.KeyFence] = fence
		wx = map[history.Keyword]any{history.KeyFence: fence}
	}
	w := history.Op{Time: t1 * ms, Type: wt, Process: p, F: history.FWrite, Value: r + 1, Extra: wx}
	if wt == history.Fail {
		w.Error = history.ErrStaleFence
	}
	return []history.Op{
		{Time: t0*ms - 1, Type: history.Invoke, Process: p, F: history.FAcquire},
		{Time: t0 * ms, Type: history.Ok, Process: p, F: history.FAcquire, Extra: acq},
		{Time: t0*ms + 1, Type: history.Invoke, Process: p, F: history.FRead},
		{Time: t0*ms + 2, Type: history.Ok, Process: p, F: history.FRead, Value: r},
		{Time: (t1 - 1) * ms, Type: history.Invoke, Process: p, F: history.FWrite, Value: r + 1, Extra: wx},
		w,
		{Time: (t1 + 1) * ms, Type: history.Invoke, Process: p, F: history.FRelease},
		{Time: (t1+1)*ms + 1, Type: history.Ok, Process: p, F: history.FRelease},
	}
}

// resolved marks the write of a section :resolved :audit, as a run marks
// an :info write the audit table settled.
func resolved(ops []history.Op) []history.Op {
	for i, o := range ops {
		if o.F == history.FWrite && o.Type != history.Invoke {
			ops[i] = o.With(history.KeyResolved, history.Keyword("audit"))
		}
	}
	return ops
}

// read is a read by p, outside any section, of v at t (ms).
func read(p history.Process, t, v int64) []history.Op {
	return []history.Op{
		{Time: t * 1e6, Type: history.Invoke, Process: p, F: history.FRead},
		{Time: t*1e6 + 1, Type: history.Ok, Process: p, F: history.FRead, Value: v},
	}
}

func finalRead(t, v int64) []history.Op {
	x := map[history.Keyword]any{history.KeyFinal: true}
	return []history.Op{
		{Time: t * 1e6, Type: history.Invoke, Process: 100, F: history.FRead, Extra: x},
		{Time: t*1e6 + 1, Type: history.Ok, Process: 100, F: history.FRead, Value: v, Extra: x},
	}
}

func pause(p history.Process, t0, t1 int64) []history.Op {
	v := map[history.Keyword]any{"process": int64(p), "kind": history.Keyword("sigstop")}
	return []history.Op{
		{Time: t0 * 1e6, Type: history.Info, Process: history.Nemesis, F: history.FPause, Value: v},
		{Time: t1 * 1e6, Type: history.Info, Process: history.Nemesis, F: history.FResume, Value: v},
	}
}

// build sorts the parts into history order and indexes them, as a run does.
func build(parts ...[]history.Op) []history.Op {
	var ops []history.Op
	for _, p := range parts {
		ops = append(ops, p...)
	}
	for i := 1; i < len(ops); i++ { // insertion sort: stable, and tiny inputs
		for j := i; j > 0 && ops[j].Time < ops[j-1].Time; j-- {
			ops[j], ops[j-1] = ops[j-1], ops[j]
		}
	}
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

func TestLockCounter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ops     []history.Op
		valid   Validity
		want    map[string]int64
		explain string // a phrase the explanation must hold
	}{
		{
			name:  "serial sections",
			ops:   build(sec(0, 10, 40, 0, history.Ok, 0), sec(1, 50, 80, 1, history.Ok, 0), sec(2, 90, 120, 2, history.Ok, 0), finalRead(200, 3)),
			valid: Valid,
			want:  map[string]int64{"writes": 3, "final": 3, "lost-min": 0, "lost-max": 0, "overlapping-sections": 0, "lock-overlapping-sections": 0, "pauses": 0},
		},
		{
			name: "paused holder overwrites",
			// 0 reads 0 at 10, is paused 20..900, writes 1 at 901: after 1 and 2
			// wrote 1 and 2. Sections of 1 and 2 overlap 0's.
			ops: build(sec(0, 10, 901, 0, history.Ok, 0), pause(0, 20, 900),
				sec(1, 520, 560, 0, history.Ok, 0), sec(2, 570, 600, 1, history.Ok, 0), finalRead(1000, 1)),
			valid:   Invalid,
			want:    map[string]int64{"writes": 3, "final": 1, "lost-min": 2, "lost-max": 2, "overlapping-sections": 3, "late-writes": 1, "pauses": 1},
			explain: "paused (sigstop",
		},
		{
			name: "fenced: stale write rejected",
			ops: build(sec(0, 10, 901, 0, history.Fail, 1), pause(0, 20, 900),
				sec(1, 520, 560, 0, history.Ok, 2), sec(2, 570, 600, 1, history.Ok, 3), finalRead(1000, 2)),
			valid: Valid,
			want: map[string]int64{"writes": 2, "final": 2, "lost-min": 0, "lost-max": 0, "stale-rejected": 1,
				"overlapping-sections": 0, "lock-overlapping-sections": 3},
		},
		{
			name:  "no final read",
			ops:   build(sec(0, 10, 40, 0, history.Ok, 0)),
			valid: Unknown,
			want:  map[string]int64{"writes": 1},
		},
		{
			name:  ":info write that happened",
			ops:   build(sec(0, 10, 40, 0, history.Info, 0), sec(1, 50, 80, 1, history.Ok, 0), finalRead(200, 2)),
			valid: Valid,
			want:  map[string]int64{"writes": 1, "info-writes": 1, "lost-min": 0, "lost-max": 0},
		},
		{
			name:    "counter above every write",
			ops:     build(sec(0, 10, 40, 0, history.Ok, 0), finalRead(200, 5)),
			valid:   Invalid,
			explain: "more than the 1 writes",
		},
		{
			name: "fence order violated",
			ops: build(sec(0, 10, 40, 0, history.Ok, 5), sec(1, 50, 80, 1, history.Ok, 4),
				finalRead(200, 2)),
			valid:   Invalid,
			explain: "fence no larger",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := LockCounter(tc.ops, 0)
			if r.Valid != tc.valid {
				t.Errorf("valid? %v, want %v (%s)", r.Valid, tc.valid, r.Explanation)
			}
			for k, want := range tc.want {
				if got, ok := history.Int(r.Get(k)); !ok || got != want {
					t.Errorf("%s = %v, want %d", k, r.Get(k), want)
				}
			}
			if !strings.Contains(r.Explanation, tc.explain) {
				t.Errorf("explanation %q lacks %q", r.Explanation, tc.explain)
			}
		})
	}
}

// TestResolvedWriteReturnsLate: 0's write is held past its :info (at 40)
// and lands after 1's read of 0 at 50; the audit table says it took
// effect. Its :ok keeps the :info's time, which is no return: read as one,
// 1's read would be stale and the history not linearizable — a wrong
// invalid, and bounds on lost updates counted too high.
//
// Where a read before the final read shows that only the resolved write
// made its value, the write took effect before then: it counts toward the
// least lost, as a write of unknown outcome would.
func TestResolvedWriteReturnsLate(t *testing.T) {
	for _, tc := range []struct {
		name             string
		ops              []history.Op
		linear, lc       Validity
		lostMin, lostMax int64
	}{
		{"resolved :ok by the audit", build(resolved(sec(0, 10, 40, 0, history.Ok, 0)), read(1, 50, 0), finalRead(200, 1)),
			Valid, Valid, 0, 0},
		{"acknowledged at 40", build(sec(0, 10, 40, 0, history.Ok, 0), read(1, 50, 0), finalRead(200, 1)),
			Invalid, Valid, 0, 0},
		// 2 reads 1 at 45, which only 0's resolved write made; 1 then
		// writes 1 again: one update lost, whenever 0's write landed.
		{"a read proves the resolved write landed", build(resolved(sec(0, 10, 40, 0, history.Ok, 0)), read(2, 45, 1),
			sec(1, 50, 60, 0, history.Ok, 0), finalRead(200, 1)), Invalid, Invalid, 1, 1},
		// Fence 2's write resolved at 40 may have landed after fence 1's
		// at 60: no fence violation is proven by the sections.
		{"a resolved fenced write before a lower fence", build(resolved(sec(0, 10, 40, 0, history.Ok, 2)),
			sec(1, 50, 60, 1, history.Ok, 1), finalRead(200, 2)), Invalid, Valid, 0, 0},
	} {
		for _, analyzer := range []string{AnalyzerCounterWalk, AnalyzerPorcupine} {
			t.Run(tc.name+"/"+analyzer, func(t *testing.T) {
				rs, err := Check(context.Background(), tc.ops, Options{Model: ModelLockCounter, Analyzer: analyzer})
				if err != nil {
					t.Fatal(err)
				}
				if r, ok := rs.Check("linear"); !ok || r.Valid != tc.linear {
					t.Errorf("linear valid? %v, want %v (%s)", r.Valid, tc.linear, r.Explanation)
				}
				r, ok := rs.Check("lock-counter")
				if !ok || r.Valid != tc.lc {
					t.Errorf("lock-counter valid? %v, want %v (%s)", r.Valid, tc.lc, r.Explanation)
				}
				for k, want := range map[string]int64{"lost-min": tc.lostMin, "lost-max": tc.lostMax} {
					if got, ok := history.Int(r.Get(k)); !ok || got != want {
						t.Errorf("%s = %v, want %d", k, r.Get(k), want)
					}
				}
			})
		}
	}
}

// TestLockCounterNoPanic feeds histories that break the section pattern: the
// check must answer, not crash.
func TestLockCounterNoPanic(t *testing.T) {
	for _, ops := range [][]history.Op{
		nil,
		{{Type: history.Ok, Process: 0, F: history.FWrite, Value: "x"}},
		{{Type: history.Info, Process: history.Nemesis, F: history.FPause, Value: 3}},
		{{Type: history.Ok, Process: 0, F: history.FAcquire}, {Type: history.Ok, Process: 0, F: history.FAcquire}},
	} {
		r := LockCounter(ops, 0)
		if strings.Contains(r.Explanation, "panicked") {
			t.Errorf("LockCounter(%v) panicked: %s", ops, r.Explanation)
		}
	}
}

// TestPausesOfTwoKinds: a process in an in-section stop that the nemesis's
// SIGSTOP also hits is in two pauses at once, each ended by its own
// resume. Paired by process alone, the first pause stayed open to the
// history's end and an explanation blamed a 5.3 s pause that lasted 800 ms.
func TestPausesOfTwoKinds(t *testing.T) {
	ev := func(f history.Keyword, kind string, ms int64) history.Op {
		return history.Op{Time: ms * 1e6, Type: history.Info, Process: history.Nemesis, F: f,
			Value: map[history.Keyword]any{"process": int64(2), "kind": history.Keyword(kind)}}
	}
	ops := build([]history.Op{
		ev(history.FPause, "stop", 100), ev(history.FPause, "sigstop", 200),
		ev(history.FResume, "stop", 900), ev(history.FResume, "sigstop", 1000),
	}, finalRead(5000, 0))
	got := Pauses(ops)
	want := []struct {
		kind       history.Keyword
		start, end int64
	}{{"stop", 100e6, 900e6}, {"sigstop", 200e6, 1000e6}}
	if len(got) != len(want) {
		t.Fatalf("pauses %+v, want %d", got, len(want))
	}
	for i, w := range want {
		if g := got[i]; g.Kind != w.kind || g.Start != w.start || g.End != w.end {
			t.Errorf("pause %d: %s %d–%d, want %s %d–%d", i, g.Kind, g.Start, g.End, w.kind, w.start, w.end)
		}
	}
}
