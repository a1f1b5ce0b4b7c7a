package checker

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/hiatus-dev/hiatus/history"
	"pgregory.net/rapid"
)

// porcupineOps are calls as porcupine takes them: each a client of its own,
// writes of unknown outcome returning at end.
func porcupineOps(calls []lcCall, end int64) []porcupine.Operation {
	ops := make([]porcupine.Operation, len(calls))
	for i, c := range calls {
		ret := c.ret
		if c.maybe || c.late {
			ret = end
		}
		ops[i] = porcupine.Operation{ClientId: i, Call: c.call, Return: ret,
			Input: lcOp{write: c.write, value: c.value, from: c.from, fence: c.fence, maybe: c.maybe}}
	}
	return ops
}

// porcupineCalls is porcupine's verdict on calls, the reference the counter
// walk must agree with.
func porcupineCalls(calls []lcCall, initial, end int64) bool {
	return porcupine.CheckOperations(lockCounterModel(initial), porcupineOps(calls, end))
}

// genCalls draws a few counter operations. Half the time they are random
// (small values, times and fences, so that they overlap, collide and leave
// gaps); otherwise they come from a linearizable run — writes at points in
// time, each after a read of the value before, reads of the value at
// theirs, fences rising, some of unknown outcome and some resolved after
// the fact (late) — spoilt now and then by a value off by one, an
// interval moved, a fence lowered, an acknowledged write turned :info or
// one that did not happen, so that verdicts are close calls both ways.
func genCalls(t *rapid.T, initial int64) ([]lcCall, int64) {
	var calls []lcCall
	add := func(c lcCall) {
		c.inv, c.done, c.process = 2*len(calls), 2*len(calls)+1, history.Process(len(calls))
		calls = append(calls, c)
	}
	fenced := rapid.Bool().Draw(t, "fenced")
	fence := func() int64 {
		if !fenced {
			return 0
		}
		return rapid.Int64Range(0, 4).Draw(t, "fence")
	}
	if rapid.Bool().Draw(t, "random") {
		for range rapid.IntRange(0, 10).Draw(t, "n") {
			c := lcCall{}
			switch rapid.IntRange(0, 3).Draw(t, "kind") {
			case 0, 1:
				c.write = true
			case 2:
				c.write, c.maybe = true, true
			}
			// An acknowledged write resolved after the fact: its return
			// is unknown.
			c.late = c.write && !c.maybe && rapid.IntRange(0, 3).Draw(t, "late") == 0
			c.value = initial + rapid.Int64Range(-1, 5).Draw(t, "value")
			if c.write {
				c.from, c.fence = c.value-1, fence()
				if rapid.IntRange(0, 7).Draw(t, "not an increment") == 0 {
					c.from = initial + rapid.Int64Range(-1, 5).Draw(t, "from")
				}
			}
			c.call = rapid.Int64Range(0, 20).Draw(t, "call")
			c.ret = c.call + rapid.Int64Range(0, 8).Draw(t, "length")
			add(c)
		}
	} else {
		incs := rapid.IntRange(0, 8).Draw(t, "increments")
		points := make([]int64, incs)
		for i := range points {
			points[i] = rapid.Int64Range(0, 40).Draw(t, "point")
		}
		slices.Sort(points)
		around := func(p int64) (int64, int64) {
			return p - rapid.Int64Range(0, 6).Draw(t, "before"), p + rapid.Int64Range(0, 6).Draw(t, "after")
		}
		for i, p := range points {
			v := initial + int64(i) + 1
			c := lcCall{write: true, value: v, from: v - 1}
			if fenced {
				c.fence = int64(i) + 1
			}
			c.call, c.ret = around(p)
			switch rapid.IntRange(0, 3).Draw(t, "outcome") {
			case 0:
				c.maybe = true
			case 1:
				// Resolved :ok after an :info: the :time it carries is
				// the :info's, which may be before it took effect.
				c.late = true
				c.ret = rapid.Int64Range(c.call, c.ret).Draw(t, "info time")
			}
			if rapid.Bool().Draw(t, "section read") {
				// The section's read, at a point after the write before.
				lo := int64(-10)
				if i > 0 {
					lo = points[i-1]
				}
				q := rapid.Int64Range(min(lo, c.call), c.call).Draw(t, "read point")
				rd := lcCall{value: v - 1}
				rd.call, rd.ret = q-rapid.Int64Range(0, 3).Draw(t, "before"), min(c.call, q+rapid.Int64Range(0, 3).Draw(t, "after"))
				add(rd)
			}
			add(c)
		}
		for range rapid.IntRange(0, 2).Draw(t, "no-ops") { // :info writes that did not happen
			v := initial + rapid.Int64Range(0, int64(incs)+1).Draw(t, "value")
			c := lcCall{write: true, maybe: true, value: v, from: v - 1, fence: fence()}
			c.call, c.ret = around(rapid.Int64Range(0, 40).Draw(t, "point"))
			add(c)
		}
		for range rapid.IntRange(0, 4).Draw(t, "reads") {
			q := rapid.Int64Range(0, 46).Draw(t, "point")
			n, _ := slices.BinarySearch(points, q+1)
			c := lcCall{value: initial + int64(n)}
			c.call, c.ret = around(q)
			add(c)
		}
		for range rapid.IntRange(0, 2).Draw(t, "spoils") {
			if len(calls) == 0 {
				break
			}
			c := &calls[rapid.IntRange(0, len(calls)-1).Draw(t, "spoilt")]
			switch rapid.IntRange(0, 5).Draw(t, "spoil") {
			case 0:
				d := rapid.SampledFrom([]int64{-1, 1}).Draw(t, "by")
				c.value += d
				if rapid.Bool().Draw(t, "from too") {
					c.from += d
				}
			case 1:
				d := rapid.Int64Range(-10, 10).Draw(t, "by")
				c.call, c.ret = c.call+d, c.ret+d
			case 2:
				c.maybe = c.write && !c.maybe
			case 3:
				c.ret = c.call
			case 4:
				if c.fence > 0 {
					c.fence = rapid.Int64Range(1, c.fence).Draw(t, "lower fence")
				}
			case 5: // resolved :ok after an :info: it returned when no one knows
				c.late = c.write && !c.maybe
			}
		}
	}
	end := int64(0)
	for _, c := range calls {
		end = max(end, c.ret+1, c.call+1)
	}
	return calls, end
}

