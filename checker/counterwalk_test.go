package checker

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/hiatus-dev/hiatus/history"
	"pgregory.net/rapid"
)

// porcupineCalls is porcupine's verdict on calls, the reference the counter
// walk must agree with.
func porcupineCalls(calls []lcCall, initial, end int64) bool {
	ops := make([]porcupine.Operation, len(calls))
	for i, c := range calls {
		ret := c.ret
		if c.maybe {
			ret = end
		}
		ops[i] = porcupine.Operation{ClientId: i, Call: c.call, Return: ret,
			Input: lcOp{increment: c.increment, value: c.value, maybe: c.maybe}}
	}
	return porcupine.CheckOperations(lockCounterModel(initial), ops)
}

// genCalls draws a few counter operations. Half the time they are random
// (small values and times, so that they overlap, collide and leave gaps);
// otherwise they come from a linearizable run — increments at points in
// time, reads of the value at theirs — spoilt now and then by a value off
// by one, an interval moved, an acknowledged write turned :info or one that
// did not happen, so that verdicts are close calls both ways.
func genCalls(t *rapid.T, initial int64) ([]lcCall, int64) {
	var calls []lcCall
	add := func(c lcCall) {
		c.inv, c.done, c.process = 2*len(calls), 2*len(calls)+1, history.Process(len(calls))
		calls = append(calls, c)
	}
	if rapid.Bool().Draw(t, "random") {
		for range rapid.IntRange(0, 10).Draw(t, "n") {
			c := lcCall{}
			switch rapid.IntRange(0, 3).Draw(t, "kind") {
			case 0, 1:
				c.increment = true
			case 2:
				c.increment, c.maybe = true, true
			}
			c.value = initial + rapid.Int64Range(-1, 5).Draw(t, "value")
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
			c := lcCall{increment: true, value: initial + int64(i) + 1}
			c.call, c.ret = around(p)
			c.maybe = rapid.IntRange(0, 3).Draw(t, "info") == 0
			add(c)
		}
		for range rapid.IntRange(0, 2).Draw(t, "no-ops") { // :info writes that did not happen
			c := lcCall{increment: true, maybe: true, value: initial + rapid.Int64Range(0, int64(incs)+1).Draw(t, "value")}
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
			switch rapid.IntRange(0, 3).Draw(t, "spoil") {
			case 0:
				c.value += rapid.SampledFrom([]int64{-1, 1}).Draw(t, "by")
			case 1:
				d := rapid.Int64Range(-10, 10).Draw(t, "by")
				c.call, c.ret = c.call+d, c.ret+d
			case 2:
				c.maybe = c.increment && !c.maybe
			case 3:
				c.ret = c.call
			}
		}
	}
	end := int64(0)
	for _, c := range calls {
		end = max(end, c.ret+1, c.call+1)
	}
	return calls, end
}

// TestCounterWalkAgreesWithPorcupine is the proof by agreement at the level
// of the model: on every drawn set of increments (acknowledged or not) and
// reads, the walk and porcupine's search give the same verdict.
func TestCounterWalkAgreesWithPorcupine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		initial := rapid.Int64Range(-2, 2).Draw(t, "initial")
		calls, end := genCalls(t, initial)
		v, ok, _ := newCounterWalk(calls, initial, end, true).run(false)
		if want := porcupineCalls(calls, initial, end); ok != want {
			t.Fatalf("counter walk %v (%+v), porcupine %v on\n%s", ok, v, want, describeCalls(calls))
		}
	})
}

func describeCalls(calls []lcCall) string {
	var b strings.Builder
	for i, c := range calls {
		kind := "read"
		if c.increment {
			kind = "inc"
			if c.maybe {
				kind = "inc?"
			}
		}
		fmt.Fprintf(&b, "  %d: %s %d [%d, %d]\n", i, kind, c.value, c.call, c.ret)
	}
	return b.String()
}
