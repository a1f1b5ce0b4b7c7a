package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
)

// evidenceLimit caps the lists of evidence a result carries; the counts are
// always complete.
const evidenceLimit = 10

// A Section is one critical section as a history records it: from the
// acquire's completion to the release's invocation, on the Redis clock.
type Section struct {
	Process    history.Process
	Acquire    int64 // index of the acquire's completion
	Start, End int64 // acquire ok time; release invoke time (else the last op's)
	LeaseNS    int64 // the lease it was granted, 0 if not recorded
	Fence      int64 // fencing token, 0 if unfenced
	Read       int64 // value read; -1 if the read did not complete ok
	Write      int64 // index of the write's completion; -1 if none
	WriteInv   int64 // write invoke time
	WriteEnd   int64 // write completion time
	WriteType  history.Type
	WriteValue int64
}

// wrote reports whether the section's write may have changed the counter.
func (s Section) wrote() bool { return s.WriteType == history.Ok || s.WriteType == history.Info }

// Sections extracts the critical sections of a lock-counter history, in the
// order their acquires completed. ops must be in history order.
func Sections(ops []history.Op) []Section {
	var b sectionBuilder
	for _, o := range ops {
		b.add(o)
	}
	return b.secs
}

// A sectionBuilder extracts sections one op at a time: the one extraction
// that LockCounter and the streaming check both use.
type sectionBuilder struct {
	secs []Section
	open map[history.Process]int // process -> index into secs
}

func (b *sectionBuilder) add(o history.Op) {
	if !o.IsClient() {
		return
	}
	if b.open == nil {
		b.open = map[history.Process]int{}
	}
	i, ok := b.open[o.Process]
	out := b.secs
	switch {
	case o.F == history.FAcquire && o.Type == history.Ok:
		s := Section{Process: o.Process, Acquire: o.Index, Start: o.Time, End: o.Time, Read: -1, Write: -1}
		if ms, ok := history.Int(o.Get(history.KeyLeaseMS)); ok {
			s.LeaseNS = ms * 1e6
		}
		if f, ok := history.Int(o.Get(history.KeyFence)); ok {
			s.Fence = f
		}
		b.secs = append(b.secs, s)
		b.open[o.Process] = len(b.secs) - 1
	case !ok:
		// Ops outside a section (a failed acquire, the final read).
	case o.F == history.FRead && o.Type == history.Ok:
		if v, ok := history.Int(o.Value); ok {
			out[i].Read = v
		}
		out[i].End = o.Time
	case o.F == history.FWrite && o.Type == history.Invoke:
		out[i].WriteInv = o.Time
		if v, ok := history.Int(o.Value); ok {
			out[i].WriteValue = v
		}
		out[i].End = o.Time
	case o.F == history.FWrite:
		out[i].Write, out[i].WriteEnd, out[i].WriteType = o.Index, o.Time, o.Type
		out[i].End = o.Time
	case o.F == history.FRelease && o.Type == history.Invoke:
		out[i].End = o.Time
	case o.F == history.FRelease:
		delete(b.open, o.Process)
	default:
		out[i].End = o.Time
	}
	if ok && o.Type == history.Info {
		delete(b.open, o.Process) // an :info retires the process
	}
}

// A Pause is a fault that froze one process: a SIGSTOP from the nemesis or a
// pause the worker was told to take inside its section.
type Pause struct {
	Index      int64 // index of the :pause event
	Process    history.Process
	Kind       history.Keyword
	Start, End int64 // End is the :resume event's time, or the history's end
}

// Pauses extracts the nemesis's pause windows from ops.
func Pauses(ops []history.Op) []Pause {
	var b pauseBuilder
	for _, o := range ops {
		b.add(o)
	}
	return b.finish()
}

// A pauseBuilder extracts pauses one op at a time, for Pauses and the
// streaming check alike.
type pauseBuilder struct {
	pauses []Pause
	open   map[history.Process]int // paused process -> index into pauses
	last   int64                   // the latest :time seen
}

func (b *pauseBuilder) add(o history.Op) {
	b.last = max(b.last, o.Time)
	if o.IsClient() {
		return
	}
	v, _ := o.Value.(map[history.Keyword]any)
	p, ok := history.Int(v["process"])
	if !ok {
		return
	}
	if b.open == nil {
		b.open = map[history.Process]int{}
	}
	switch o.F {
	case history.FPause:
		kind, _ := v["kind"].(history.Keyword)
		b.pauses = append(b.pauses, Pause{Index: o.Index, Process: history.Process(p), Kind: kind, Start: o.Time, End: -1})
		b.open[history.Process(p)] = len(b.pauses) - 1
	case history.FResume:
		if i, ok := b.open[history.Process(p)]; ok {
			b.pauses[i].End = o.Time
			delete(b.open, history.Process(p))
		}
	}
}

