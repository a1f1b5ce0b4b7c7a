package checker

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
)

// ErrWholeHistory is returned by Stream.Check when the history cannot be
// checked from what a Stream keeps: a model other than lock-counter, the
// porcupine analyzer, or ops out of time order (a journal). Check the whole
// history with Check instead.
var ErrWholeHistory = errors.New("the check needs the whole history")

// A Stream takes a lock-counter history one op at a time and keeps only
// what the checks need of it: one Section per critical section, the pauses,
// a few counts, and one compact record per counter operation (a section's
// read and its write) — about 240 bytes a critical section, where its eight
// Ops with their maps take several times that. Check on a Stream gives
// exactly the results Check gives on the whole history; Check itself runs
// lock-counter histories through a Stream, so the two cannot drift apart.
//
// Add ops in history order, then call Check once.
type Stream struct {
	n         int
	timed     bool  // every op has a :time
	sorted    bool  // no op's :time is below the one before it
	lastTime  int64 // :time of the last op
	firstTime int64 // :time of the first op
	maxTime   int64 // the largest :time
	fs        fset
	// names holds the :index of each op whose :index is not its position
	// (Unset included); in a history a run writes there are none.
	names map[int]int64
	// fileDups, when not nil, are the ops that share an :index as the
	// history's file has them, where the Stream took them in another order
	// (a journal, sorted by time).
	fileDups *historyNote
	done     bool // Check has finished the open calls
	// memory is the bytes of records held in memory past which they go to
	// disk; 0 once they are there, or if they never go.
	memory int64
	// roomed: Grow made room for memory's worth of records, not more, so
	// the records go to disk when the room is used up.
	roomed bool

	// lists is the list-append check, from the first op that reads or
	// writes a list; nil in a history with none. The :ok reads before it
	// are not a list's: if a list op comes, they are ops it cannot read.
	lists           *listCheck
	scalarReads     int
	firstScalarRead string

	// What LockCounter reads.
	builder sectionBuilder
	secs    sectionSet
	pauses  pauseBuilder
	// The lock's own renewals, for the explanations.
	renewals renewalBuilder
	counts   lcCounts
	stats    stats
	// What the :ops-missing events of the run say.
	missing []string
	// The lock as the history tells it, and the lock server's record
	// beside it (SetRecord), matched to it by Check.
	locks          lockTracker
	record         *Record
	view           *recordView
	recordBad      int
	recordFirstBad string

	// The sections whose flags Check notes (FlagSections), and the flags.
	flagLo, flagHi int64
	flags          map[int64]*SectionFlags

	// The pairing of invocations with completions, as pairCalls does it.
	pairer        history.Pairer
	open          history.ProcessMap[openCall]
	problems      int
	firstProblems []string

	// The counter operations of the lock-counter model.
	calls       callStore
	maybe       int                       // writes among calls of unknown outcome
	sectionRead history.ProcessMap[int64] // the value the open section of each process read, until its write
	unfinished  int                       // writes that never completed
	finalRead   int                       // index into calls of the final read; -1 if none
	fails       int
	bad         int
	firstBad    string
	badAt       int // invocation position of the first bad op
}

// streamKeys are the extra keys of an op that a Stream reads (Op.Get); a
// Reader that feeds one keeps no other (openStream), which spares a map
// and a string an op. TestStreamKeys holds the list to the Gets.
func streamKeys() []history.Keyword {
	return []history.Keyword{history.KeyLeaseMS, history.KeyFence, history.KeyFinal, history.KeyResolved}
}

// recordStreamKeys are the extra keys of a history's ops that the checks
// of the lock server's record read beside streamKeys: a Reader feeding a
// Stream that has a record keeps them too.
func recordStreamKeys() []history.Keyword { return []history.Keyword{history.KeyToken} }

// recordKeys are the extra keys of the record's own events (readRecord),
// which are read whole, every key kept.
func recordKeys() []history.Keyword {
	return []history.Keyword{history.KeyKey, history.KeyToken, history.KeyWas, history.KeyClient, history.KeyCommand, history.KeyDeadline, history.KeyUntil, history.KeyGuess, history.KeyUncertainty, history.KeyExpiryGrain}
}

// An openCall is an invocation waiting for its completion.
type openCall struct {
	inv     int
	invTime int64
	process history.Process
	f       history.Keyword
	arg     any // the invocation's value
	value   any // the invocation's value, then an ok completion's
	fence   int64
	final   bool // a read marked :final (false for any other call)
	// Set by the completion.
	done     int
	doneTime int64
	typ      history.Type
	late     bool // a write's :ok resolved after the fact: see lcCall
}

