package checker

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// An hstep is one op of a hand-written history: process, :f, outcome, value,
// and times in ms of invocation and completion (a completion at 0 never
// happens). Fence, when set, goes on the write.
type hstep struct {
	p         history.Process
	f         history.Keyword
	typ       history.Type
	v         int64
	inv, done int64
	fence     int64
}

// steps renders a hand-written history, with an acquire before the first
// op of each process and a release after its last, as a worker records
// them.
func steps(ss ...hstep) []history.Op {
	ms := int64(time.Millisecond)
	var parts [][]history.Op
	first, last := map[history.Process]int64{}, map[history.Process]int64{}
	for _, s := range ss {
		if t, ok := first[s.p]; !ok || s.inv < t {
			first[s.p] = s.inv
		}
		last[s.p] = max(last[s.p], s.inv, s.done)
	}
	for p, t := range first {
		parts = append(parts, []history.Op{
			{Time: t*ms - 2, Type: history.Invoke, Process: p, F: history.FAcquire},
			{Time: t*ms - 1, Type: history.Ok, Process: p, F: history.FAcquire, Extra: map[history.Keyword]any{history.KeyLeaseMS: int64(500)}},
		})
	}
	for _, s := range ss {
		var x map[history.Keyword]any
		if s.fence > 0 {
			x = map[history.Keyword]any{history.KeyFence: s.fence}
		}
		if s.p == 100 {
			x = map[history.Keyword]any{history.KeyFinal: true}
		}
		inv := history.Op{Time: s.inv * ms, Type: history.Invoke, Process: s.p, F: s.f, Extra: x}
		if s.f == history.FWrite {
			inv.Value = s.v
		}
		part := []history.Op{inv}
		if s.done > 0 {
			part = append(part, history.Op{Time: s.done * ms, Type: s.typ, Process: s.p, F: s.f, Value: s.v, Extra: x})
		}
		parts = append(parts, part)
	}
	for p, t := range last {
		if p == 100 {
			continue
		}
		parts = append(parts, []history.Op{
			{Time: t*ms + 1, Type: history.Invoke, Process: p, F: history.FRelease},
			{Time: t*ms + 2, Type: history.Ok, Process: p, F: history.FRelease},
		})
	}
	return build(parts...)
}

func rd(p history.Process, v, inv, done int64) hstep {
	return hstep{p: p, f: history.FRead, typ: history.Ok, v: v, inv: inv, done: done}
}

func wr(p history.Process, typ history.Type, v, inv, done int64) hstep {
	return hstep{p: p, f: history.FWrite, typ: typ, v: v, inv: inv, done: done}
}