// finish ends the pauses still open at the history's end, and returns them
// all.
func (b *pauseBuilder) finish() []Pause {
	for i := range b.pauses {
		if b.pauses[i].End < 0 {
			b.pauses[i].End = b.last
		}
	}
	return b.pauses
}

// LockCounter checks a lock-counter history whose counter started at initial:
// lost updates (the increments the final counter is missing, as bounds when
// writes of unknown outcome remain), critical sections that overlap on the
// Redis clock, writes sent after the writer's lease had expired, fencing
// order, and the pause behind each stale write. The verdict is invalid when
// the history proves an update lost, unknown when it has no final read or
// ops it cannot read as counter ops. It is the :lock-counter result of Check.
func LockCounter(ops []history.Op, initial int64) Result {
	s := newStream(0)
	for _, o := range ops {
		s.Add(o)
	}
	s.finish()
	w, err := s.walk(initial)
	if err != nil {
		return Result{Name: "lock-counter", Valid: Unknown, Explanation: err.Error()}
	}
	return s.lockCounter(initial, w)
}

// lcCounts are the figures LockCounter counts op by op.
type lcCounts struct {
	writes, infoWrites, rejected, infoOps, faults int
}

// add counts o.
func (c *lcCounts) add(o history.Op) {
	if !o.IsClient() {
		if o.Process == history.Nemesis && (o.F == history.FPause || o.F == history.FKill) {
			c.faults++
		}
		return
	}
	if o.Type == history.Info {
		c.infoOps++
	}
	switch {
	case o.F == history.FWrite && o.Type == history.Ok:
		c.writes++
	case o.F == history.FWrite && o.Type == history.Info:
		c.infoWrites++
	case o.F == history.FWrite && o.Type == history.Fail && o.Error == history.ErrStaleFence:
		c.rejected++
	}
}

// lockCounter is LockCounter's result from what the Stream kept, with w
// the counter walk over its calls (for the reads that prove a write of
// unknown outcome took effect).
func (s *Stream) lockCounter(initial int64, w *counterWalk) (r Result) {
	const name = "lock-counter"
	defer recovered(name, &r)
	r.Name, r.Valid = name, Valid // until the check finds otherwise
	c, secs, pauses := s.counts, s.secs.secs, s.pauses.pauses

	f := LockCounterFigures{
		Writes: int64(c.writes), InfoWrites: int64(c.infoWrites + s.unfinished),
		StaleRejected: int64(c.rejected), Pauses: int64(len(pauses)), Faults: int64(c.faults), InfoOps: int64(c.infoOps),
		Sections: int64(len(secs)),
	}
	overlapping, pairs := overlaps(secs, mayHaveWritten)
	f.Overlapping = int64(overlapping)
	lockOverlapping, _ := overlaps(secs, anySection)
	f.LockOverlapping = int64(lockOverlapping)
	for _, sec := range secs {
		if sec.LeaseNS > 0 {
			f.LeasedSections++
		}
		if sec.LeaseNS > 0 && sec.WriteType == history.Ok && sec.WriteInv > sec.Start+sec.LeaseNS {
			f.LateWrites++
		}
	}
	stale := staleWrites(secs)
	violations, examples := fenceOrder(secs)
	f.FenceViolations = int64(violations)

	switch {
	case s.bad > 0:
		// A write whose value cannot be read may have landed or not: the
		// bounds would leave it out.
		r.Valid = Unknown
		r.Explanation = fmt.Sprintf("%d ops cannot be read as %s ops, so lost updates cannot be counted; first: %s", s.bad, ModelLockCounter, s.firstBad)
	case s.finalRead < 0:
		r.Valid = Unknown
		r.Explanation = "the history has no final read of the counter, so lost updates cannot be counted"
	default:
		f.Counted, f.Final = true, s.calls.get(s.finalRead).value
		b := w.lostBounds(s.finalRead, f.Final)
		f.LostMin, f.LostMax, f.ProvenWrites = b.lo, b.hi, int64(b.proven)
		rise := f.Final - initial
		switch {
		case b.lo > 0:
			r.Valid = Invalid
			r.Explanation = s.lostWords(b, f.Writes, rise)
		case rise > f.Writes+f.InfoWrites:
			r.Valid = Invalid
			r.Explanation = fmt.Sprintf("the counter rose by %d, more than the %d writes that may have happened", rise, f.Writes+f.InfoWrites)
		}
	}
	if violations > 0 {
		r.Valid = Invalid
		if r.Explanation != "" {
			r.Explanation += "; "
		}
		r.Explanation += fmt.Sprintf("%d accepted %s carried a fence no larger than one accepted before them",
			violations, plural(int64(violations), "write", "writes"))
	}
	if r.Valid == Invalid && len(stale) > 0 {
		r.Explanation += "; first stale write: " + describeStale(stale[0], pauses)
	}
	r.lockCounter = &f
	r.Fields = append(f.fields(),
		Field{"stale-writes", staleEvidence(stale, pauses)},
		Field{"overlaps", pairs},
		Field{"fence-violation-examples", examples},
	)
	return r
}

