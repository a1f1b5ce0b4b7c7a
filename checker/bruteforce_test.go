package checker

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"pgregory.net/rapid"
)

// This file holds the independent reference for the lock-counter model of
// docs/checkers.md: a brute-force search written from its five rules, and
// nothing else — not from the counter walk, not from porcupine's model. It
// works on a small simulated run (a modelRun), whose history the analyzers
// read as EDN ops the way they read a real one.

// A modelRun is a small run of workers whose critical sections overlap
// freely (the lock is not simulated), on a register whose every read and
// write takes effect at a point inside its interval, as Postgres does with
// an unconditional or fence-guarded UPDATE.
type modelRun struct {
	initial  int64
	fenced   bool
	sections []*modelSection
	reads    []modelOp // reads outside sections, by processes of their own
	final    *modelOp  // the final read, if the run has one
	spoilt   bool      // a value or time was changed after the simulation: truth is unknown
	lost     int64     // the simulation's own lost updates at the final read (writes that took effect before it, less the rise)
}

// A modelOp is one op: invocation, completion (never when typ is Invoke),
// the point where it took effect, and what it read or wrote.
type modelOp struct {
	inv, done, point int64
	typ              history.Type // Ok, Fail, Info, or Invoke for one that never completed
	value            int64
}

type modelSection struct {
	proc     history.Process // the process of the acquire and the read
	acq      [2]int64        // acquire invoked, granted
	fence    int64
	read     modelOp
	write    *modelOp // nil when the section did not write
	applied  bool     // the write took effect in the simulation
	release  *[2]int64
	relProc  history.Process
	writeVal int64 // what the section wrote: its read plus one, unless spoilt
}

// drawModelRun simulates a run: 1 to 3 workers, each with up to 2 sections
// one after another; small integer times, so that ops often share an
// instant; fences from one counter in the order of the grants; reads and
// writes that fail, time out (:info) or never complete; reads outside
// sections; and now and then a value or time spoilt after the simulation.
func drawModelRun(t *rapid.T) *modelRun {
	r := &modelRun{initial: rapid.Int64Range(0, 2).Draw(t, "initial"), fenced: rapid.Bool().Draw(t, "fenced")}
	workers := rapid.IntRange(1, 3).Draw(t, "workers")
	// Tenths of the writes that complete :info: in some runs most do, so
	// that several may fill one gap and their fences decide which can.
	infos := rapid.IntRange(1, 7).Draw(t, "info rate")
	maxT := int64(0)
	for w := range workers {
		proc := history.Process(w)
		now := rapid.Int64Range(0, 6).Draw(t, "start")
		at := func(label string, hi int64) int64 {
			now += rapid.Int64Range(0, hi).Draw(t, label)
			maxT = max(maxT, now)
			return now
		}
		op := func() modelOp {
			inv := at("to invoke", 2)
			pt := at("to point", 3)
			return modelOp{inv: inv, point: pt, done: at("to complete", 3)}
		}
		for range rapid.IntRange(0, 2).Draw(t, "sections") {
			s := &modelSection{proc: proc}
			s.acq[0] = at("acquire", 2)
			s.acq[1] = at("granted", 2)
			s.read = op()
			s.read.typ = rapid.SampledFrom([]history.Type{history.Ok, history.Ok, history.Ok, history.Ok, history.Ok, history.Fail, history.Info}).Draw(t, "read")
			if s.read.typ == history.Info {
				proc += history.Process(workers) // an :info retires the process; the section writes nothing
			}
			stop := false
			if s.read.typ != history.Info && (s.read.typ == history.Ok || rapid.IntRange(0, 3).Draw(t, "write without a read") == 0) {
				wr := op()
				s.write = &wr
				// The outcome is settled once the simulation knows whether
				// the write took effect; here only whether it completes.
				switch n := rapid.IntRange(0, 9).Draw(t, "write completes"); {
				case n == 0:
					wr.typ, stop = history.Invoke, true // never completes: the worker is gone
				case n <= infos:
					wr.typ = history.Info
				default:
					wr.typ = history.Ok
				}
				if wr.typ == history.Info {
					proc += history.Process(workers)
				}
			}
			r.sections = append(r.sections, s)
			if stop {
				break
			}
			rel := [2]int64{at("release", 2), at("released", 2)}
			s.release, s.relProc = &rel, proc
		}
	}
	for range rapid.IntRange(0, 2).Draw(t, "free reads") {
		inv := rapid.Int64Range(0, maxT+2).Draw(t, "free read")
		pt := inv + rapid.Int64Range(0, 3).Draw(t, "to point")
		r.reads = append(r.reads, modelOp{inv: inv, point: pt, done: pt + rapid.Int64Range(0, 3).Draw(t, "to complete"), typ: history.Ok})
		maxT = max(maxT, r.reads[len(r.reads)-1].done)
	}
	// Fences come from one counter, in the order the grants completed; or,
	// as a lock that hands them out badly would, at random, so that
	// writes of one value carry fences in every order.
	bySlot := slices.Clone(r.sections)
	slices.SortStableFunc(bySlot, func(a, b *modelSection) int { return cmp.Compare(a.acq[1], b.acq[1]) })
	random := r.fenced && rapid.IntRange(0, 3).Draw(t, "random fences") == 0
	for i, s := range bySlot {
		switch {
		case random:
			s.fence = rapid.Int64Range(1, 6).Draw(t, "fence")
		case r.fenced:
			s.fence = int64(i) + 1
		}
	}
	// The final read comes after every other op, as a run's does; or, in a
	// history from elsewhere, anywhere.
	switch rapid.IntRange(0, 7).Draw(t, "final") {
	case 0:
	case 1, 2:
		inv := rapid.Int64Range(0, maxT).Draw(t, "final at")
		pt := inv + rapid.Int64Range(0, 2).Draw(t, "to point")
		r.final = &modelOp{inv: inv, point: pt, done: pt + rapid.Int64Range(0, 2).Draw(t, "to complete"), typ: history.Ok}
	default:
		r.final = &modelOp{inv: maxT + 1, point: maxT + 1, done: maxT + 2, typ: history.Ok}
	}
	r.simulate(t)
	r.spoil(t)
	return r
}