// TestLockCounterModel checks the histories of issue 9, each of which the
// checker before the model called valid (or invalid, the last), with both
// analyzers.
func TestLockCounterModel(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ops        []history.Op
		linear     Validity
		lockCtr    Validity
		lost       [2]int64 // lost-min, lost-max
		explain    []string // phrases the :linear explanation holds
		lcExplain  string   // a phrase the :lock-counter explanation holds
		porcupineX string   // a phrase porcupine's explanation holds
	}{
		{
			// The history: p3's read of 2 proves p2's :info write
			// took effect; p1 then wrote 2 again.
			name: "a read proves an :info write happened, and a later write lost it",
			ops: steps(rd(0, 0, 12, 13), wr(0, history.Ok, 1, 14, 15),
				rd(1, 1, 22, 23),
				rd(2, 1, 26, 27), wr(2, history.Info, 2, 28, 29),
				rd(3, 2, 34, 35),
				wr(1, history.Ok, 2, 50, 51),
				wr(3, history.Ok, 3, 60, 61),
				rd(100, 3, 100, 101)),
			linear: Invalid, lockCtr: Invalid, lost: [2]int64{1, 1},
			explain:   []string{"(process 3) read 2", "which only", "(process 2), a write of unknown outcome", "(process 1) then wrote 2 again", "after reading 1", "an update was lost"},
			lcExplain: "1 of unknown outcome that reads prove took effect",
		},
		{
			name:   "a section that reads 7 and writes 2",
			ops:    steps(rd(0, 0, 1, 2), wr(0, history.Ok, 1, 3, 4), rd(1, 7, 10, 11), wr(1, history.Ok, 2, 12, 13), rd(100, 2, 20, 21)),
			linear: Invalid, lockCtr: Valid, lost: [2]int64{0, 0},
			explain: []string{"wrote 2 after reading 7: a section writes what it read plus one"},
		},
		{
			name:   "a read of a value before any write of it began",
			ops:    steps(rd(0, 1, 1, 2), wr(0, history.Ok, 2, 3, 4), rd(1, 0, 0, 1), wr(1, history.Ok, 1, 5, 6), rd(100, 2, 20, 21)),
			linear: Invalid, lockCtr: Valid, lost: [2]int64{0, 0},
			explain: []string{"read 1"},
		},
		{
			// The final read includes a write that never completed: it may
			// have happened, so the counter's rise is no violation.
			name:   "a write that never completed, seen by the final read",
			ops:    steps(rd(0, 0, 1, 2), wr(0, history.Ok, 1, 3, 4), rd(1, 1, 5, 6), wr(1, history.Info, 2, 7, 0), rd(100, 2, 20, 21)),
			linear: Valid, lockCtr: Valid, lost: [2]int64{0, 0},
		},
		{
			// p1's :info write with fence 5 must have happened (p2 read 2);
			// p2's write with fence 4 cannot take effect after it.
			name: "an :info fenced write that must have happened, then a lower fence",
			ops: steps(rd(0, 0, 1, 2), hstep{p: 0, f: history.FWrite, typ: history.Ok, v: 1, inv: 3, done: 4, fence: 3},
				rd(1, 1, 5, 6), hstep{p: 1, f: history.FWrite, typ: history.Info, v: 2, inv: 7, done: 8, fence: 5},
				rd(2, 2, 9, 10), hstep{p: 2, f: history.FWrite, typ: history.Ok, v: 3, inv: 11, done: 12, fence: 4},
				rd(100, 3, 20, 21)),
			linear: Invalid, lockCtr: Valid, lost: [2]int64{0, 0},
			explain: []string{"with fence 4", "a write with a fence of 5 or more took effect before it", "op 13 (process 1), a write of 2 whose outcome is unknown"},
		},
		{
			// An :info write that may hide a lost update: lost 0–1, never 0.
			name: "an unsettled write that could hide a loss",
			ops: steps(rd(0, 0, 1, 2), wr(0, history.Info, 1, 3, 4),
				rd(1, 0, 5, 6), wr(1, history.Ok, 1, 7, 8), rd(100, 1, 20, 21)),
			linear: Valid, lockCtr: Valid, lost: [2]int64{0, 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, analyzer := range []string{AnalyzerCounterWalk, AnalyzerPorcupine} {
				rs, err := Check(context.Background(), tc.ops, Options{Model: ModelLockCounter, Analyzer: analyzer})
				if err != nil {
					t.Fatal(err)
				}
				lin, _ := rs.Check("linear")
				if lin.Valid != tc.linear {
					t.Errorf("%s: :linear %v, want %v (%s)\n%s", analyzer, lin.Valid, tc.linear, lin.Explanation, edn(tc.ops))
				}
				if analyzer == AnalyzerCounterWalk {
					for _, want := range tc.explain {
						if !strings.Contains(lin.Explanation, want) {
							t.Errorf(":linear explanation %q lacks %q", lin.Explanation, want)
						}
					}
				}
				lc, _ := rs.Check("lock-counter")
				lo, _ := history.Int(lc.Get("lost-min"))
				hi, _ := history.Int(lc.Get("lost-max"))
				if lc.Valid != tc.lockCtr || lo != tc.lost[0] || hi != tc.lost[1] {
					t.Errorf(":lock-counter %v lost %d–%d, want %v lost %d–%d (%s)", lc.Valid, lo, hi, tc.lockCtr, tc.lost[0], tc.lost[1], lc.Explanation)
				}
				if !strings.Contains(lc.Explanation, tc.lcExplain) {
					t.Errorf(":lock-counter explanation %q lacks %q", lc.Explanation, tc.lcExplain)
				}
			}
		})
	}
}