// lostWords says how many updates the history proves lost and how many it
// may have lost, from b, the writes acknowledged and the counter's rise.
func (s *Stream) lostWords(b lostBound, writes, rise int64) string {
	ok, lo, hi := int64(b.ok), b.lo, b.hi
	acked := fmt.Sprintf("%d successful %s", ok, plural(ok, "write", "writes"))
	if ok < writes {
		acked += " completed before the final read"
	}
	moved := fmt.Sprintf("the counter rose by %d", rise)
	if rise < 0 {
		moved = fmt.Sprintf("the counter fell by %d", -rise)
	}
	var msg string
	if b.proven == 0 {
		msg = fmt.Sprintf("%s, but %s: ", acked, moved)
	} else {
		msg = fmt.Sprintf("%s, and %d of unknown outcome that reads prove took effect (%s), but %s: ",
			acked, b.proven, s.describeProof(b.first), moved)
	}
	if hi > lo {
		return msg + fmt.Sprintf("at least %d %s lost, at most %d", lo, plural(lo, "update", "updates"), hi)
	}
	return msg + fmt.Sprintf("%d %s lost", lo, plural(lo, "update", "updates"))
}

// order returns the indexes of the sections keep accepts, sorted stably by
// key. The figures sort these, 4 bytes a section, not copies of the
// Sections, 96 bytes each: at 250,000 sections the copies were 107 MB of
// the check's 130 MB (go test -memprofile on a Stream's Check).
func order(secs []Section, keep func(*Section) bool, key func(*Section) int64) []int32 {
	var idx []int32
	for i := range secs {
		if keep(&secs[i]) {
			idx = append(idx, int32(i))
		}
	}
	slices.SortStableFunc(idx, func(a, b int32) int { return cmp.Compare(key(&secs[a]), key(&secs[b])) })
	return idx
}

func okWrite(s *Section) bool        { return s.WriteType == history.Ok }
func byStart(s *Section) int64       { return s.Start }
func byWriteInv(s *Section) int64    { return s.WriteInv }
func byWriteEnd(s *Section) int64    { return s.WriteEnd }
func fencedWrite(s *Section) bool    { return s.WriteType == history.Ok && s.Fence > 0 }
func anySection(*Section) bool       { return true }
func mayHaveWritten(s *Section) bool { return s.wrote() }

// overlaps counts the sections (among those keep accepts) whose interval
// strictly intersects another's, and lists the first pairs as [index index]
// of their acquires.
func overlaps(secs []Section, keep func(*Section) bool) (int, []any) {
	ss := order(secs, keep, byStart)
	marked := make([]bool, len(ss))
	var pairs []any
	// active holds the sections that may still overlap a later start; with a
	// lock that works it never holds more than one.
	var active []int
	for i, si := range ss {
		s := &secs[si]
		kept := active[:0]
		for _, j := range active {
			if secs[ss[j]].End > s.Start {
				kept = append(kept, j)
			}
		}
		active = kept
		for _, j := range active {
			if o := &secs[ss[j]]; s.Start < o.End && o.Start < s.End {
				marked[i], marked[j] = true, true
				if len(pairs) < evidenceLimit {
					pairs = append(pairs, []any{o.Acquire, s.Acquire})
				}
			}
		}
		active = append(active, i)
	}
	n := 0
	for _, m := range marked {
		if m {
			n++
		}
	}
	return n, pairs
}

// A staleWrite is a successful write sent after the counter had already
// reached its value: it clobbered the updates in between.
type staleWrite struct {
	Section
	top   int64 // the highest value written before it was sent
	other int64 // index of the earlier write of the same value; -1 if none
}

