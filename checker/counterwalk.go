package checker

import (
	"cmp"
	"math"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
)

// An lcCall is one operation of the lock-protected counter, as both the
// counter walk and porcupine read a lock-counter history: an increment (a
// critical section's read and its ok or :info write, from the read's
// invocation to the write's completion, whose output is the value written)
// or a read that no write used (the final read, a read whose write failed).
// It holds no pointers, so millions of them cost the garbage collector
// nothing to keep.
type lcCall struct {
	inv, done int   // positions in the history of the invocation and the completion; done -1 if none
	call, ret int64 // :time of inv and done; ret is meaningless when done < 0
	value     int64 // the value written or read
	process   history.Process
	increment bool
	maybe     bool // an increment whose write is :info or never completed
}

// writePos is the position of an increment's write: its completion, or for
// one that never completed its invocation.
func (c lcCall) writePos() int {
	if c.done >= 0 {
		return c.done
	}
	return c.inv
}

// A walkFault says why the counter walk found no linearization, in terms of
// the ops it blames.
type walkFault uint8

const (
	// faultBelow: an op wrote or read a value the counter, which starts at
	// the initial value and only rises, cannot have held.
	faultBelow walkFault = iota + 1
	// faultCollision: two acknowledged increments wrote the same value.
	faultCollision
	// faultGap: an op needs the counter to have passed a value that no
	// increment, acknowledged or of unknown outcome, wrote.
	faultGap
	// faultOrder: op completed before other was invoked, yet the counter's
	// order puts other first.
	faultOrder
)

// A counterWalk decides whether the operations of a lock-counter history
// are linearizable against lockCounterModel(initial) — the question
// porcupine answers — in O(n log n) and without a search.
//
// In that model the counter only moves by +1, each step made by an
// increment that writes the current value plus one, so any linearization
// takes the counter through initial+1, initial+2, … up to some top, and each
// of those values is written by exactly one increment, its producer. That
// gives the walk:
//
//  1. An acknowledged increment must take effect, so acknowledged increments
//     write distinct values above initial: two of one value are a lost
//     update (faultCollision), one at or below initial is impossible
//     (faultBelow).
//  2. An increment of unknown outcome (:info, or never completed: its return
//     is later than every event) may take effect or not; placed last, what
//     it does is seen by nothing. So it matters only where no acknowledged
//     increment wrote its value: a gap, which it may fill. Of several for one gap the
//     earliest-invoked is as good as any other, since they differ only in
//     their calls. The top is the largest value written or read; a value up
//     to it that nothing wrote is a gap no one filled (faultGap).
//  3. A linearization is then the producers in value order, each read of v
//     between the producer of v and that of v+1. With linearization points
//     x_k in each producer's [call, return], that is: x_k non-decreasing in
//     k, x_v no later than the return of every read of v, x_{v+1} no earlier
//     than the call of every read of v. One walk in value order puts each
//     x_k as early as it may go — the latest point forced so far, the
//     producer's call, or the latest call of a read of k-1 — and finds such
//     points exactly when they exist, since an earlier point never hurts a
//     later one. It fails where an op would have to take effect after it
//     returned, or after a read of its value returned (faultOrder).
//
// Points in closed intervals are what porcupine checks too: it orders one
// op before another only when the first returns strictly before the other
// is called (calls sort before returns at equal times). Reads and :info
// increments are the only choices a search has; the walk resolves both
// without search, which is why a history of millions of ops takes it about
// as long as sorting them.
type counterWalk struct {
	calls   []lcCall
	initial int64
	top     int64
	// known, maybe and reads are the acknowledged increments, those of
	// unknown outcome and the reads, by value; ties by position.
	known, maybe, reads []walkItem
}

// A walkItem is one of the calls, with its interval.
type walkItem struct {
	i     int   // index into calls
	value int64 // the value written or read
	c, r  int64 // call and return; r is end for an increment of unknown outcome
	pos   int   // position of the write or read completion, for ties
}

// newCounterWalk sorts calls for the walk. With timed, intervals are the
// ops' :time, else their positions in the history; end is the return of
// every increment of unknown outcome, later than any event.
func newCounterWalk(calls []lcCall, initial, end int64, timed bool) *counterWalk {
	w := &counterWalk{calls: calls, initial: initial, top: initial}
	var nk, nm, nr int
	for _, c := range calls {
		switch {
		case !c.increment:
			nr++
		case c.maybe:
			nm++
		default:
			nk++
		}
	}
	w.known, w.maybe, w.reads = make([]walkItem, 0, nk), make([]walkItem, 0, nm), make([]walkItem, 0, nr)
	for i, c := range calls {
		it := walkItem{i: i, value: c.value, c: c.call, r: c.ret, pos: c.writePos()}
		if !timed {
			it.c, it.r = int64(c.inv), int64(c.done)
		}
		switch {
		case !c.increment:
			w.reads = append(w.reads, it)
		case c.maybe:
			it.r = end
			w.maybe = append(w.maybe, it)
		default:
			w.known = append(w.known, it)
		}
		if !c.maybe {
			// A value only increments of unknown outcome wrote is not one
			// the counter must reach.
			w.top = max(w.top, c.value)
		}
	}
	byValue := func(a, b walkItem) int { return cmp.Or(cmp.Compare(a.value, b.value), cmp.Compare(a.pos, b.pos)) }
	slices.SortFunc(w.known, byValue)
	slices.SortFunc(w.reads, byValue)
	slices.SortFunc(w.maybe, func(a, b walkItem) int {
		return cmp.Or(cmp.Compare(a.value, b.value), cmp.Compare(a.c, b.c), cmp.Compare(a.pos, b.pos))
	})
	return w
}

