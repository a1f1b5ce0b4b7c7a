package checker

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"pgregory.net/rapid"
)

// genHistory draws a small lock-counter history as workers record it, from
// a simulation in which the lock does not always hold: each worker's
// sections follow one another, but sections of different workers overlap
// freely, and every read and write takes effect at a point inside its
// interval on a shared counter. Overlaps then lose updates as paused
// holders do. Outcomes vary as real ones do — acquires that time out or
// crash, reads that fail, writes rejected or of unknown outcome (which
// happened or not), releases that find the lease gone — and now and then a
// value is off by one or an op is lost, so that the history breaks the
// rules. Times are small integers, so that intervals often share ends.
func genHistory(t *rapid.T) ([]history.Op, int64) {
	workers := rapid.IntRange(1, 4).Draw(t, "workers")
	initial := rapid.Int64Range(0, 2).Draw(t, "initial")
	type step struct {
		op       history.Op // the invocation; the completion is made from it
		done     history.Op
		point    int64
		write    bool // a write: its value is its section's read + 1
		happened bool // its effect takes place (ok, or :info that did)
		read     *step
	}
	var steps []*step
	maxT := int64(0)
	for w := range workers {
		proc := history.Process(w)
		t0 := rapid.Int64Range(0, 10).Draw(t, "start")
		next := func() (int64, int64, int64) {
			inv := t0 + rapid.Int64Range(0, 2).Draw(t, "gap")
			pt := inv + rapid.Int64Range(0, 4).Draw(t, "to point")
			done := pt + rapid.Int64Range(0, 4).Draw(t, "to completion")
			t0 = done
			maxT = max(maxT, done)
			return inv, pt, done
		}
		add := func(f history.Keyword, typ history.Type) *step {
			inv, pt, done := next()
			s := &step{point: pt,
				op:   history.Op{Time: inv, Type: history.Invoke, Process: proc, F: f},
				done: history.Op{Time: done, Type: typ, Process: proc, F: f}}
			steps = append(steps, s)
			if typ == history.Info {
				proc += history.Process(workers)
			}
			return s
		}
		outcome := func(label string, weights ...int) history.Type {
			types := []history.Type{history.Ok, history.Fail, history.Info}
			var pool []history.Type
			for i, w := range weights {
				for range w {
					pool = append(pool, types[i])
				}
			}
			return rapid.SampledFrom(pool).Draw(t, label)
		}
		for range rapid.IntRange(0, 3).Draw(t, "sections") {
			acq := add(history.FAcquire, outcome("acquire", 8, 1, 1))
			if acq.done.Type != history.Ok {
				continue
			}
			acq.done.Extra = map[history.Keyword]any{history.KeyLeaseMS: int64(5), history.KeyToken: "t"}
			rd := add(history.FRead, outcome("read", 8, 1, 0))
			if rd.done.Type == history.Ok {
				wr := add(history.FWrite, outcome("write", 5, 1, 2))
				wr.write, wr.read = true, rd
				wr.happened = wr.done.Type == history.Ok ||
					wr.done.Type == history.Info && rapid.Bool().Draw(t, "happened")
				if wr.done.Type == history.Fail {
					wr.done.Error = history.ErrStaleFence
				}
			}
			rel := add(history.FRelease, outcome("release", 6, 2, 1))
			if rel.done.Type == history.Fail {
				rel.done.Error = history.Keyword("expired")
			}
		}
	}
	// The effects, in the order of their points.
	byPoint := slices.Clone(steps)
	slices.SortStableFunc(byPoint, func(a, b *step) int { return cmp.Compare(a.point, b.point) })
	counter := initial
	for _, s := range byPoint {
		switch {
		case s.op.F == history.FRead:
			s.done.Value = counter
		case s.write:
			v, _ := history.Int(s.read.done.Value)
			s.op.Value, s.done.Value = v+1, v+1
			if s.happened {
				counter = v + 1
			}
		}
	}
	var ops []history.Op
	for _, s := range steps {
		ops = append(ops, s.op, s.done)
	}
	if rapid.IntRange(0, 5).Draw(t, "final") > 0 {
		final := map[history.Keyword]any{history.KeyFinal: true}
		proc := history.Process(1000)
		ops = append(ops,
			history.Op{Time: maxT + 1, Type: history.Invoke, Process: proc, F: history.FRead, Extra: final},
			history.Op{Time: maxT + 2, Type: history.Ok, Process: proc, F: history.FRead, Value: counter, Extra: final})
	}
	for range rapid.IntRange(0, 1).Draw(t, "spoils") {
		if len(ops) == 0 {
			break
		}
		i := rapid.IntRange(0, len(ops)-1).Draw(t, "spoilt")
		switch rapid.IntRange(0, 2).Draw(t, "spoil") {
		case 0:
			ops = slices.Delete(ops, i, i+1)
		case 1:
			if v, ok := history.Int(ops[i].Value); ok {
				ops[i].Value = v + rapid.SampledFrom([]int64{-1, 1}).Draw(t, "by")
			}
		case 2:
			ops[i].Time = max(0, ops[i].Time+rapid.Int64Range(-3, 3).Draw(t, "by"))
		}
	}
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops, initial
}