// NewStream returns an empty Stream. Past about 32 MB of records (some
// 85,000 critical sections), it keeps them on disk, in unlinked temporary
// files under $TMPDIR that nothing outlives.
func NewStream() *Stream { return newStream(streamMemory, 0) }

// NewStreamMemory returns an empty Stream that keeps its records in about
// memory bytes (DefaultMemory when 0) before it moves them to disk. Where
// they are changes no result, only how fast and in how much memory.
func NewStreamMemory(memory int64) *Stream {
	if memory <= 0 {
		memory = DefaultMemory
	}
	return newStream(memory, 0)
}

// newStream returns an empty Stream that moves its records to disk once
// they would take more than memory bytes; memory 0 keeps them in memory,
// for the checks that need them all there (porcupine, the drawing). run,
// when not 0, is the records a sorted run on disk holds (tests make it
// tiny).
func newStream(memory int64, run int) *Stream {
	s := &Stream{
		timed: true, sorted: true, fs: fset{}, names: map[int]int64{},
		badAt: -1, finalRead: -1,
		memory: memory,
		calls:  callStore{runSize: run},
		secs:   newSectionSet(run),
		locks:  newLockTracker(),
	}
	s.builder.emit = s.secs.add
	return s
}

// Grow makes room for a history of about n ops more, as strings.Builder's
// Grow does: a caller that knows the size of a history (from its file's,
// say) spares the Stream copying what it keeps as it grows. It makes room
// up to the Stream's memory, past which the records go to disk; room that
// is never used costs address space, not memory (but for the rest of a
// huge page, 2 MiB at most a list: see hugePages).
func (s *Stream) Grow(n int) {
	// A critical section is eight ops, and makes one Section and two
	// counter operations, its read and its write.
	calls, secs := n/4, n/8
	if s.memory > 0 {
		fit := int(s.memory / (2*callBytes + sectionBytes)) // sections
		s.roomed = calls > 2*fit || secs > fit
		calls, secs = min(calls, 2*fit), min(secs, fit)
	}
	if s.calls.file == nil {
		s.calls.mem = grow(s.calls.mem, calls)
		s.secs.grow(secs)
	}
}

// spillIfFull moves the records to disk once they outgrow the Stream's
// memory, or the room Grow made for the memory's worth: grown by append,
// a list would take a quarter more and leave the collector its old self
// (49 MB of calls at 2,500,000 sections, with the heap at its limit).
func (s *Stream) spillIfFull() {
	if s.memory <= 0 {
		return
	}
	full := int64(s.calls.len())*callBytes+int64(s.secs.n)*sectionBytes >= s.memory
	if !full && !(s.roomed && s.atRoom()) {
		return
	}
	if !s.calls.spill() {
		s.memory = 0 // nowhere to put them: the check goes on in memory
		return
	}
	s.secs.spill()
	s.memory = 0 // on disk now, for good
}

// atRoom reports whether a list of records in memory is at its capacity:
// the next record grows it.
func (s *Stream) atRoom() bool {
	return len(s.calls.mem) == cap(s.calls.mem) || s.secs.atRoom()
}

// Ops returns the number of ops added.
func (s *Stream) Ops() int { return s.n }

// Add takes the next op of the history.
func (s *Stream) Add(o history.Op) {
	i := s.n
	s.n++
	if o.Index != int64(i) {
		s.names[i] = o.Index
	}
	if o.Time == history.Unset {
		s.timed = false
	}
	if i == 0 {
		s.firstTime = o.Time
	}
	if i > 0 && o.Time < s.lastTime {
		s.sorted = false
	}
	s.lastTime = o.Time
	s.maxTime = max(s.maxTime, o.Time)
	if o.IsClient() {
		s.fs[o.F] = true
		if s.lists == nil && listOp(o) {
			s.lists = newListCheck()
			s.lists.bad, s.lists.firstBad = s.scalarReads, s.firstScalarRead
		}
		if s.lists != nil {
			s.lists.add(s.id(i), o)
		} else if o.F == history.FRead && o.Type == history.Ok {
			s.scalarRead(i, o)
		}
	}
	s.builder.add(o)
	s.pauses.add(o)
	s.renewals.add(i, o)
	s.counts.add(o)
	var sec *Section
	if o.F == history.FAcquire && o.Type == history.Ok && o.IsClient() {
		sec, _ = s.builder.open.Get(o.Process) // the section it began
	}
	s.locks.add(&o, sec)
	s.stats.add(o)
	if m, ok := opsMissing(o); ok {
		s.missing = append(s.missing, m)
	}
	if o.IsClient() {
		s.pair(i, o)
	}
	s.spillIfFull()
}