// TestLockCounterEdges checks histories that a review found the checker
// once judged or explained wrongly (checker/testdata/edge), with both
// analyzers: each keeps its verdicts, its bounds and its words.
func TestLockCounterEdges(t *testing.T) {
	unknown := [2]int64{-1, -1} // lost-min and lost-max nil
	for _, tc := range []struct {
		file             string
		linear, lockCtr  Validity
		lost             [2]int64
		linearX, lockCtX string // phrases the explanations hold
	}{
		// The last final read is flagged on its invocation only.
		{"twofinal.edn", Valid, Valid, [2]int64{0, 0}, "", ""},
		// A write whose value is no integer may have landed: nothing counted.
		{"bad.edn", Unknown, Unknown, unknown, "not an integer", "lost updates cannot be counted"},
		// The final read has no :time: checked in file order, not sorted first.
		{"mixed.edn", Valid, Valid, [2]int64{0, 0}, "", ""},
		// A section's second write read what its first did.
		{"twowrites.edn", Invalid, Invalid, [2]int64{0, 0}, "wrote 3 after reading 0: a section writes what it read plus one", ""},
		// An acknowledged write overlaps the final read: lost 1–2, and no
		// write of unknown outcome to blame for the range.
		{"overlapok.edn", Invalid, Invalid, [2]int64{1, 2}, "", "at least 1 update lost, at most 2"},
		// The only write that could explain a read carries a stale fence.
		{"fenceproof.edn", Invalid, Invalid, [2]int64{1, 1}, "read 2, but completed before op 21", "(if fences let it land)"},
		{"fencemaybe.edn", Invalid, Valid, [2]int64{0, 0}, "the counter must have reached 2, which only writes of unknown outcome wrote", ""},
		// The write again was made with no read before it.
		{"noread.edn", Invalid, Invalid, [2]int64{1, 1}, "op 13 (process 1) then wrote 1 again (invoked at +14ns): an update was lost", ""},
		{"fenceorder.edn", Invalid, Valid, [2]int64{0, 1}, "none of the 1 other writes of 1 of unknown outcome fits an order the history allows", ""},
		{"fenceearliest.edn", Invalid, Valid, [2]int64{0, 1}, "a write with a fence of 6 or more took effect before it (such as op 15", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ops, err := history.ReadFile(filepath.Join("testdata", "edge", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, analyzer := range []string{AnalyzerCounterWalk, AnalyzerPorcupine} {
				rs, err := Check(context.Background(), ops, Options{Model: ModelLockCounter, Analyzer: analyzer})
				if err != nil {
					t.Fatal(err)
				}
				lin, _ := rs.Check("linear")
				lc, _ := rs.Check("lock-counter")
				lo, hi := int64(-1), int64(-1)
				if f, _ := rs.LockFigures(); f.Counted {
					lo, hi = f.LostMin, f.LostMax
				}
				if lin.Valid != tc.linear || lc.Valid != tc.lockCtr || lo != tc.lost[0] || hi != tc.lost[1] {
					t.Errorf("%s: :linear %v, :lock-counter %v, lost %d–%d; want %v, %v, %d–%d\n%s\n%s",
						analyzer, lin.Valid, lc.Valid, lo, hi, tc.linear, tc.lockCtr, tc.lost[0], tc.lost[1], lin.Explanation, lc.Explanation)
				}
				if analyzer == AnalyzerCounterWalk && !strings.Contains(lin.Explanation, tc.linearX) {
					t.Errorf(":linear explanation %q lacks %q", lin.Explanation, tc.linearX)
				}
				if !strings.Contains(lc.Explanation, tc.lockCtX) {
					t.Errorf(":lock-counter explanation %q lacks %q", lc.Explanation, tc.lockCtX)
				}
			}
		})
	}
}