// staleWrites returns the first stale writes among secs, in the order they
// were sent: the evidence keeps evidenceLimit of them and the explanation
// the first, and a lock that fails outright would make the rest as many as
// its writes.
func staleWrites(secs []Section) []staleWrite {
	byInv, byEnd := order(secs, okWrite, byWriteInv), order(secs, okWrite, byWriteEnd)
	var out []staleWrite
	top, k := int64(math.MinInt64), 0
	for _, i := range byInv {
		s := &secs[i]
		for ; k < len(byEnd) && secs[byEnd[k]].WriteEnd < s.WriteInv; k++ {
			top = max(top, secs[byEnd[k]].WriteValue)
		}
		if s.WriteValue <= top {
			out = append(out, staleWrite{Section: *s, top: top, other: -1})
			if len(out) == evidenceLimit {
				break
			}
		}
	}
	// The earlier write of a stale write's value is the first of that value
	// to complete, if it completed before the stale one was sent. Only the
	// stale values kept are looked for: a map of every value would be as
	// large as the history.
	first := map[int64]int32{} // value -> index into secs, -1 until found
	for _, sw := range out {
		first[sw.WriteValue] = -1
	}
	for _, i := range byEnd {
		if j, want := first[secs[i].WriteValue]; want && j < 0 {
			first[secs[i].WriteValue] = i
		}
	}
	for n := range out {
		if j := first[out[n].WriteValue]; j >= 0 && secs[j].WriteEnd < out[n].WriteInv {
			out[n].other = secs[j].Write
		}
	}
	return out
}

// fenceOrder counts the accepted writes that began after another had been
// accepted and carried a fence no larger than it, and gives the first as
// [earlier later] write indexes.
func fenceOrder(secs []Section) (n int, examples []any) {
	byInv, byEnd := order(secs, fencedWrite, byWriteInv), order(secs, fencedWrite, byWriteEnd)
	var top *Section // the accepted write of the highest fence completed so far
	k := 0
	for _, i := range byInv {
		s := &secs[i]
		for ; k < len(byEnd) && secs[byEnd[k]].WriteEnd < s.WriteInv; k++ {
			if e := &secs[byEnd[k]]; top == nil || e.Fence > top.Fence {
				top = e
			}
		}
		if top != nil && s.Fence <= top.Fence {
			n++
			if len(examples) < evidenceLimit {
				examples = append(examples, []any{top.Write, s.Write})
			}
		}
	}
	return n, examples
}

func pauseDuring(s Section, pauses []Pause) (Pause, bool) {
	for _, p := range pauses {
		if p.Process == s.Process && p.Start < s.WriteInv && p.End > s.Start {
			return p, true
		}
	}
	return Pause{}, false
}

func describeStale(s staleWrite, pauses []Pause) string {
	msg := fmt.Sprintf("op %d (process %v) wrote %d after reading %d", s.Write, s.Process, s.WriteValue, s.Read)
	if s.other >= 0 {
		msg += fmt.Sprintf(", but op %d had already written %d", s.other, s.WriteValue)
	}
	msg += fmt.Sprintf(" and the counter had reached %d", s.top)
	if p, ok := pauseDuring(s.Section, pauses); ok {
		msg += fmt.Sprintf("; process %v was paused (%s, nemesis op %d) for %d ms while holding a %d ms lease",
			s.Process, p.Kind, p.Index, (p.End-p.Start)/1e6, s.LeaseNS/1e6)
	} else if s.LeaseNS > 0 && s.WriteInv > s.Start+s.LeaseNS {
		msg += fmt.Sprintf("; it was sent %d ms after the acquire, past its %d ms lease",
			(s.WriteInv-s.Start)/1e6, s.LeaseNS/1e6)
	}
	return msg
}

func staleEvidence(stale []staleWrite, pauses []Pause) []any {
	var out []any
	for _, s := range stale {
		if len(out) == evidenceLimit {
			break
		}
		m := map[history.Keyword]any{
			"write": s.Write, "process": int64(s.Process), "read": s.Read, "value": s.WriteValue,
			"counter-was": s.top, "held-ms": (s.WriteEnd - s.Start) / 1e6,
		}
		if s.other >= 0 {
			m["same-value-as"] = s.other
		}
		if p, ok := pauseDuring(s.Section, pauses); ok {
			m["pause"] = p.Index
		}
		out = append(out, m)
	}
	return out
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