// scalarRead notes an :ok read at position i before any list op.
func (s *Stream) scalarRead(i int, o history.Op) {
	s.scalarReads++
	if s.firstScalarRead == "" {
		s.firstScalarRead = unreadableWords(s.id(i), o, readWant)
	}
}

// pair follows pairCalls, and hands each call to addCall once it is
// complete or can no longer complete.
func (s *Stream) pair(i int, o history.Op) {
	done, abandoned, problem := s.pairer.Add(i, o)
	invF := func(int) history.Keyword { c, _ := s.open.Get(o.Process); return c.f }
	if msg := pairProblem(problem, o, invF, s.name); msg != "" {
		s.problem(msg)
	}
	if abandoned >= 0 {
		c, _ := s.open.Get(o.Process)
		c.done, c.typ = -1, history.Info
		s.addCall(&c) // it never completes now
	}
	if o.Type == history.Invoke {
		var fence int64
		if o.F == history.FWrite {
			fence, _ = history.Int(o.Get(history.KeyFence))
			fence = max(fence, 0) // a fence of 0 or less is none: INCR never hands one out
		}
		// An extra key is looked up only for the calls that read it (a
		// read's :final, a write's :resolved): the lookups were a fifth of
		// Stream.Add.
		s.open.Set(o.Process, openCall{inv: i, invTime: o.Time, process: o.Process, f: o.F, arg: o.Value,
			value: o.Value, fence: fence, final: o.F == history.FRead && o.Get(history.KeyFinal) == true})
		return
	}
	if done < 0 {
		return
	}
	c, _ := s.open.Get(o.Process)
	c.done, c.doneTime, c.typ = i, o.Time, o.Type
	if o.Type == history.Ok {
		c.value = o.Value
		c.late = c.f == history.FWrite && resolvedLate(o)
	}
	c.final = c.final || c.f == history.FRead && o.Get(history.KeyFinal) == true
	s.open.Delete(o.Process)
	s.addCall(&c)
}

func (s *Stream) problem(msg string) {
	s.problems++
	if len(s.firstProblems) < evidenceLimit {
		s.firstProblems = append(s.firstProblems, msg)
	}
}

// addCall makes a completed call (or one that can no longer complete) a
// counter operation of the model: every :ok read is one; a write is one
// unless it failed, and carries its section's read. Calls of one process
// arrive in the order of their invocations, which is all that matters: the
// records are sorted later.
func (s *Stream) addCall(c *openCall) {
	switch c.f {
	case history.FAcquire, history.FRelease:
		s.sectionRead.Delete(c.process)
	case history.FRead:
		if c.typ != history.Ok {
			s.sectionRead.Delete(c.process)
			return
		}
		v, ok := history.Int(c.value)
		if !ok {
			s.badOp(c.inv, fmt.Sprintf("%s: read %s, not an integer", s.name(c.done), canon(c.value)))
			return
		}
		i := s.calls.add(lcCall{inv: c.inv, done: c.done, call: c.invTime, ret: c.doneTime, value: v, process: c.process})
		if c.final {
			s.finalRead = i
		} else {
			s.sectionRead.Set(c.process, v)
		}
	case history.FWrite:
		from, read := s.sectionRead.Get(c.process) // kept for a second write of the section, which read it too
		if c.typ == history.Fail {
			s.fails++
			return
		}
		if c.done < 0 {
			s.unfinished++
		}
		v, ok := history.Int(c.arg) // what was asked; a completion need not repeat it
		if !ok {
			s.badOp(c.inv, fmt.Sprintf("%s: wrote %s, not an integer", s.name(c.inv), canon(c.arg)))
			return
		}
		if !read {
			from = v - 1
		}
		s.calls.add(lcCall{inv: c.inv, done: c.done, call: c.invTime, ret: c.doneTime, value: v, from: from,
			fence: c.fence, process: c.process, write: true, maybe: c.typ != history.Ok, read: read, late: c.late})
		if c.typ != history.Ok {
			s.maybe++
		}
	}
}

// resolvedLate reports whether o is an :ok completion written after the
// fact, in place of an :info (:resolved, which the run's audit table sets):
// its :time is the :info's, not when the op took effect, which may be
// later.
func resolvedLate(o history.Op) bool {
	return o.Type == history.Ok && o.Get(history.KeyResolved) != nil
}

// badOp notes an op that cannot be read as a counter op; the first in the
// order of invocations is the one named.
func (s *Stream) badOp(inv int, msg string) {
	s.bad++
	if s.badAt < 0 || inv < s.badAt {
		s.badAt, s.firstBad = inv, msg
	}
}