// simulate runs the register through every read and write in the order of
// their points and fills in the values and the writes' outcomes.
func (r *modelRun) simulate(t *rapid.T) {
	type effect struct {
		point int64
		read  *modelOp
		sec   *modelSection
	}
	var effects []effect
	for _, s := range r.sections {
		effects = append(effects, effect{point: s.read.point, read: &s.read})
		if s.write != nil {
			effects = append(effects, effect{point: s.write.point, sec: s})
		}
	}
	for i := range r.reads {
		effects = append(effects, effect{point: r.reads[i].point, read: &r.reads[i]})
	}
	if r.final != nil {
		effects = append(effects, effect{point: r.final.point, read: r.final})
	}
	slices.SortStableFunc(effects, func(a, b effect) int { return cmp.Compare(a.point, b.point) })
	reg, fence := r.initial, int64(0)
	applied := int64(0)
	for _, e := range effects {
		if e.read != nil {
			e.read.value = reg
			if e.read == r.final {
				r.lost = max(0, applied-(reg-r.initial))
			}
			continue
		}
		s := e.sec
		s.writeVal = s.read.value + 1
		if s.read.typ != history.Ok {
			s.writeVal = r.initial + rapid.Int64Range(0, 3).Draw(t, "blind value")
		}
		s.write.value = s.writeVal
		accepted := !r.fenced || s.fence > fence
		if accepted {
			// A write of unknown outcome may or may not have taken effect.
			s.applied = s.write.typ != history.Info || rapid.Bool().Draw(t, "info took effect")
			if s.write.typ == history.Invoke {
				s.applied = rapid.Bool().Draw(t, "unfinished took effect")
			}
		}
		if s.applied {
			reg, applied = s.writeVal, applied+1
			if r.fenced {
				fence = s.fence
			}
		} else if s.write.typ == history.Ok {
			s.write.typ = history.Fail // Postgres rejected the stale fence
		}
	}
}

