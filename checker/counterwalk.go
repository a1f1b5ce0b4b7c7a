package checker

import (
	"cmp"
	"math"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
)

// An lcCall is one operation on the counter register of the lock-counter
// model (docs/checkers.md), as both the counter walk and porcupine read a
// lock-counter history: an :ok read — inside a section or not, the final
// read included — or a write that completed :ok or :info or never completed,
// with the write's own interval. It holds no pointers, so millions of them
// cost the garbage collector nothing to keep.
type lcCall struct {
	inv, done int   // positions in the history of the invocation and the completion; done -1 if none
	call, ret int64 // :time of inv and done; ret is meaningless when done < 0
	value     int64 // the value read or written
	from      int64 // a write: the value its section read, or value-1 when it read none
	fence     int64 // a write's fencing token; 0 if unfenced
	process   history.Process
	write     bool
	maybe     bool // a write that completed :info or never completed
	read      bool // a write whose section read: from is what it read
	// late: an acknowledged write whose :ok came after the fact (an :info
	// the run's audit table resolved, :resolved :audit): it took effect,
	// but when is unknown — the statement may have landed long after the
	// :info, so its return is as late as an unknown outcome's.
	late bool
}

// pos is the position of the op that names the call: its completion, or for
// one that never completed its invocation.
func (c lcCall) pos() int {
	if c.done >= 0 {
		return c.done
	}
	return c.inv
}

// increment reports whether a write writes what its section read plus one,
// the only write the model lets take effect.
func (c lcCall) increment() bool { return c.value == c.from+1 }

// A walkFault says why the counter walk found no linearization, in terms of
// the ops it blames.
type walkFault uint8

const (
	// faultBelow: an op wrote or read a value the counter, which starts at
	// the initial value and only rises, cannot have held.
	faultBelow walkFault = iota + 1
	// faultCollision: two acknowledged writes wrote the same value.
	faultCollision
	// faultGap: an op needs the counter to have passed a value that no
	// write, acknowledged or of unknown outcome, wrote.
	faultGap
	// faultOrder: op completed before other was invoked, yet the counter's
	// order puts other first.
	faultOrder
	// faultNotIncrement: an acknowledged write is not its section's read
	// plus one.
	faultNotIncrement
	// faultFence: op's fence is not above the fence of other, a write the
	// counter's order puts before it.
	faultFence
)

// A counterWalk decides whether a lock-counter history's operations are
// linearizable in the lock-counter model (docs/checkers.md) — the question
// porcupine answers with lockCounterModel — in O(n log n) and without a
// search.
//
// In that model a write takes effect only as a compare-and-set from its
// section's read v to v+1, so any linearization takes the counter through
// initial+1, initial+2, … up to some top, and each of those values is
// written by exactly one write that took effect, its producer. That gives
// the walk:
//
//  1. An acknowledged write must take effect, so it must be an increment
//     (faultNotIncrement), and acknowledged writes write distinct values
//     above initial: two of one value are a lost update (faultCollision),
//     one at or below initial is impossible (faultBelow).
//  2. A write of unknown outcome (:info, or never completed: its return is
//     later than every event) may take effect or not; placed last, what it
//     does is seen by nothing. So it matters only where no acknowledged
//     write produced its value: a gap, which it may fill. The top is the
//     largest value written or read; a value up to it that nothing wrote is
//     a gap no one filled (faultGap).
//  3. A linearization is then the producers in value order, each read of v
//     between the producer of v and that of v+1. With linearization points
//     x_k in each producer's [call, return], that is: x_k non-decreasing in
//     k, x_v no later than the return of every read of v, x_{v+1} no earlier
//     than the call of every read of v — the producer's own section read
//     among them. One walk in value order puts each x_k as early as it may
//     go — the latest point forced so far, the producer's call, or the
//     latest call of a read of k-1 — and finds such points exactly when they
//     exist, since an earlier point never hurts a later one. It fails where
//     an op would have to take effect after it returned, or after a read of
//     its value returned (faultOrder).
//  4. With fencing, the fenced producers' fences must rise in value order
//     (faultFence). Of several writes of unknown outcome that could fill a
//     gap, one with a lower fence leaves more room for those after it and
//     one invoked earlier less constraint in time, so the walk keeps each
//     (point, fence) that no other beats in both: a Pareto front, one state
//     wide without fencing (the earliest-invoked filler is then as good as
//     any).
//
// Points in closed intervals are what porcupine checks too: it orders one
// op before another only when the first returns strictly before the other
// is called (calls sort before returns at equal times).
type counterWalk struct {
	calls   *callStore
	initial int64
	top     int64
	end     int64 // the return of every write of unknown outcome
	timed   bool
	// known, maybe and reads are the acknowledged writes, the increments of
	// unknown outcome and the reads, by value; ties by position (maybe: by
	// call, then position). A write of unknown outcome that is no
	// increment can never take effect and is left out.
	known, maybe, reads *itemList
	// wild are the writes of unknown outcome that are no increment: they
	// can never take effect in the model, but may have landed, losing
	// updates, in an execution that breaks it.
	wild *itemList
}