// finish ends the history: calls still open never completed.
func (s *Stream) finish() {
	if s.done {
		return
	}
	s.done = true
	open := make([]openCall, 0, s.open.Len())
	for _, c := range s.open.All() {
		open = append(open, c)
	}
	slices.SortFunc(open, func(a, b openCall) int { return a.inv - b.inv })
	for _, c := range open {
		c.done, c.typ = -1, history.Info
		s.addCall(&c)
	}
	s.open.Clear()
	if s.record != nil {
		s.locks.keepOpen()
	}
	s.locks.finish(s.maxTime)
	s.builder.finish()
	s.pauses.finish()
	s.renewals.finish()
	s.spillIfFull()
}

// name names the op at position i as opName does: by its :index, or as
// "#i" in a history without them.
func (s *Stream) name(i int) string {
	if id, ok := s.names[i]; ok {
		if id == history.Unset {
			return fmt.Sprintf("op #%d", i)
		}
		return fmt.Sprintf("op %d", id)
	}
	return fmt.Sprintf("op %d", i)
}

// id is the number name gives, for evidence in results.edn.
func (s *Stream) id(i int) int64 {
	if id, ok := s.names[i]; ok && id != history.Unset {
		return id
	}
	return int64(i)
}

// end is the return of the ops that never completed: later than any event.
func (s *Stream) end() int64 {
	if s.timed {
		return s.lastTime + 1
	}
	return int64(s.n)
}

// Model returns the model the ops added call for, as Detect does.
func (s *Stream) Model() (string, error) { return detect(s.fs) }

// Check judges the history added so far as Check judges it whole, for the
// lock-counter model (opts.Model, or detected). It returns an error wrapping
// ErrWholeHistory when it cannot: another model, the porcupine analyzer,
// or ops out of time order. Add no ops after Check.
func (s *Stream) Check(opts Options) (rs Results, err error) {
	defer func() {
		if err != nil {
			s.Close() // what it kept on disk is of no more use
		}
	}()
	model := opts.Model
	if model == "" {
		var err error
		if model, err = s.Model(); err != nil {
			return Results{}, err
		}
	}
	if err := checkAnalyzer(model, opts.Analyzer); err != nil {
		return Results{}, err
	}
	initial, err := initialFor(model, opts.Initial)
	switch {
	case err != nil:
		return Results{}, err
	case !streamed(model):
		return Results{}, fmt.Errorf("%w: the %s model is checked on all its ops", ErrWholeHistory, model)
	case opts.Analyzer == AnalyzerPorcupine:
		return Results{}, fmt.Errorf("%w: porcupine searches all the ops", ErrWholeHistory)
	case s.timed && !s.sorted:
		return Results{}, fmt.Errorf("%w: its ops are out of time order, as in a journal, and must be sorted first", ErrWholeHistory)
	case opts.Record != nil && opts.Record != s.record:
		return Results{}, errors.New("the lock server's record must be given to the Stream before its ops (SetRecord), not to its Check")
	}
	k, _ := modelKindOf(model) // initialFor knew it
	return s.results(k, initial, opts.Truncated, nil), nil
}

// results are the checks of model k; linear, when given, replaces the
// counter walk's verdict (with porcupine's).
func (s *Stream) results(k modelKind, initial any, truncated bool, linear func() Result) Results {
	s.finish()
	defer s.Close()
	var rs Results
	if k.streamCheck != nil {
		// The lock's own checks (its anomalies, the server's record) are
		// the lock's, whatever the sections did with the resource.
		r := k.streamCheck(s)
		s.matchRecord()
		s.layer(&r, nil)
		rs.Add(r)
		for _, r := range s.anomalies() {
			rs.Add(r)
		}
	} else {
		s.lockCounterResults(&rs, initial.(int64), linear)
	}
	note := historyNote{n: s.n, truncated: truncated, problems: s.problems, first: s.firstProblems, missing: s.missing}
	if s.fileDups != nil {
		note.dups, note.firstDups = s.fileDups.dups, s.fileDups.firstDups
	} else {
		note.dups, note.firstDups = duplicateIndexes(s.n, s.names)
	}
	if r, ok := historyResult(note); ok {
		rs.Add(r)
	}
	rs.Add(s.stats.result(k.writes))
	incomplete(&rs, s.missing)
	return rs
}

