package checker

import (
	"cmp"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
)

// sectionRun is the number of sections a sorted run holds on disk: 6.5 MB.
const sectionRun = 1 << 16

// A sectionSet is a Stream's critical sections, in the orders the figures
// read them: every section by its start, and the sections whose write was
// acknowledged by the write's invocation and by its completion (ties, in
// each, in the order the acquires completed). Past a run of them they go
// to disk, as the counter operations do.
//
// In memory, the order by invocation is an index into byStart (inv), not
// a second copy of every Section: 28 MB less to touch at 250,000 sections.
// Once the set spills, byInv holds the sections in that order, as the
// other lists do.
type sectionSet struct {
	byStart, byInv  *sortedList[Section]
	byEnd           *sortedList[writeEnd]
	listed          bool    // byInv holds the sections (the set spilled)
	inv             []int32 // after done, in memory: byStart's acknowledged writes, by invocation
	n, leased, late int
	finished        bool  // done was called
	err             error // done's
}

// A writeEnd is what the figures read of an acknowledged write in the
// order of completions: a quarter of its Section.
type writeEnd struct {
	end, value, fence, write, seq int64
}

var writeEndCodec = codec[writeEnd]{
	words: 5,
	put: func(w []int64, e writeEnd) {
		w[0], w[1], w[2], w[3], w[4] = e.end, e.value, e.fence, e.write, e.seq
	},
	get: func(w []int64) writeEnd {
		return writeEnd{end: w[0], value: w[1], fence: w[2], write: w[3], seq: w[4]}
	},
}

// sectionCodec writes a section's times from its start and its values from
// its read, which its neighbours in a run share less than the differences.
var sectionCodec = codec[Section]{
	words: 13,
	put: func(w []int64, s Section) {
		flags := int64(s.WriteType) << 1
		if s.WriteResolved {
			flags |= 1
		}
		w[0], w[1], w[2], w[3], w[4] = int64(s.Process), s.Acquire, s.Start, s.End-s.Start, s.LeaseNS
		w[5], w[6], w[7], w[8], w[9] = s.Fence, s.Read, s.Write-s.Acquire, s.WriteInv-s.Start, s.WriteEnd-s.Start
		w[10], w[11], w[12] = flags, s.WriteValue-s.Read, s.seq
	},
	get: func(w []int64) Section {
		return Section{Process: history.Process(w[0]), Acquire: w[1], Start: w[2], End: w[3] + w[2],
			LeaseNS: w[4], Fence: w[5], Read: w[6], Write: w[7] + w[1], WriteInv: w[8] + w[2],
			WriteEnd: w[9] + w[2], WriteType: history.Type(w[10] >> 1), WriteValue: w[11] + w[6], seq: w[12],
			WriteResolved: w[10]&1 != 0}
	},
}

// sectionOrder orders sections by key, then in the order their acquires
// completed.
func sectionOrder(key func(*Section) int64) func(a, b Section) int {
	return func(a, b Section) int { return cmp.Or(cmp.Compare(key(&a), key(&b)), cmp.Compare(a.seq, b.seq)) }
}

// newSectionSet returns an empty set, in memory until it spills; run,
// when not 0, is the sections a sorted run on disk holds.
func newSectionSet(run int) sectionSet {
	run = cmp.Or(run, sectionRun)
	list := func(key func(*Section) int64) *sortedList[Section] {
		return newSortedList(sectionCodec, sectionOrder(key), false, run)
	}
	byEnd := func(a, b writeEnd) int { return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.seq, b.seq)) }
	return sectionSet{
		byStart: list(func(s *Section) int64 { return s.Start }),
		byInv:   list(func(s *Section) int64 { return s.WriteInv }),
		byEnd:   newSortedList(writeEndCodec, byEnd, false, 4*run),
	}
}

// spill moves the lists to disk. byInv goes first, and takes the sections
// a run at a time, so that they are never in memory twice.
func (ss *sectionSet) spill() {
	if !ss.listed {
		ss.listed = true
		ss.byInv.spill()
		for _, s := range ss.byStart.mem {
			if s.WriteType == history.Ok {
				ss.byInv.add(s)
			}
		}
	}
	ss.byStart.spill()
	ss.byEnd.spill()
}

// atRoom reports whether a list in memory is at its capacity: the next
// section grows it.
func (ss *sectionSet) atRoom() bool {
	return len(ss.byStart.mem) == cap(ss.byStart.mem) || len(ss.byEnd.mem) == cap(ss.byEnd.mem)
}

// grow makes room for n sections more in memory.
func (ss *sectionSet) grow(n int) {
	ss.byStart.reserve(n)
	ss.byEnd.reserve(n)
}

// add takes a section once it is closed.
func (ss *sectionSet) add(s Section) {
	ss.n++
	if s.LeaseNS > 0 {
		ss.leased++
	}
	if s.LeaseNS > 0 && s.WriteType == history.Ok && s.WriteInv > s.Start+s.LeaseNS {
		ss.late++
	}
	ss.byStart.add(s)
	if s.WriteType == history.Ok && ss.listed {
		ss.byInv.add(s)
	}
	if s.WriteType == history.Ok && !s.WriteResolved {
		// A resolved write completed at no known time: before no one.
		ss.byEnd.add(writeEnd{end: s.WriteEnd, value: s.WriteValue, fence: s.Fence, write: s.Write, seq: s.seq})
	}
}