// spoil changes a value or a time now and then, so that histories break the
// model in ways a simulation never does.
func (r *modelRun) spoil(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "spoil?") > 0 || len(r.sections) == 0 {
		return
	}
	s := r.sections[rapid.IntRange(0, len(r.sections)-1).Draw(t, "spoilt section")]
	switch rapid.IntRange(0, 3).Draw(t, "spoil") {
	case 0:
		s.read.value += rapid.SampledFrom([]int64{-1, 1}).Draw(t, "by")
	case 1:
		if s.write != nil {
			s.write.value += rapid.SampledFrom([]int64{-1, 1, 5}).Draw(t, "by")
		}
	case 2:
		if s.write != nil && s.write.typ != history.Invoke {
			s.write.done = max(s.write.inv, s.write.done-rapid.Int64Range(1, 3).Draw(t, "earlier"))
		}
	case 3:
		if s.fence > 1 {
			s.fence = rapid.Int64Range(1, s.fence-1).Draw(t, "lower fence")
		}
	}
	r.spoilt = true
}

// ops renders the run as a history, sorted by :time and indexed.
func (r *modelRun) ops() []history.Op {
	var ops []history.Op
	add := func(o history.Op) { ops = append(ops, o) }
	for _, s := range r.sections {
		acq := map[history.Keyword]any{history.KeyLeaseMS: int64(5), history.KeyToken: "t"}
		var wx map[history.Keyword]any
		if r.fenced {
			acq[history.KeyFence] = s.fence
			wx = map[history.Keyword]any{history.KeyFence: s.fence}
		}
		add(history.Op{Time: s.acq[0], Type: history.Invoke, Process: s.proc, F: history.FAcquire})
		add(history.Op{Time: s.acq[1], Type: history.Ok, Process: s.proc, F: history.FAcquire, Extra: acq})
		add(history.Op{Time: s.read.inv, Type: history.Invoke, Process: s.proc, F: history.FRead})
		rd := history.Op{Time: s.read.done, Type: s.read.typ, Process: s.proc, F: history.FRead}
		if s.read.typ == history.Ok {
			rd.Value = s.read.value
		}
		add(rd)
		if w := s.write; w != nil {
			add(history.Op{Time: w.inv, Type: history.Invoke, Process: s.proc, F: history.FWrite, Value: w.value, Extra: wx})
			if w.typ != history.Invoke {
				c := history.Op{Time: w.done, Type: w.typ, Process: s.proc, F: history.FWrite, Value: w.value, Extra: wx}
				if w.typ == history.Fail {
					c.Error = history.ErrStaleFence
				}
				add(c)
			}
		}
		if s.release != nil {
			add(history.Op{Time: s.release[0], Type: history.Invoke, Process: s.relProc, F: history.FRelease})
			add(history.Op{Time: s.release[1], Type: history.Ok, Process: s.relProc, F: history.FRelease})
		}
	}
	for i, rd := range r.reads {
		p := history.Process(50 + i)
		add(history.Op{Time: rd.inv, Type: history.Invoke, Process: p, F: history.FRead})
		add(history.Op{Time: rd.done, Type: history.Ok, Process: p, F: history.FRead, Value: rd.value})
	}
	if f := r.final; f != nil {
		x := map[history.Keyword]any{history.KeyFinal: true}
		add(history.Op{Time: f.inv, Type: history.Invoke, Process: 1000, F: history.FRead, Extra: x})
		add(history.Op{Time: f.done, Type: history.Ok, Process: 1000, F: history.FRead, Value: f.value, Extra: x})
	}
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

// A refOp is an op as the model's rules see it.
type refOp struct {
	read      bool
	final     bool
	value     int64 // read or written
	from      int64 // a write: what its section read (rule 2)
	fence     int64 // a write's fence, 0 if unfenced (rule 4)
	call, ret int64 // ret is math.MaxInt64 for a write of unknown outcome (rule 3)
	maybe     bool  // may or may not have taken effect (rule 3)
}

// refOps are the ops the rules speak of: every :ok read (rule 1), every
// write that did not fail (rules 2, 3), with its section's read, or its
// value minus one when it read nothing.
func (r *modelRun) refOps() []refOp {
	var out []refOp
	for _, s := range r.sections {
		if s.read.typ == history.Ok {
			out = append(out, refOp{read: true, value: s.read.value, call: s.read.inv, ret: s.read.done})
		}
		w := s.write
		if w == nil || w.typ == history.Fail {
			continue
		}
		o := refOp{value: w.value, from: w.value - 1, fence: s.fence, call: w.inv, ret: w.done}
		if s.read.typ == history.Ok {
			o.from = s.read.value
		}
		if w.typ != history.Ok {
			o.maybe, o.ret = true, math.MaxInt64
		}
		out = append(out, o)
	}
	for _, rd := range r.reads {
		out = append(out, refOp{read: true, value: rd.value, call: rd.inv, ret: rd.done})
	}
	if f := r.final; f != nil {
		out = append(out, refOp{read: true, final: true, value: f.value, call: f.inv, ret: f.done})
	}
	return out
}

// refSearch tries every order of the ops, all of which take effect, that
// respects real time (rule 5: one op precedes another only when it
// completed strictly before the other was invoked), skipping states it has
// seen, and reports whether one makes every op legal on the register. With
// cas, a write is the model's compare-and-set (rule 2); without, it lands
// unconditionally, as a write that loses updates does. Fences (rule 4) hold
// either way. atFinal, if not nil, is told the number of writes before the
// final read in each such order.
func refSearch(ops []refOp, initial int64, cas bool, atFinal func(writes int)) bool {
	type state struct {
		placed      uint32
		reg, fenced int64
	}
	done := map[state]bool{} // whether every op can still be placed from a state
	all := uint32(1)<<len(ops) - 1
	var search func(s state) bool
	search = func(s state) bool {
		if s.placed == all {
			return true
		}
		if ok, seen := done[s]; seen {
			return ok
		}
		ok := false
		for i, o := range ops {
			if s.placed&(1<<i) != 0 || !refMayGoNext(ops, s.placed, i) {
				continue
			}
			next := s
			next.placed |= 1 << i
			switch {
			case o.read:
				if o.value != s.reg {
					continue
				}
			default:
				if o.fence > 0 && o.fence <= s.fenced {
					continue
				}
				if cas && (s.reg != o.from || o.value != o.from+1) {
					continue
				}
				next.reg = o.value
				if o.fence > 0 {
					next.fenced = o.fence
				}
			}
			if !search(next) {
				continue
			}
			ok = true
			if atFinal == nil {
				break
			}
			if o.final {
				writes := 0
				for j, w := range ops {
					if !w.read && s.placed&(1<<j) != 0 {
						writes++
					}
				}
				atFinal(writes)
			}
		}
		done[s] = ok
		return ok
	}
	return search(state{reg: initial})
}

// refMayGoNext reports whether op i may come next after the placed ones: no
// op still to place completed before it was invoked.
func refMayGoNext(ops []refOp, placed uint32, i int) bool {
	for j, o := range ops {
		if j != i && placed&(1<<j) == 0 && o.ret < ops[i].call {
			return false
		}
	}
	return true
}

// refChoices calls f with every choice of which writes of unknown outcome
// took effect: the ops that did.
func refChoices(ops []refOp, f func(took []refOp)) {
	var maybe []int
	for i, o := range ops {
		if o.maybe {
			maybe = append(maybe, i)
		}
	}
	for mask := 0; mask < 1<<len(maybe); mask++ {
		took := make([]refOp, 0, len(ops))
		k := 0
		for i, o := range ops {
			if k < len(maybe) && maybe[k] == i {
				k++
				if mask&(1<<(k-1)) == 0 {
					continue
				}
			}
			took = append(took, o)
		}
		f(took)
	}
}

// refValid is the model's verdict: some choice of the uncertain writes and
// some order make every op legal.
func refValid(ops []refOp, initial int64) bool {
	valid := false
	refChoices(ops, func(took []refOp) {
		valid = valid || refSearch(took, initial, true, nil)
	})
	return valid
}

// refLost is the least and the most lost updates at the final read — the
// writes that took effect before it, less the counter's rise — over every
// execution the history allows with writes that land unconditionally; ok is
// false when there is none.
func refLost(ops []refOp, initial, final int64) (lo, hi int64, ok bool) {
	lo, hi = math.MaxInt64, math.MinInt64
	refChoices(ops, func(took []refOp) {
		refSearch(took, initial, false, func(writes int) {
			lost := max(0, int64(writes)-(final-initial))
			lo, hi, ok = min(lo, lost), max(hi, lost), true
		})
	})
	return lo, hi, ok
}

// TestModelReference checks both analyzers and the lost-update bounds
// against the brute-force reference, on simulated runs:
//
//   - the counter walk's :linear verdict, and porcupine's, are the
//     reference's;
//   - the reported bounds contain the least and most lost updates of every
//     execution the history allows, are exact when every write is settled
//     and none overlaps the final read, and prove none lost when the
//     history is valid;
//   - the simulation's own lost updates lie within them.
//
// A long campaign: go test ./checker -run TestModelReference -rapid.checks=1000000
func TestModelReference(t *testing.T) {
	var seen refStats
	defer func() { t.Log(seen) }()
	rapid.Check(t, func(t *rapid.T) {
		r := drawModelRun(t)
		ops := r.ops()
		ref := r.refOps()
		want := refValid(ref, r.initial)
		seen.add(r, ref, want)
		var lc Result
		for _, analyzer := range []string{AnalyzerCounterWalk, AnalyzerPorcupine} {
			rs, err := Check(context.Background(), ops, Options{Model: ModelLockCounter, Initial: r.initial, Analyzer: analyzer, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			lin, _ := rs.Check("linear")
			if got := lin.Valid; got == Unknown || (got == Valid) != want {
				t.Fatalf("%s: :linear %v, the reference says valid? %v\n%s\n%s\nreference ops:\n%s",
					analyzer, got, want, lin.Explanation, edn(ops), describeRef(ref))
			}
			lc, _ = rs.Check("lock-counter")
		}
		if r.final == nil {
			return
		}
		lo, _ := history.Int(lc.Get("lost-min"))
		hi, _ := history.Int(lc.Get("lost-max"))
		// Every write is settled, and each either completed before the
		// final read began or began after it completed: lost is exact.
		settled := true
		for _, o := range ref {
			settled = settled && (o.read || !o.maybe && (o.ret < r.final.inv || o.call > r.final.done))
		}
		switch {
		case lo > hi:
			t.Fatalf("lost %d–%d", lo, hi)
		case settled && lo != hi:
			t.Fatalf("every write is settled, yet lost %d–%d\n%s", lo, hi, edn(ops))
		case want && lo > 0:
			t.Fatalf("the history is valid, yet at least %d lost (%s)\n%s", lo, lc.Explanation, edn(ops))
		case !r.spoilt && (r.lost < lo || r.lost > hi):
			t.Fatalf("the simulation lost %d, reported %d–%d (%s)\n%s", r.lost, lo, hi, lc.Explanation, edn(ops))
		}
		refLo, refHi, ok := refLost(ref, r.initial, r.final.value)
		if ok && (lo > refLo || hi < refHi) {
			t.Fatalf("executions lose %d–%d, reported %d–%d (%s)\n%s\nreference ops:\n%s",
				refLo, refHi, lo, hi, lc.Explanation, edn(ops), describeRef(ref))
		}
		if ok && lo != hi {
			seen.open++
			if lo == refLo {
				seen.loExact++
			}
			if hi == refHi {
				seen.hiExact++
			}
		}
	})
}

// refStats count what TestModelReference drew, so that a long run says
// what it covered and how tight the bounds were.
type refStats struct {
	runs, invalid, maybe, fenced, lost int
	open, loExact, hiExact             int // histories whose reported bounds differ, and where each is the brute force's
}

func (s *refStats) add(r *modelRun, ref []refOp, valid bool) {
	s.runs++
	if !valid {
		s.invalid++
	}
	if slices.ContainsFunc(ref, func(o refOp) bool { return o.maybe }) {
		s.maybe++
	}
	if r.fenced {
		s.fenced++
	}
	if r.lost > 0 && !r.spoilt && r.final != nil {
		s.lost++
	}
}

func (s refStats) String() string {
	return fmt.Sprintf("%d histories: %d not valid, %d with a write of unknown outcome, %d fenced, %d losing an update in the simulation; "+
		"of %d whose reported bounds differ, lost-min is the brute force's least in %d, lost-max its most in %d",
		s.runs, s.invalid, s.maybe, s.fenced, s.lost, s.open, s.loExact, s.hiExact)
}

func describeRef(ops []refOp) string {
	var b strings.Builder
	for i, o := range ops {
		ret := fmt.Sprint(o.ret)
		if o.ret == math.MaxInt64 {
			ret = "∞"
		}
		switch {
		case o.read:
			fmt.Fprintf(&b, "  %d: read %d [%d, %s]\n", i, o.value, o.call, ret)
		default:
			q := ""
			if o.maybe {
				q = "?"
			}
			fmt.Fprintf(&b, "  %d: write%s %d→%d fence %d [%d, %s]\n", i, q, o.from, o.value, o.fence, o.call, ret)
		}
	}
	return b.String()
}
