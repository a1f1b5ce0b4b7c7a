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
	// WriteResolved: the write's :ok came after the fact (:resolved, from
	// the run's audit table), so WriteEnd is its :info's time, not when it
	// landed, which may be later.
	WriteResolved bool
	seq           int64 // its number, from 0, in the order the acquires completed
}

// wrote reports whether the section's write may have changed the counter.
func (s Section) wrote() bool { return s.WriteType == history.Ok || s.WriteType == history.Info }

// Sections extracts the critical sections of a lock-counter history, in the
// order their acquires completed. ops must be in history order.
func Sections(ops []history.Op) []Section {
	var secs []Section
	b := sectionBuilder{emit: func(s Section) { secs = append(secs, s) }}
	for _, o := range ops {
		b.add(o)
	}
	b.finish()
	slices.SortFunc(secs, func(a, b Section) int { return cmp.Compare(a.seq, b.seq) })
	return secs
}

// A sectionBuilder extracts sections one op at a time, the one extraction
// that LockCounter and the streaming check both use: it hands each section
// to emit once it is closed (released, or its process retired by an
// :info), and the ones never closed at finish.
type sectionBuilder struct {
	emit func(Section)
	open history.ProcessMap[*Section]
	free []*Section // closed, for the next sections: millions of them need no allocation each
	n    int64      // sections begun
}

func (b *sectionBuilder) add(o history.Op) {
	if !o.IsClient() {
		return
	}
	s, ok := b.open.Get(o.Process)
	switch {
	case o.F == history.FAcquire && o.Type == history.Ok:
		if ok {
			b.close(o.Process) // an acquire in a section: the section is over
		}
		if n := len(b.free); n > 0 {
			s, b.free = b.free[n-1], b.free[:n-1]
		} else {
			s = new(Section)
		}
		*s = Section{Process: o.Process, Acquire: o.Index, Start: o.Time, End: o.Time, Read: -1, Write: -1, seq: b.n}
		b.n++
		if ms, ok := history.Int(o.Get(history.KeyLeaseMS)); ok {
			s.LeaseNS = ms * 1e6
		}
		if f, ok := history.Int(o.Get(history.KeyFence)); ok {
			s.Fence = f
		}
		b.open.Set(o.Process, s)
		return
	case !ok:
		// Ops outside a section (a failed acquire, the final read).
		return
	case o.F == history.FRead && o.Type == history.Ok:
		if v, ok := history.Int(o.Value); ok {
			s.Read = v
		}
		s.End = o.Time
	case history.IsWrite(o.F) && o.Type == history.Invoke:
		s.WriteInv = o.Time
		if v, ok := history.Int(o.Value); ok {
			s.WriteValue = v
		}
		s.End = o.Time
	case history.IsWrite(o.F):
		s.Write, s.WriteEnd, s.WriteType, s.WriteResolved = o.Index, o.Time, o.Type, resolvedLate(o)
		s.End = o.Time
	case o.F == history.FRelease && o.Type == history.Invoke:
		s.End = o.Time
	case o.F == history.FRelease:
		b.close(o.Process)
		return
	default:
		s.End = o.Time
	}
	if o.Type == history.Info {
		b.close(o.Process) // an :info retires the process
	}
}

func (b *sectionBuilder) close(p history.Process) {
	s, _ := b.open.Get(p)
	b.emit(*s)
	b.open.Delete(p)
	b.free = append(b.free, s)
}