// done ends the adding; the lists can then be read, as often as needed,
// and from goroutines at once. Called again, it only reads.
func (ss *sectionSet) done() error {
	if !ss.finished {
		ss.finished, ss.err = true, cmp.Or(ss.byStart.done(), ss.byInv.done(), ss.byEnd.done())
		if ss.err == nil && !ss.listed {
			ss.index()
		}
	}
	return ss.err
}

// index orders byStart's acknowledged writes, in memory and sorted, by
// invocation. 2^31 sections in memory would be 240 GB of them: int32
// indexes are enough.
func (ss *sectionSet) index() {
	secs := ss.byStart.mem
	ss.inv = make([]int32, 0, len(secs))
	for i := range secs {
		if secs[i].WriteType == history.Ok {
			ss.inv = append(ss.inv, int32(i))
		}
	}
	// Sections come nearly in this order already, which pdqsort finds. The
	// order is sectionOrder's, by pointer: a Section is 112 bytes.
	slices.SortFunc(ss.inv, func(a, b int32) int {
		x, y := &secs[a], &secs[b]
		return cmp.Or(cmp.Compare(x.WriteInv, y.WriteInv), cmp.Compare(x.seq, y.seq))
	})
}

// invIter reads the acknowledged writes by invocation: from byInv, or
// through the index.
type invIter struct {
	listed bool
	list   listIter[Section]
	secs   []Section
	inv    []int32
}

// byInvocation returns an iterator of the acknowledged writes by
// invocation; the set must be done.
func (ss *sectionSet) byInvocation() invIter {
	if ss.listed {
		return invIter{listed: true, list: ss.byInv.iter()}
	}
	return invIter{secs: ss.byStart.mem, inv: ss.inv}
}

// next returns the next section. An I/O error panics with a spillError.
func (it *invIter) next() (Section, bool) {
	if it.listed {
		return it.list.next()
	}
	if len(it.inv) == 0 {
		return Section{}, false
	}
	s := it.secs[it.inv[0]]
	it.inv = it.inv[1:]
	return s, true
}

func (ss *sectionSet) close() {
	ss.byStart.close()
	ss.byInv.close()
	ss.byEnd.close()
}

// sectionOf finds the critical section of process p that holds time t:
// of several (a history whose times are partly missing), the first to
// begin, as the sections come in the order the acquires completed. An I/O
// error of the list panics with a spillError: a partial list would name
// the wrong section, or none.
func (ss *sectionSet) sectionOf(p history.Process, t int64) (Section, bool) {
	if ss.byStart.err != nil {
		panic(spillError{ss.byStart.err})
	}
	var best Section
	found := false
	for it := ss.byStart.iter(); ; {
		s, ok := it.next()
		if !ok || s.Start > t {
			return best, found
		}
		if s.Process == p && t <= s.End && (!found || s.seq < best.seq) {
			best, found = s, true
		}
	}
}

// SectionFlags are what the lock-counter check found of one critical
// section, for a picture of the history: the timeline colours a section by
// them, so that it shows what the check counted and named.
type SectionFlags struct {
	// Seq is the section's number, from 0, in the order the acquires
	// completed.
	Seq int
	// Stale: its acknowledged write was sent when the counter had already
	// reached CounterWas, at or above the value it wrote.
	Stale      bool
	CounterWas int64
	// Lost: its acknowledged write is the earlier write of a stale write's
	// value, whose update the stale write lost.
	Lost bool
	// Overlap: it overlapped another section that may have written.
	Overlap bool
	// Late: its acknowledged write was sent after its lease had expired.
	Late bool
}

// FlagSections asks Check to note the flags of the sections numbered lo
// to hi-1; Flagged returns them. Call it before Check.
func (s *Stream) FlagSections(lo, hi int) { s.flagLo, s.flagHi = int64(lo), int64(hi) }

// Flagged returns, after Check, the sections of the range FlagSections
// asked for that the check flagged, in order.
func (s *Stream) Flagged() []SectionFlags {
	out := make([]SectionFlags, 0, len(s.flags))
	for _, f := range s.flags {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b SectionFlags) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// A flagger notes the flags of the sections in a range.
type flagger struct {
	lo, hi int64
	flags  map[int64]*SectionFlags
}

// flagger returns the Stream's flagger, or nil when no range was asked for.
func (s *Stream) flagger() *flagger {
	if s.flagHi <= s.flagLo {
		return nil
	}
	if s.flags == nil {
		s.flags = map[int64]*SectionFlags{}
	}
	return &flagger{lo: s.flagLo, hi: s.flagHi, flags: s.flags}
}

func (fl *flagger) in(seq int64) bool { return seq >= fl.lo && seq < fl.hi }

// note adds f to the flags of the section seq, when it is in the range.
func (fl *flagger) note(seq int64, f SectionFlags) {
	if !fl.in(seq) {
		return
	}
	g := fl.flags[seq]
	if g == nil {
		g = &SectionFlags{Seq: int(seq)}
		fl.flags[seq] = g
	}
	g.Stale, g.Lost, g.Overlap, g.Late = g.Stale || f.Stale, g.Lost || f.Lost, g.Overlap || f.Overlap, g.Late || f.Late
	if f.Stale {
		g.CounterWas = f.CounterWas
	}
}