// TestLockCounterAgreement is the proof by agreement on whole histories: on
// every drawn lock-counter history,
//
//   - the counter walk and porcupine give the same :linear verdict;
//   - the Stream finds the problems pairCalls finds;
//   - the Stream's :lock-counter result is LockCounter's;
//   - the history written as EDN and checked as it is read gives the
//     results Check gives in memory, to the byte.
func TestLockCounterAgreement(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ops, initial := genHistory(t)
		opts := Options{Model: ModelLockCounter, Initial: initial, Timeout: time.Minute}
		walk, err := Check(context.Background(), ops, opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Analyzer = AnalyzerPorcupine
		search, err := Check(context.Background(), ops, opts)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := walk.Check("linear")
		s, _ := search.Check("linear")
		if w.Valid != s.Valid {
			t.Fatalf("counter walk %v, porcupine %v\nwalk: %s\nporcupine: %s\nhistory:\n%s",
				w.Valid, s.Valid, w.Explanation, s.Explanation, edn(ops))
		}

		p, err := newPlan(ops, Options{Model: ModelLockCounter, Initial: initial})
		if err != nil {
			t.Fatal(err)
		}
		p.calls, p.problems = pairCalls(p.ops)
		p.stream.finish()
		if got, want := p.stream.firstProblems, p.problems[:min(len(p.problems), evidenceLimit)]; p.stream.problems != len(p.problems) || !slices.Equal(got, want) {
			t.Fatalf("the stream found %d problems %q, pairCalls %d %q", p.stream.problems, got, len(p.problems), want)
		}

		lc, _ := walk.Check("lock-counter")
		if got, want := string(Results{Checks: []Result{lc}}.AppendEDN(nil)),
			string(Results{Checks: []Result{LockCounter(ops, initial)}}.AppendEDN(nil)); got != want {
			t.Fatalf("lock-counter differs from LockCounter's:\n%s\nwant:\n%s", got, want)
		}

		st := NewStream()
		r := history.NewReader(bytes.NewReader(edn(ops)), "history.edn")
		for {
			o, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			st.Add(o)
		}
		streamed, err := st.Check(Options{Model: ModelLockCounter, Initial: initial})
		if got, want := string(streamed.AppendEDN(nil)), string(walk.AppendEDN(nil)); err != nil || got != want {
			t.Fatalf("streamed (%v):\n%s\nin memory:\n%s", err, got, want)
		}
	})
}

// edn writes ops as a history file.
func edn(ops []history.Op) []byte {
	var b []byte
	for _, o := range ops {
		b = history.AppendOp(b, o)
		b = append(b, '\n')
	}
	return b
}