// lockCounterResults adds the lock-counter's checks to rs.
func (s *Stream) lockCounterResults(rs *Results, initial int64, linear func() Result) {
	if w, err := s.walk(initial); err != nil {
		// The counter operations could not be kept on disk: neither check
		// can judge the history.
		for _, name := range []string{"lock-counter", "linear"} {
			rs.Add(Result{Name: name, Valid: Unknown, Explanation: err.Error()})
		}
	} else {
		defer w.close()
		// The lock-counter figures run beside the walk: past the read, the
		// two are most of a long check's time on one core. Neither writes
		// what the other reads once the sections are sorted (their error
		// is lockCounter's to report).
		s.secs.done()
		lc := make(chan Result, 1)
		go func() { lc <- s.lockCounter(initial, w) }()
		var lin Result
		if linear != nil {
			lin = linear()
		} else {
			lin = s.linear(initial, w)
		}
		lcr := <-lc
		s.matchRecord()
		s.layer(&lcr, lin.blame)
		s.layer(&lin, nil)
		rs.Add(lcr)
		rs.Add(lin)
		for _, r := range s.anomalies() {
			rs.Add(r)
		}
	}
}

// SetRecord gives the Stream the lock server's record of the run, before
// any op is added: the Stream then keeps the history's lock calls, which
// the record's checks hold to it (about 100 bytes a call, in memory).
func (s *Stream) SetRecord(r *Record) error {
	if s.n > 0 {
		return fmt.Errorf("the lock server's record must be given before the history's ops (%d added)", s.n)
	}
	s.record, s.locks.keep = r, r != nil
	return nil
}

// matchRecord matches the record to the lock calls the Stream kept.
func (s *Stream) matchRecord() {
	if s.record == nil || s.view != nil || s.record.LockNodes > 1 {
		return
	}
	evs, bad, first := readRecord(s.record)
	s.recordBad, s.recordFirstBad = bad, first
	slack := s.record.Slack
	if slack == 0 {
		for _, e := range evs {
			if e.uncertainty > DefaultSlack {
				slack = max(slack, e.uncertainty)
			}
		}
	}
	s.view = newRecordView(evs, s.locks.calls, s.record.Workers, slack, s.locks.faults)
}

// layer adds to an invalid lock-counter or linear result r, from the
// record, which layer let another holder in before a write it blames (or,
// failing those, one of more): the first the record says lost its key.
func (s *Stream) layer(r *Result, more []blame) {
	if s.view == nil || r.Valid != Invalid {
		return
	}
	for _, b := range slices.Concat(r.blame, more) {
		if lb := s.view.layerWords(b.process, b.time); lb.layer != "" {
			if lb.keyless {
				r.Explanation = toldHeld(r.Explanation, b.process)
			}
			r.Explanation += "; " + layerName(lb.layer) + ": " + lb.words
			r.Fields = append(r.Fields, Field{"layer", lb.layer})
			return
		}
	}
}

// Close lets go of what the Stream keeps on disk; Check does it when it is
// done. A Stream that is not to be checked (a history that turned out to
// need reading whole) is closed by whoever drops it.
func (s *Stream) Close() {
	s.calls.close()
	s.secs.close()
}

// walk is the counter walk over the Stream's calls. An I/O error of the
// records on disk is returned, not raised.
func (s *Stream) walk(initial int64) (w *counterWalk, err error) {
	defer func() {
		if p := recover(); p != nil {
			e, ok := p.(spillError)
			if !ok {
				panic(p)
			}
			w, err = nil, e
		}
	}()
	if err := s.calls.flush(); err != nil {
		return nil, spillError{err}
	}
	return newCounterWalk(&s.calls, initial, s.end(), s.timed)
}

// linear is the :linear check by the counter walk w.
func (s *Stream) linear(initial int64, w *counterWalk) (r Result) {
	const name = "linear"
	defer recovered(name, &r)
	r.Name, r.Valid = name, Valid // until the check finds otherwise
	r.Fields = []Field{
		{"model", history.Keyword(ModelLockCounter)},
		{"analyzer", history.Keyword(AnalyzerCounterWalk)},
		{"ops", s.calls.len()},
		{"maybe", s.maybe},
		{"failed", s.fails},
	}
	if s.bad > 0 {
		r.Valid = Unknown
		r.Explanation = fmt.Sprintf("%d ops cannot be read as %s ops; first: %s", s.bad, ModelLockCounter, s.firstBad)
		return r
	}
	v, ok, _ := w.run(false)
	if ok {
		return r
	}
	r.Valid = Invalid
	expl, fields := s.explainWalk(w, v, initial)
	r.Fields = append(r.Fields, fields...)
	r.Explanation = expl
	if c := s.calls.get(v.op); c.write {
		r.blame = []blame{{c.process, c.call}}
	}
	if v.fault == faultCollision {
		o := s.calls.get(v.other)
		r.blame = append(r.blame, blame{o.process, o.call})
	}
	return r
}