// walkOf is the counter walk over calls, with its records in memory or, in
// sorted runs of two items, on disk; the files go when the test ends.
func walkOf(t interface {
	Fatalf(string, ...any)
	Cleanup(func())
}, calls []lcCall, initial, end int64, timed, disk bool) *counterWalk {
	cs := &callStore{runSize: 2}
	if disk && !cs.spill() {
		t.Fatalf("no temporary file for the calls")
	}
	for _, c := range calls {
		cs.add(c)
	}
	w, err := newCounterWalk(cs, initial, end, timed)
	if err != nil {
		t.Fatalf("counter walk: %v", err)
	}
	t.Cleanup(func() { w.close(); cs.close() })
	return w
}

// TestCounterWalkAgreesWithPorcupine is the proof by agreement at the level
// of the model: on every drawn set of writes (acknowledged or not, fenced
// or not) and reads, the walk and porcupine's search give the same verdict,
// and so does the brute-force reference (bruteforce_test.go) where the set
// is small enough to enumerate.
func TestCounterWalkAgreesWithPorcupine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		initial := rapid.Int64Range(-2, 2).Draw(t, "initial")
		calls, end := genCalls(t, initial)
		v, ok, _ := walkOf(t, calls, initial, end, true, false).run(false)
		if want := porcupineCalls(calls, initial, end); ok != want {
			t.Fatalf("counter walk %v (%+v), porcupine %v on\n%s", ok, v, want, describeCalls(calls))
		}
		// The same walk with its records on disk, in runs of two items.
		if dv, dok, _ := walkOf(t, calls, initial, end, true, true).run(false); dok != ok || dv != v {
			t.Fatalf("counter walk in memory %v (%+v), on disk %v (%+v) on\n%s", ok, v, dok, dv, describeCalls(calls))
		}
		if len(calls) > 12 {
			return
		}
		ref := make([]refOp, len(calls))
		for i, c := range calls {
			ref[i] = refOp{read: !c.write, value: c.value, from: c.from, fence: c.fence, call: c.call, ret: c.ret, maybe: c.maybe}
			if c.maybe || c.late {
				ref[i].ret = math.MaxInt64
			}
		}
		if want := refValid(ref, initial); ok != want {
			t.Fatalf("counter walk %v (%+v), the brute-force reference %v on\n%s", ok, v, want, describeCalls(calls))
		}
	})
}

func describeCalls(calls []lcCall) string {
	var b strings.Builder
	for i, c := range calls {
		switch {
		case !c.write:
			fmt.Fprintf(&b, "  %d: read %d [%d, %d]\n", i, c.value, c.call, c.ret)
		default:
			q := ""
			if c.maybe {
				q = "?"
			}
			if c.late {
				q = " (late)"
			}
			fmt.Fprintf(&b, "  %d: write%s %d→%d fence %d [%d, %d]\n", i, q, c.from, c.value, c.fence, c.call, c.ret)
		}
	}
	return b.String()
}