// A walkItem is one of the calls, with its interval.
type walkItem struct {
	i     int   // index into calls
	value int64 // the value written or read
	c, r  int64 // call and return; r is end for a write of unknown outcome
	fence int64
	pos   int // position of the write or read completion, for ties
}

// newCounterWalk sorts calls for the walk. With timed, intervals are the
// ops' :time, else their positions in the history; end is the return of
// every write of unknown outcome, later than any event. The walk's items
// go to disk, sorted in runs, when the calls are there.
func newCounterWalk(calls *callStore, initial, end int64, timed bool) (*counterWalk, error) {
	spill, run := calls.file != nil, calls.runSize
	w := &counterWalk{calls: calls, initial: initial, top: initial, end: end, timed: timed,
		known: newItemList(byValue, spill, run), maybe: newItemList(byValueCall, spill, run),
		reads: newItemList(byValue, spill, run), wild: newItemList(byValue, spill, run)}
	defer func() {
		if p := recover(); p != nil {
			w.close() // a read of the calls failed: the lists go, and the panic on
			panic(p)
		}
	}()
	lists := w.lists()
	w.reserve(calls, lists)
	calls.each(func(i int, c lcCall) {
		lists[listOf(c)].add(w.itemOf(i, c))
		if !c.maybe {
			// A value only writes of unknown outcome wrote is not one the
			// counter must reach.
			w.top = max(w.top, c.value)
		}
	})
	for _, l := range w.lists() {
		if err := l.done(); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

// reserve makes room in lists, w.lists(), for the items they will take,
// counted from the calls when they are in memory. Grown by append instead,
// the lists copied themselves and touched twice the pages, 4 % of a check
// of 250,000 sections. Calls on disk fill runs, which need no more room
// than they are given: a run's room for each list would hold 12 MB for
// lists that mostly stay empty.
func (w *counterWalk) reserve(calls *callStore, lists []*itemList) {
	var n [4]int
	for _, c := range calls.mem {
		n[listOf(c)]++
	}
	for k, l := range lists {
		l.reserve(n[k])
	}
}

// listOf says which of w.lists() takes c: the reads, the increments of
// unknown outcome, the other writes of unknown outcome, or the
// acknowledged writes.
func listOf(c lcCall) int {
	switch {
	case !c.write:
		return 2
	case c.maybe && c.increment():
		return 1
	case c.maybe:
		return 3
	}
	return 0
}

// lists are the walk's lists, in the order listOf numbers them.
func (w *counterWalk) lists() []*itemList { return []*itemList{w.known, w.maybe, w.reads, w.wild} }

// close lets go of the walk's files.
func (w *counterWalk) close() {
	for _, l := range w.lists() {
		l.close()
	}
}

// itemOf is the walk's item for c, calls[i].
func (w *counterWalk) itemOf(i int, c lcCall) walkItem {
	it := walkItem{i: i, value: c.value, c: c.call, r: c.ret, fence: c.fence, pos: c.pos()}
	if !w.timed {
		it.c, it.r = int64(c.inv), int64(c.done)
	}
	if c.write && (c.maybe || c.late) {
		it.r = w.end
	}
	return it
}

// A walkViolation is where the counter walk stopped.
type walkViolation struct {
	fault walkFault
	value int64 // the value the counter could not reach in order (faultBelow, faultNotIncrement: the value written or read)
	op    int   // the op blamed, an index into calls
	other int   // the colliding write, the op on the other side of the real-time order, or the write of the higher fence; -1 if none
	// staleRead says, for faultOrder, that op is a read invoked after other
	// had completed; otherwise op completed before other was invoked.
	staleRead bool
}

// cursor steps through a list sorted by value.
type cursor struct {
	it   listIter[walkItem]
	head walkItem
	ok   bool // head is the next item
	// The items of the last two values asked for: the walk holds on to a
	// value's reads while it asks for the next value's.
	bufs [2][]walkItem
	flip int
}

func newCursor(l *itemList) *cursor {
	c := &cursor{it: l.iter()}
	c.head, c.ok = c.it.next()
	return c
}

// at returns the items of value v, valid until the next call but one; v
// must rise between calls.
func (c *cursor) at(v int64) []walkItem {
	c.flip ^= 1
	out := c.bufs[c.flip][:0]
	for c.ok && c.head.value < v {
		c.head, c.ok = c.it.next()
	}
	for c.ok && c.head.value == v {
		out = append(out, c.head)
		c.head, c.ok = c.it.next()
	}
	c.bufs[c.flip] = out
	return out
}

// peek returns the next item, of a value above every one asked for.
func (c *cursor) peek() (walkItem, bool) { return c.head, c.ok }

// A walkState is one way of producing the values so far: the earliest point
// the last producer can take effect at, the highest fence that took effect,
// and the ops that forced them.
type walkState struct {
	point       int64
	pointBy     int  // the call that forced point; -1 if none
	pointByRead bool // pointBy is a read, not the producer
	fence       int64
	fenceBy     int   // the write whose fence is fence; -1 if none
	path        int32 // index into the walk's path, when it keeps one; -1 at the start
}

// A pathStep is one producer of a state's way, for the linearization.
type pathStep struct {
	call   int   // index into calls
	parent int32 // the step before; -1 if none
}

// run walks the values from initial up and returns the first violation, or
// ok. With order, it also returns a linearization of the ops it placed (all
// of them when ok; when not, the producers below the violation and the
// reads below their last), as indexes into calls.
func (w *counterWalk) run(order bool) (v walkViolation, ok bool, lin []int) {
	if v, ok := w.notIncrement(); !ok {
		return v, false, nil
	}
	if v, ok := w.below(); !ok {
		return v, false, nil
	}
	known, maybe, reads := newCursor(w.known), newCursor(w.maybe), newCursor(w.reads)
	prev := reads.at(w.initial)
	front := []walkState{{point: math.MinInt64, pointBy: -1, fenceBy: -1, path: -1}}
	var next, spare []walkState
	var path []pathStep
	for k := w.initial + 1; k <= w.top; k++ {
		var cands []walkItem
		switch ks := known.at(k); {
		case len(ks) > 1:
			// The two earliest in the history; the later one is blamed.
			v := walkViolation{fault: faultCollision, value: k, op: ks[1].i, other: ks[0].i}
			return v, false, w.linearization(order, path, front[0], k)
		case len(ks) == 1:
			cands = ks
		default:
			cands = maybe.at(k)
		}
		if len(cands) == 0 {
			v := walkViolation{fault: faultGap, value: k, op: gapOp(known, reads, k), other: -1}
			return v, false, w.linearization(order, path, front[0], k)
		}
		cur := reads.at(k)
		next = next[:0]
		// The fault reported is the first candidate's: its order fault in
		// the earliest state that fails it by order, else (every state
		// failed it by fence) its fence fault in the state of the lowest
		// fence, whose fence every other state's is at least.
		var first walkViolation
		for _, s := range front {
			for ci, p := range cands {
				ns, fault := step(s, p, prev, cur, k)
				if fault.fault != 0 {
					if ci == 0 && first.fault != faultOrder {
						first = fault
					}
					continue
				}
				if order {
					path = append(path, pathStep{call: p.i, parent: s.path})
					ns.path = int32(len(path) - 1)
				}
				next = append(next, ns)
			}
		}
		if len(next) == 0 {
			return first, false, w.linearization(order, path, front[0], k)
		}
		front, spare = paretoFront(next, spare[:0]), front
		prev = cur
	}
	return walkViolation{}, true, w.linearization(order, path, front[0], w.top+1)
}

// step makes p, a write of k, the producer of k after state s, where prev
// are the reads of k-1 and cur those of k. It returns the state after p, or
// the fault that forbids it.
func step(s walkState, p walkItem, prev, cur []walkItem, k int64) (walkState, walkViolation) {
	if p.fence > 0 && p.fence <= s.fence {
		return s, walkViolation{fault: faultFence, value: k, op: p.i, other: s.fenceBy}
	}
	lo, loBy, loRead := p.c, p.i, false
	for _, rd := range prev {
		if rd.c > lo {
			lo, loBy, loRead = rd.c, rd.i, true
		}
	}
	ns := s
	if lo > ns.point {
		ns.point, ns.pointBy, ns.pointByRead = lo, loBy, loRead
	}
	hi, hiBy := p.r, p.i
	for _, rd := range cur {
		if rd.r < hi {
			hi, hiBy = rd.r, rd.i
		}
	}
	if ns.point > hi {
		v := walkViolation{fault: faultOrder, value: k, op: hiBy, other: ns.pointBy}
		if ns.pointByRead {
			v.op, v.other, v.staleRead = ns.pointBy, hiBy, true
		}
		return s, v
	}
	if p.fence > 0 {
		ns.fence, ns.fenceBy = p.fence, p.i
	}
	return ns, walkViolation{}
}

// paretoFront keeps, of states, those that no other beats in both point and
// fence (earlier and lower are better), ordered by point, into dst. Of equal
// states the first is kept.
func paretoFront(states, dst []walkState) []walkState {
	if len(states) == 1 {
		return append(dst, states[0])
	}
	slices.SortStableFunc(states, func(a, b walkState) int {
		return cmp.Or(cmp.Compare(a.point, b.point), cmp.Compare(a.fence, b.fence))
	})
	for _, s := range states {
		if n := len(dst); n == 0 || s.fence < dst[n-1].fence {
			dst = append(dst, s)
		}
	}
	return dst
}

// linearization returns, when order is set, the ops the walk placed on s's
// way up to the value below k: the reads of initial, then each producer
// followed by the reads of its value.
func (w *counterWalk) linearization(order bool, path []pathStep, s walkState, k int64) []int {
	if !order {
		return nil
	}
	var producers []int
	for at := s.path; at >= 0; at = path[at].parent {
		producers = append(producers, path[at].call)
	}
	slices.Reverse(producers)
	reads := newCursor(w.reads)
	lin := appendByCall(nil, reads.at(w.initial))
	for j, p := range producers {
		if v := w.initial + 1 + int64(j); v < k {
			lin = append(lin, p)
			lin = appendByCall(lin, reads.at(v))
		}
	}
	return lin
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

// notIncrement finds the first acknowledged write, in the history, that is
// not its section's read plus one.
func (w *counterWalk) notIncrement() (walkViolation, bool) {
	v := walkViolation{fault: faultNotIncrement, op: -1, other: -1}
	at := 0
	w.calls.each(func(i int, c lcCall) {
		if c.write && !c.maybe && !c.increment() && (v.op < 0 || c.pos() < at) {
			v.op, v.value, at = i, c.value, c.pos()
		}
	})
	return v, v.op < 0
}

// below finds the lowest value written or read that the counter, starting at
// initial and only rising, cannot have held.
func (w *counterWalk) below() (walkViolation, bool) {
	v := walkViolation{fault: faultBelow, other: -1}
	found := false
	if k, ok := w.known.first(); ok && k.value <= w.initial {
		v.value, v.op, found = k.value, k.i, true
	}
	if r, ok := w.reads.first(); ok && r.value < w.initial && (!found || r.value < v.value) {
		v.value, v.op, found = r.value, r.i, true
	}
	return v, !found
}

// gapOp is the op that needs the counter past the gap k, where known has
// just been asked for k (and had none) and reads for k-1: of the reads of
// k or more and the acknowledged writes above k, the one of the lowest
// value, then the earliest in the history.
func gapOp(known, reads *cursor, k int64) int {
	best, found := known.peek() // above k: known has none of k
	rd, ok := reads.peek()
	if ok && (!found || rd.value < best.value || rd.value == best.value && rd.pos < best.pos) {
		best = rd
	}
	return best.i
}

// A proof is a read that only writes of unknown outcome (or acknowledged
// after the fact, landing at no known time) can explain: the counter cannot
// have held what it returned unless one of them took effect before it.
type proof struct {
	read  int // index into calls of the read that completed first
	maybe int // index into calls of the earliest-invoked of those writes
	n     int // how many such writes could have produced it
}

// lostBound is what a history proves of the updates lost at its final read.
type lostBound struct {
	lo, hi int64 // the least and the most lost, in any execution the history allows
	ok     int   // acknowledged writes that completed before the final read
	proven int   // writes of unknown outcome that reads prove took effect before it
	first  proof // the earliest of those proofs, when proven > 0
}

// lostBounds bounds the updates lost at the final read, calls[final], that
// returned value: the writes that took effect before it, less the counter's
// rise. The bounds hold for every execution the history allows, even one
// in which writes land unconditionally and lose updates:
//
//   - at least, the acknowledged writes that completed before the final
//     read was invoked, and one write of unknown outcome for each proof
//     (see proofs) among the reads that completed before then, or the final
//     read itself;
//   - at most, every write invoked before the final read completed.
func (w *counterWalk) lostBounds(final int, value int64) lostBound {
	f := w.itemOf(final, w.calls.get(final))
	var b lostBound
	may := 0
	for _, l := range w.lists() {
		if l == w.reads {
			continue
		}
		for it := l.iter(); ; {
			x, ok := it.next()
			if !ok {
				break
			}
			if l == w.known && x.r < f.c {
				b.ok++
			}
			if x.c <= f.r {
				may++
			}
		}
	}
	b.proven, b.first = w.proofs(f.c, final)
	rise := value - w.initial
	b.lo, b.hi = max(0, int64(b.ok+b.proven)-rise), max(0, int64(may)-rise)
	return b
}

// proofs returns, for each value other than initial that a read returned
// (a read that completed before the time cut, or calls[final]), the proof
// that a write of unknown outcome (or resolved late) took effect, when there
// is one: the writes of that value invoked before the earliest of those
// reads completed are all of unknown outcome or resolved late, and there is
// at least one. Values differ, so
// each proof is a different write. first is the earliest-completing read of
// the proofs; count is their number.
func (w *counterWalk) proofs(cut int64, final int) (count int, first proof) {
	known, maybe, reads := newCursor(w.known), newCursor(w.maybe), newCursor(w.reads)
	first.read = -1
	var firstAt walkItem
	for {
		next, ok := reads.peek()
		if !ok {
			break
		}
		v := next.value
		found := false
		var earliest walkItem
		for _, rd := range reads.at(v) {
			if (rd.r < cut || rd.i == final) && (!found || rd.r < earliest.r) {
				earliest, found = rd, true
			}
		}
		if !found || v == w.initial {
			continue
		}
		ks := known.at(v)
		if slices.ContainsFunc(ks, func(k walkItem) bool { return k.c <= earliest.r && k.r != w.end }) {
			continue
		}
		// Acknowledged writes resolved after the fact took effect at no
		// known time (their r is end): the read may be what proves one
		// landed before it, as for a write of unknown outcome.
		ms := slices.Clone(invokedBy(maybe.at(v), earliest.r))
		for _, k := range ks {
			if k.r == w.end && k.c <= earliest.r {
				ms = append(ms, k)
			}
		}
		if len(ms) == 0 {
			continue
		}
		slices.SortStableFunc(ms, func(a, b walkItem) int { return cmp.Compare(a.c, b.c) })
		count++
		if first.read < 0 || earliest.r < firstAt.r || earliest.r == firstAt.r && earliest.pos < firstAt.pos {
			first, firstAt = proof{read: earliest.i, maybe: ms[0].i, n: len(ms)}, earliest
		}
	}
	return count, first
}

// invokedBy returns the prefix of ms, writes of one value in the order of
// their calls, invoked no later than t.
func invokedBy(ms []walkItem, t int64) []walkItem {
	n := 0
	for n < len(ms) && ms[n].c <= t {
		n++
	}
	return ms[:n]
}

// item returns the walk's item for calls[i].
func (w *counterWalk) item(i int) walkItem { return w.itemOf(i, w.calls.get(i)) }

// maybeWriters returns the increments of unknown outcome that write v and
// were invoked no later than t, earliest first. It reads the list from its
// start: it is for explanations, not for the walk.
func (w *counterWalk) maybeWriters(v, t int64) []walkItem {
	return slices.Clone(invokedBy(newCursor(w.maybe).at(v), t))
}