// A walkViolation is where the counter walk stopped.
type walkViolation struct {
	fault walkFault
	value int64 // the value the counter could not reach in order (faultBelow: the value written or read)
	op    int   // the op blamed, an index into calls
	other int   // the colliding increment, or the op on the other side of the real-time order; -1 if none
	// staleRead says, for faultOrder, that op is a read invoked after other
	// had completed; otherwise op completed before other was invoked.
	staleRead bool
}

// cursor steps through items sorted by value.
type cursor struct {
	items []walkItem
	i     int
}

// at returns the items of value v; v must not decrease between calls.
func (c *cursor) at(v int64) []walkItem {
	for c.i < len(c.items) && c.items[c.i].value < v {
		c.i++
	}
	j := c.i
	for j < len(c.items) && c.items[j].value == v {
		j++
	}
	return c.items[c.i:j]
}

// run walks the values from initial up and returns the first violation, or
// ok. With order, it also returns a linearization of the ops it placed (all
// of them when ok; when not, the producers below the violation and the
// reads below their last), as indexes into calls.
func (w *counterWalk) run(order bool) (v walkViolation, ok bool, lin []int) {
	if v, ok := w.below(); !ok {
		return v, false, nil
	}
	known, maybe, reads := cursor{items: w.known}, cursor{items: w.maybe}, cursor{items: w.reads}
	// The latest call among the reads of the value before k, which the
	// producer of k must follow, and the op that made it.
	prev := reads.at(w.initial)
	if order {
		lin = appendByCall(lin, prev)
	}
	point, pointBy, pointByRead := int64(math.MinInt64), -1, false
	for k := w.initial + 1; k <= w.top; k++ {
		var p walkItem
		switch ks, ms := known.at(k), maybe.at(k); {
		case len(ks) > 1:
			// The two earliest in the history; the later one is blamed.
			return walkViolation{fault: faultCollision, value: k, op: ks[1].i, other: ks[0].i}, false, lin
		case len(ks) == 1:
			p = ks[0]
		case len(ms) > 0:
			p = ms[0]
		default:
			return walkViolation{fault: faultGap, value: k, op: w.gapOp(k), other: -1}, false, lin
		}
		lo, loBy, loRead := p.c, p.i, false
		for _, rd := range prev {
			if rd.c > lo {
				lo, loBy, loRead = rd.c, rd.i, true
			}
		}
		if lo > point {
			point, pointBy, pointByRead = lo, loBy, loRead
		}
		cur := reads.at(k)
		hi, hiBy := p.r, p.i
		for _, rd := range cur {
			if rd.r < hi {
				hi, hiBy = rd.r, rd.i
			}
		}
		if point > hi {
			v := walkViolation{fault: faultOrder, value: k, op: hiBy, other: pointBy}
			if pointByRead {
				v.op, v.other, v.staleRead = pointBy, hiBy, true
			}
			return v, false, lin
		}
		if order {
			lin = append(lin, p.i)
			lin = appendByCall(lin, cur)
		}
		prev = cur
	}
	return walkViolation{}, true, lin
}

// appendByCall appends the reads of one value in the order of their calls,
// which respects real time among them.
func appendByCall(lin []int, reads []walkItem) []int {
	rs := slices.Clone(reads)
	slices.SortStableFunc(rs, func(a, b walkItem) int { return cmp.Compare(a.c, b.c) })
	for _, r := range rs {
		lin = append(lin, r.i)
	}
	return lin
}

// below finds the lowest value written or read that the counter, starting at
// initial and only rising, cannot have held.
func (w *counterWalk) below() (walkViolation, bool) {
	v := walkViolation{fault: faultBelow, other: -1}
	found := false
	if len(w.known) > 0 && w.known[0].value <= w.initial {
		v.value, v.op, found = w.known[0].value, w.known[0].i, true
	}
	if len(w.reads) > 0 && w.reads[0].value < w.initial && (!found || w.reads[0].value < v.value) {
		v.value, v.op, found = w.reads[0].value, w.reads[0].i, true
	}
	return v, !found
}

// gapOp is the op that needs the counter past the gap k: of the reads of k
// or more and the acknowledged increments above k, the one of the lowest
// value, then the earliest in the history.
func (w *counterWalk) gapOp(k int64) int {
	var best walkItem
	found := false
	if i, _ := slices.BinarySearchFunc(w.known, k+1, func(it walkItem, v int64) int { return cmp.Compare(it.value, v) }); i < len(w.known) {
		best, found = w.known[i], true
	}
	if i, _ := slices.BinarySearchFunc(w.reads, k, func(it walkItem, v int64) int { return cmp.Compare(it.value, v) }); i < len(w.reads) {
		if r := w.reads[i]; !found || r.value < best.value || r.value == best.value && r.pos < best.pos {
			best = r
		}
	}
	return best.i
}
