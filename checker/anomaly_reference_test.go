package checker

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
	"pgregory.net/rapid"
)

// genLockHistory draws a small history of lock calls as workers and the
// nemesis record them: acquires that are granted (with a lease or none,
// a fence or none), fail, end :info or never end; sections cut short by
// an :info (a kill, or a timeout: the worker goes on as another process);
// releases of every outcome; and faults of one process or of none
// (pauses, kills, cut links, servers paused), ended or not, some that
// failed to begin. Times are small integers, so that ops often share one.
func genLockHistory(t *rapid.T) []history.Op {
	workers := rapid.IntRange(1, 3).Draw(t, "workers")
	var ops []history.Op
	maxT := int64(0)
	for w := range workers {
		p := history.Process(w)
		now := rapid.Int64Range(0, 6).Draw(t, "start")
		step := func() int64 {
			now += rapid.Int64Range(0, 3).Draw(t, "step")
			maxT = max(maxT, now)
			return now
		}
		call := func(f history.Keyword, typ history.Type, extra map[history.Keyword]any, errv any) {
			ops = append(ops, history.Op{Time: step(), Type: history.Invoke, Process: p, F: f})
			if typ != history.Invoke {
				ops = append(ops, history.Op{Time: step(), Type: typ, Process: p, F: f, Extra: extra, Error: errv})
			}
		}
		for range rapid.IntRange(0, 3).Draw(t, "sections") {
			typ := rapid.SampledFrom([]history.Type{history.Ok, history.Ok, history.Ok, history.Fail, history.Info, history.Invoke}).Draw(t, "acquire")
			extra := map[history.Keyword]any{}
			if l := rapid.SampledFrom([]int64{0, 2, 4, 6}).Draw(t, "lease"); l > 0 {
				extra[history.KeyLeaseMS] = l
			}
			if f := rapid.Int64Range(-1, 5).Draw(t, "fence"); f >= 0 {
				extra[history.KeyFence] = f
			}
			call(history.FAcquire, typ, extra, nil)
			if typ == history.Invoke {
				break // never answered: the worker waits to the end
			}
			if typ == history.Info {
				p += history.Process(workers)
			}
			if typ != history.Ok {
				continue
			}
			if rd := rapid.SampledFrom([]history.Type{history.Ok, history.Ok, history.Info}).Draw(t, "read"); rd == history.Info {
				var errv any = "timeout"
				if rapid.Bool().Draw(t, "killed") {
					errv = history.ErrKilled
				}
				call(history.FRead, rd, nil, errv)
				p += history.Process(workers)
			} else {
				call(history.FRead, rd, nil, nil)
			}
			rel := rapid.SampledFrom([]history.Type{history.Ok, history.Ok, history.Fail, history.Info}).Draw(t, "release")
			call(history.FRelease, rel, nil, nil)
			if rel == history.Info {
				p += history.Process(workers)
			}
		}
	}
	ops = append(ops, genFaults(t, workers, maxT)...)
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

// genFaults draws the nemesis's faults of a history of workers that ends
// about maxT.
func genFaults(t *rapid.T, workers int, maxT int64) []history.Op {
	var ops []history.Op
	for range rapid.IntRange(0, 3).Draw(t, "faults") {
		kind := rapid.SampledFrom([]struct {
			kind        history.Keyword
			begin, end  history.Keyword
			ofProcesses bool
		}{
			{"sigstop", history.FPause, history.FResume, true},
			{"kill-worker", history.FKill, history.FRestart, true},
			{"partition-redis", history.FStart, history.FStop, true},
			{"pause-redis", history.FPause, history.FResume, false},
			{"kill-redis", history.FKill, history.FRestart, false},
		}).Draw(t, "kind")
		v := map[history.Keyword]any{"kind": kind.kind}
		if kind.ofProcesses {
			v["process"] = rapid.Int64Range(0, int64(2*workers-1)).Draw(t, "process")
		}
		at := rapid.Int64Range(0, maxT+2).Draw(t, "at")
		begin := history.Op{Time: at, Type: history.Info, Process: history.Nemesis, F: kind.begin, Value: v}
		if rapid.IntRange(0, 5).Draw(t, "failed") == 0 {
			failed := map[history.Keyword]any{"error": "no such process"}
			for k, x := range v {
				failed[k] = x
			}
			begin.Value = failed
			ops = append(ops, begin)
			continue
		}
		ops = append(ops, begin)
		if rapid.IntRange(0, 3).Draw(t, "ends") > 0 {
			ops = append(ops, history.Op{Time: at + rapid.Int64Range(0, 6).Draw(t, "lasts"), Type: history.Info, Process: history.Nemesis, F: kind.end, Value: v})
		}
	}
	return ops
}

// refGaps finds the gaps of ops as the definitions of docs/checkers.md
// read them, point by point, with nothing kept from one point to the
// next: a gap holds between a time and the next when, after every op of
// the first, no process holds the lock or may (maybe), some process waits
// that no fault of its own holds, and no fault of no process is in force.
// Ops that share a time are one instant: what holds between them holds
// for no time. It returns the
// orphans: their count, the longest, and the start of the first.
func refGaps(ops []history.Op) (n int, longest, first int64) {
	first = -1
	var times []int64
	for _, o := range ops {
		if len(times) == 0 || o.Time != times[len(times)-1] {
			times = append(times, o.Time)
		}
	}
	cut := func(i int) int { // ops at or before times[i]
		return opsUpTo(ops, times[i])
	}
	open := -1 // the index of the time the current gap began at
	for i := range times {
		in := i+1 < len(times) && refGap(ops, cut(i))
		switch {
		case in && open < 0:
			open = i
		case !in && open >= 0:
			start, end := times[open], times[i]
			if th := refThreshold(ops, cut(open), cut(i)); th > 0 && end-start > th {
				n++
				longest = max(longest, end-start)
				if first < 0 {
					first = start
				}
			}
			open = -1
		}
	}
	return n, longest, first
}

// sort0 is the number of ops at or before time t (ops are sorted by it).
func opsUpTo(ops []history.Op, t int64) int {
	n := 0
	for n < len(ops) && ops[n].Time <= t {
		n++
	}
	return n
}

// refHolding reports whether process p holds the lock after the first n
// ops: its last :ok acquire among them is followed by no completed
// release, no :info of another of its ops, and no other :ok acquire.
func refHolding(ops []history.Op, n int, p history.Process) bool {
	holding := false
	for _, o := range ops[:n] {
		if o.Process != p || o.Type == history.Invoke {
			continue
		}
		switch {
		case o.F == history.FAcquire && o.Type == history.Ok:
			holding = true
		case o.F == history.FRelease, o.Type == history.Info:
			holding = false
		}
	}
	return holding
}

// refGap says whether the lock is in a gap after the first n ops.
func refGap(ops []history.Op, n int) bool {
	procs := map[history.Process]bool{}
	for _, o := range ops[:n] {
		if o.IsClient() {
			procs[o.Process] = true
		}
	}
	waiting := false
	for p := range procs {
		if refHolding(ops, n, p) {
			return false
		}
		if refWaiting(ops, n, p) && !refFrozen(ops, n, int64(p)) {
			waiting = true
		}
	}
	return waiting && !refMaybe(ops, n) && !refFrozen(ops, n, -1)
}

// refMaybe: after the first n ops, an acquire or a release of unknown
// outcome, or an :info (not a kill) that cut a holder's section short,
// came after the last grant.
func refMaybe(ops []history.Op, n int) bool {
	maybe := false
	for i, o := range ops[:n] {
		switch {
		case o.F == history.FAcquire && o.Type == history.Ok:
			maybe = false
		case o.IsClient() && o.Type == history.Info && (o.F == history.FAcquire || o.F == history.FRelease):
			maybe = true
		case o.IsClient() && o.Type == history.Info && o.Error != history.ErrKilled && refHolding(ops, i, o.Process):
			maybe = true
		}
	}
	return maybe
}

// refWaiting: p's last acquire among the first n ops is not completed.
func refWaiting(ops []history.Op, n int, p history.Process) bool {
	waiting := false
	for _, o := range ops[:n] {
		if o.Process == p && o.F == history.FAcquire {
			waiting = o.Type == history.Invoke
		}
	}
	return waiting
}

// refFrozen: after the first n ops, a fault of process p (-1: of none) is
// in force: begun, not failed, and not ended by a later event of its
// kind and target.
func refFrozen(ops []history.Op, n int, p int64) bool {
	for i, o := range ops[:n] {
		v, _ := o.Value.(map[history.Keyword]any)
		if o.IsClient() || v == nil || v["error"] != nil || o.F != history.FPause && o.F != history.FKill && o.F != history.FStart {
			continue
		}
		q, ok := history.Int(v["process"])
		if !ok {
			q = -1
		}
		if q != p {
			continue
		}
		ended := false
		for _, e := range ops[i+1 : n] {
			ev, _ := e.Value.(map[history.Keyword]any)
			if !e.IsClient() && ev != nil && ev["error"] == nil && ev["kind"] == v["kind"] && ev["process"] == v["process"] {
				ended = true // an end, or a begin of its kind on its target, which ends it first (one that failed hit nothing)
				break
			}
		}
		if !ended {
			return true
		}
	}
	return false
}

// refThreshold is how long the gap from the first `from` ops to the first
// `to` must last to be an orphan: the lease of the last leased grant
// among the first `to` ops (or, before any grant, of the first leased
// grant after), twice it when the last section to end before the gap was
// cut short by an :info; 0 when no lease is known.
func refThreshold(ops []history.Op, from, to int) int64 {
	var lease int64
	granted := false
	for _, o := range ops[:to] {
		if o.F == history.FAcquire && o.Type == history.Ok {
			granted = true
			if ms, ok := history.Int(o.Get(history.KeyLeaseMS)); ok && ms > 0 {
				lease = ms * 1e6
			}
		}
	}
	if !granted {
		for _, o := range ops[to:] {
			if ms, ok := history.Int(o.Get(history.KeyLeaseMS)); ok && ms > 0 && o.F == history.FAcquire && o.Type == history.Ok {
				lease = ms * 1e6
				break
			}
		}
	}
	// The last op before the gap that ended a section its process held.
	for i := from - 1; i >= 0; i-- {
		o := ops[i]
		if o.IsClient() && o.Type != history.Invoke && (o.F == history.FRelease || o.Type == history.Info) && refHolding(ops, i, o.Process) {
			if o.Type == history.Info {
				return 2 * lease
			}
			break
		}
	}
	return lease
}

// refInversions counts the :ok acquires with a fence (above 0) no larger
// than that of an :ok acquire completed before their invocation, by every
// pair; first is the first such acquire's :index, -1 if none.
func refInversions(ops []history.Op) (n int, first int64) {
	first = -1
	for i, a := range ops {
		f, ok := history.Int(a.Get(history.KeyFence))
		if a.F != history.FAcquire || a.Type != history.Ok || !ok || f <= 0 {
			continue
		}
		inv := -1
		for j := i - 1; j >= 0; j-- {
			if ops[j].Process == a.Process && ops[j].F == history.FAcquire && ops[j].Type == history.Invoke {
				inv = j
				break
			}
		}
		if inv < 0 {
			continue
		}
		for _, b := range ops[:inv] {
			g, ok := history.Int(b.Get(history.KeyFence))
			if b.F == history.FAcquire && b.Type == history.Ok && ok && g > 0 && b.Time < ops[inv].Time && f <= g {
				n++
				if first < 0 {
					first = a.Index
				}
				break
			}
		}
	}
	return n, first
}

// TestAnomaliesAgreeWithReference: on every drawn history of lock calls
// and faults, the sweep's orphans (by the history alone) and fence
// inversions are the reference's, found point by point and pair by pair.
func TestAnomaliesAgreeWithReference(t *testing.T) {
	var drawn, orphaned, inverted int
	defer func() {
		t.Logf("%d histories: %d with orphans, %d with fence inversions", drawn, orphaned, inverted)
		if drawn >= 1000 && (orphaned == 0 || inverted == 0) {
			t.Errorf("the histories drawn never had an orphan or never an inversion: the agreement says nothing of them")
		}
	}()
	rapid.Check(t, func(t *rapid.T) {
		ops := genLockHistory(t)
		for i := range ops {
			ops[i].Time *= 1e6 // milliseconds: leases are :lease-ms
		}
		rs, err := Check(context.Background(), ops, Options{Model: ModelLockCounter})
		if err != nil {
			t.Fatal(err)
		}
		av, _ := rs.Check("availability")
		n, longest, _ := refGaps(ops)
		if got, _ := history.Int(av.Get("orphans")); got != int64(n) {
			t.Fatalf("orphans %d, the reference %d (longest %d ms)\n%s\nhistory:\n%s", got, n, longest/1e6, av.Explanation, edn(ops))
		}
		if got, _ := history.Int(av.Get("orphan-max-ms")); got != longest/1e6 {
			t.Fatalf("orphan-max-ms %d, the reference %d\nhistory:\n%s", got, longest/1e6, edn(ops))
		}
		if want := n > 0; (av.Valid == Invalid) != want {
			t.Fatalf("availability %v with %d orphans", av.Valid, n)
		}
		fo, _ := rs.Check("fence-order")
		m, first := refInversions(ops)
		drawn++
		if n > 0 {
			orphaned++
		}
		if m > 0 {
			inverted++
		}
		if got, _ := history.Int(fo.Get("fence-inversions")); got != int64(m) {
			t.Fatalf("fence-inversions %d, the reference %d (first op %d)\nhistory:\n%s", got, m, first, edn(ops))
		}
		if ex, _ := fo.Get("fence-inversion-examples").([]any); m > 0 && ex[0].([]any)[1] != first {
			t.Fatalf("the first inversion is %v, the reference's op %d\nhistory:\n%s", ex[0], first, edn(ops))
		}
	})
}