// finish hands over the sections never closed, in the order they began.
func (b *sectionBuilder) finish() {
	open := make([]*Section, 0, b.open.Len())
	for _, s := range b.open.All() {
		open = append(open, s)
	}
	slices.SortFunc(open, func(x, y *Section) int { return cmp.Compare(x.seq, y.seq) })
	for _, s := range open {
		b.close(s.Process)
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
// streaming check alike: the faults that froze a process (a :pause of the
// value's :process), paired as history.FaultPairer pairs them.
type pauseBuilder struct {
	pauses []Pause
	pairs  history.FaultPairer
	last   int64 // the latest :time seen
}

func (b *pauseBuilder) add(o history.Op) {
	b.last = max(b.last, o.Time)
	e, ok := history.ReadFaultEvent(o)
	// A process the history numbers below 0 is named by its number in no
	// event's value (the Reader numbers them): its pause is of no process
	// the checks know. A pause that failed to begin froze no one.
	if !ok || e.Process < 0 || e.Failed || e.F != history.FPause && e.F != history.FResume {
		return
	}
	if i := b.pairs.Add(len(b.pauses), e); i >= 0 {
		b.pauses[i].End = o.Time
	}
	if e.Begin {
		b.pauses = append(b.pauses, Pause{Index: o.Index, Process: history.Process(e.Process), Kind: e.Kind, Start: o.Time, End: -1})
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
	s := newStream(0, 0)
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
	writes, infoWrites, rejected, changed, infoOps, faults int
}

// add counts o.
func (c *lcCounts) add(o history.Op) {
	if !o.IsClient() {
		if e, ok := history.ReadFaultEvent(o); ok && e.Begin && !e.Failed {
			c.faults++
		}
		return
	}
	if o.Type == history.Info && !o.Process.IsRenewer() {
		c.infoOps++ // the workers' ops: a lock's own renewals are not theirs
	}
	switch {
	case history.IsWrite(o.F) && o.Type == history.Ok:
		c.writes++
	case history.IsWrite(o.F) && o.Type == history.Info:
		c.infoWrites++
	case o.Type == history.Fail && o.Error == history.ErrStaleFence && (history.IsWrite(o.F) || o.F == history.FRead):
		c.rejected++
	case history.IsWrite(o.F) && o.Type == history.Fail && o.Error == history.ErrChanged:
		c.changed++
	}
}

// lockCounter is LockCounter's result from what the Stream kept, with w
// the counter walk over its calls (for the reads that prove a write of
// unknown outcome took effect).
func (s *Stream) lockCounter(initial int64, w *counterWalk) (r Result) {
	const name = "lock-counter"
	defer recovered(name, &r)
	r.Name, r.Valid = name, Valid // until the check finds otherwise
	secs, pauses, fl := &s.secs, s.pauses.pauses, s.flagger()
	if err := secs.done(); err != nil {
		return Result{Name: name, Valid: Unknown, Explanation: err.Error()}
	}
	f, pairs := s.sectionFigures(s.unfinished, fl)
	stale, violations, examples := secs.writes(fl)
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
		r.Explanation += "; first stale write: " + s.describeStale(stale[0], pauses)
		r.blame = []blame{{stale[0].Process, stale[0].WriteInv}}
	}
	r.lockFigures = &f
	r.Fields = append(f.fields(),
		Field{"stale-writes", staleEvidence(stale, pauses)},
		Field{"overlaps", pairs},
		Field{"fence-violation-examples", examples},
	)
	return r
}

// sectionFigures are the figures of the lock's sections that every
// streamed model's result carries, with the first pairs of the sections
// that may have written and overlap another; unfinished are the writes
// that never completed, and fl, if not nil, is told of each overlap. The
// sections must be done (sectionSet.done).
func (s *Stream) sectionFigures(unfinished int, fl *flagger) (LockFigures, []any) {
	c, secs := s.counts, &s.secs
	f := LockFigures{
		Writes: int64(c.writes), InfoWrites: int64(c.infoWrites + unfinished),
		StaleRejected: int64(c.rejected), ChangeRejected: int64(c.changed), Pauses: int64(len(s.pauses.pauses)), Faults: int64(c.faults), InfoOps: int64(c.infoOps),
		Sections: int64(secs.n), LeasedSections: int64(secs.leased), LateWrites: int64(secs.late),
	}
	written, any := overlapSweep{keep: mayHaveWritten, fl: fl}, overlapSweep{keep: anySection}
	secs.eachByStart(written.add, any.add)
	overlapping, pairs := written.end()
	lockOverlapping, _ := any.end()
	f.Overlapping, f.LockOverlapping = int64(overlapping), int64(lockOverlapping)
	return f, pairs
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

func anySection(*Section) bool       { return true }
func mayHaveWritten(s *Section) bool { return s.wrote() }

// An overlapSweep counts the sections (among those keep accepts) whose
// interval strictly intersects another's, and lists the first pairs as
// [index index] of their acquires; flag, if not nil, is told of each. It
// takes the sections in the order of their starts.
type overlapSweep struct {
	keep  func(*Section) bool
	fl    *flagger // told of each, if not nil
	n     int
	pairs []any
	// active holds the sections that may still overlap a later start, and
	// whether they overlapped one; with a lock that works it never holds
	// more than one.
	active []overlapEntry
}

type overlapEntry struct {
	Section
	marked bool
}

func (o *overlapSweep) add(s *Section) {
	if !o.keep(s) {
		return
	}
	kept := o.active[:0]
	for _, e := range o.active {
		if e.End > s.Start {
			kept = append(kept, e)
		} else {
			o.done(e)
		}
	}
	o.active = kept
	mark := false
	for j := range o.active {
		if e := &o.active[j]; s.Start < e.End && e.Start < s.End {
			mark, e.marked = true, true
			if len(o.pairs) < evidenceLimit {
				o.pairs = append(o.pairs, []any{e.Acquire, s.Acquire})
			}
		}
	}
	o.active = append(o.active, overlapEntry{*s, mark})
}

func (o *overlapSweep) done(e overlapEntry) {
	if e.marked {
		o.n++
		if o.fl != nil {
			o.fl.note(e.seq, SectionFlags{Overlap: true})
		}
	}
}

// end returns the count and the pairs.
func (o *overlapSweep) end() (int, []any) {
	for _, e := range o.active {
		o.done(e)
	}
	o.active = nil
	return o.n, o.pairs
}

// eachByStart calls each of fs with every section, in the order of their
// starts.
func (ss *sectionSet) eachByStart(fs ...func(*Section)) {
	// One s for all: fs take it by pointer, which made a section declared
	// in the loop one allocation each (26 MB at 250,000 sections). None
	// keeps the pointer.
	var s Section
	for it := ss.byStart.iter(); ; {
		var ok bool
		if s, ok = it.next(); !ok {
			return
		}
		for _, f := range fs {
			f(&s)
		}
	}
}

// A staleWrite is a successful write sent after the counter had already
// reached its value: it clobbered the updates in between.
type staleWrite struct {
	Section
	top   int64 // the highest value written before it was sent
	other int64 // index of the earlier write of the same value; -1 if none
}

// writes reads the acknowledged writes in the order they were sent, beside
// those completed by then, for the figures that compare the two:
//
//   - the first stale writes, in the order they were sent: the evidence
//     keeps evidenceLimit of them and the explanation the first (a lock
//     that fails outright would make the rest as many as its writes);
//   - fencing order: the count of accepted writes that began after another
//     had been accepted and carried a fence no larger than it, and the
//     first as [earlier later] write indexes.
//
// fl, if not nil, is told of every stale write and late write in its range,
// and of every write in it whose update a stale write lost.
func (ss *sectionSet) writes(fl *flagger) (stale []staleWrite, fenced int, examples []any) {
	// lost holds, for the value of each acknowledged write in fl's range,
	// the latest invocation of a stale write of that value: the earlier
	// write of the value lost its update if it completed before then. It
	// is as large as the range, not the history.
	var lost map[int64]int64
	if fl != nil {
		lost = map[int64]int64{}
		for it := ss.byEnd.iter(); ; {
			e, ok := it.next()
			if !ok {
				break
			}
			if fl.in(e.seq) {
				lost[e.value] = math.MinInt64
			}
		}
	}
	top := int64(math.MinInt64)
	var fenceTop writeEnd // the accepted write of the highest fence completed so far
	byEnd := ss.byEnd.iter()
	e, more := byEnd.next()
	for byInv := ss.byInvocation(); ; {
		s, ok := byInv.next()
		if !ok {
			break
		}
		for ; more && e.end < s.WriteInv; e, more = byEnd.next() {
			top = max(top, e.value)
			if e.fence > 0 && e.fence > fenceTop.fence {
				fenceTop = e
			}
		}
		if s.Fence > 0 && fenceTop.fence > 0 && s.Fence <= fenceTop.fence {
			fenced++
			if len(examples) < evidenceLimit {
				examples = append(examples, []any{fenceTop.write, s.Write})
			}
		}
		if fl != nil && s.LeaseNS > 0 && s.WriteInv > s.Start+s.LeaseNS {
			fl.note(s.seq, SectionFlags{Late: true})
		}
		if s.WriteValue > top {
			continue
		}
		if len(stale) < evidenceLimit {
			stale = append(stale, staleWrite{Section: s, top: top, other: -1})
		}
		if fl != nil {
			fl.note(s.seq, SectionFlags{Stale: true, CounterWas: top})
			if at, ok := lost[s.WriteValue]; ok {
				lost[s.WriteValue] = max(at, s.WriteInv)
			}
		}
	}
	ss.earlierWrites(stale, lost, fl)
	return stale, fenced, examples
}

// earlierWrites finds the earlier write of the value of each stale write
// of the evidence, and of each value of lost: the first of that value to
// complete, if it completed before the stale one was sent. Only those
// values are looked for: a map of every value would be as large as the
// history.
func (ss *sectionSet) earlierWrites(evidence []staleWrite, lost map[int64]int64, fl *flagger) {
	first := map[int64]*writeEnd{}
	for _, sw := range evidence {
		first[sw.WriteValue] = nil
	}
	for v, at := range lost {
		if at != math.MinInt64 {
			first[v] = nil
		}
	}
	if len(first) == 0 {
		return
	}
	for it := ss.byEnd.iter(); ; {
		e, ok := it.next()
		if !ok {
			break
		}
		if fw, want := first[e.value]; want && fw == nil {
			first[e.value] = &e
		}
	}
	for n, sw := range evidence {
		if fw := first[sw.WriteValue]; fw != nil && fw.end < sw.WriteInv {
			evidence[n].other = fw.write
		}
	}
	for v, at := range lost {
		if fw := first[v]; fw != nil && fw.end < at {
			fl.note(fw.seq, SectionFlags{Lost: true})
		}
	}
}

func pauseDuring(s Section, pauses []Pause) (Pause, bool) {
	for _, p := range pauses {
		if p.Process == s.Process && p.Start < s.WriteInv && p.End > s.Start {
			return p, true
		}
	}
	return Pause{}, false
}

// describeStale says what stale write st did, and what let its section
// lose the lock: a pause of its process, unless the lock's own renewals
// tell otherwise (renewalCause), else a write sent past its lease.
func (s *Stream) describeStale(st staleWrite, pauses []Pause) string {
	msg := fmt.Sprintf("op %d (process %v) wrote %d after reading %d", st.Write, st.Process, st.WriteValue, st.Read)
	if st.other >= 0 {
		msg += fmt.Sprintf(", but op %d had already written %d", st.other, st.WriteValue)
	}
	msg += fmt.Sprintf(" and the counter had reached %d", st.top)
	p, paused := pauseDuring(st.Section, pauses)
	var pause *Pause
	if paused {
		pause = &p
	}
	renewals := s.renewalCause(st.Section, pause)
	switch {
	case paused && renewals != "":
		msg += fmt.Sprintf("; process %v was paused (%s, nemesis op %d) for %d ms %s %d ms lease, but %s",
			st.Process, p.Kind, p.Index, (p.End-p.Start)/1e6, whileHolding, st.LeaseNS/1e6, renewals)
	case paused:
		msg += fmt.Sprintf("; process %v was paused (%s, nemesis op %d) for %d ms %s %d ms lease",
			st.Process, p.Kind, p.Index, (p.End-p.Start)/1e6, whileHolding, st.LeaseNS/1e6)
	case renewals != "":
		msg += fmt.Sprintf("; %s", renewals)
	case st.LeaseNS > 0 && st.WriteInv > st.Start+st.LeaseNS:
		msg += fmt.Sprintf("; it was sent %d ms after the acquire, past its %d ms lease",
			(st.WriteInv-st.Start)/1e6, st.LeaseNS/1e6)
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
