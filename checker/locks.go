package checker

import (
	"math"

	"github.com/hiatus-dev/hiatus/history"
)

// This file follows the lock itself, op by op, as the history tells it:
// who held it, who waited for it, which fences its grants carried, and
// which faults were in force. From that alone it finds two anomalies (the
// lock server's record, when there is one, finds them more sharply:
// server.go):
//
//   - a gap: an interval in which no process held the lock or could have
//     (no section open, no acquire of unknown outcome since the last
//     grant), while a process that was neither frozen nor cut off waited
//     for it; one longer than a lease is an orphan (:availability);
//   - a fence inversion: an acquire invoked after another had completed
//     with a fence, whose own fence is no larger (:fence-order).
//
// Both are swept as the ops come, in time order, in a few words a process;
// with a record the lock calls and faults are kept whole too, for it.

// A lockProc is what the sweep knows of one process.
type lockProc struct {
	waiting bool    // an acquire invoked and not completed
	counted bool    // counted among the live waiters: waiting and not frozen
	holding bool    // an acquire completed :ok and its section not over
	frozen  int32   // faults of this process in force
	invTime int64   // its pending acquire's invocation
	invIdx  int64   // and its :index
	before  fenceAt // the largest fence completed before its acquire was invoked
}

// A callInvs is the invocation of a process's last call of each kind
// (callKind): time and :index. Kept for the record's checks only.
type callInvs struct {
	inv, idx [callKinds]int64
}

// A fenceAt is a fenced grant the history completed: the fence and where.
type fenceAt struct {
	fence int64
	op    int64 // the acquire's completion's :index
	proc  history.Process
	time  int64
}

// A gap is an interval in which no process held the lock or could have,
// while a live process waited for it.
type gap struct {
	start, end int64
	lease      int64 // the lease it is measured against (ns); 0 if none is known
	after      lastHolder
	waiter     history.Process // a process that waited throughout its start
	waitIdx    int64           // that process's acquire invocation
}

// threshold is how long a gap must last to be an orphan by the history
// alone, which sees no key: a lease, and after a holder that was killed
// or cut short, another, for its key may outlive it by one (the lease
// doing its job). What lies within it cannot be told from a waiter
// polling slowly.
func (g gap) threshold() int64 {
	if g.after.op >= 0 && g.after.how == history.Info {
		return 2 * g.lease
	}
	return g.lease
}

// lastHolder is how the last section before a gap ended.
type lastHolder struct {
	proc history.Process
	op   int64 // the op that ended it; -1 if no section came before
	how  history.Type
	kill bool // the op was a worker's, completed :info because it was killed
}

// A fenceInversion is an acquire whose fence is no larger than that of an
// acquire completed before it was invoked.
type fenceInversion struct {
	earlier fenceAt
	later   fenceAt
	invTime int64 // the later acquire's invocation
}

// lockTracker sweeps the history for gaps and fence inversions, and keeps
// the lock calls and faults when the lock server's record needs them.
type lockTracker struct {
	procs   history.ProcessMap[lockProc]
	holders int  // processes holding the lock
	maybe   bool // an acquire of unknown outcome, or a section cut short, since the last grant
	waiters int  // live waiters: waiting, not frozen
	global  int  // faults of no one process in force: every process is taken as frozen
	pairs   history.FaultPairer
	faults  []faultWindow // every fault, begun and ended
	now     int64         // the time of the ops being taken
	started bool

	lease   int64 // the lease of the last grant (ns); 0 before any
	last    lastHolder
	inGap   bool
	current gap
	granted bool            // a grant has been seen
	counted history.Process // the process counted among the live waiters last
	gaps    int             // gaps longer than their lease: orphans
	maxGap  int64           // the longest of them
	first   *gap            // the first of them
	pending []gap           // gaps whose lease was not known when they ended

	fenced     int     // fenced grants
	settled    fenceAt // the largest fence of the grants completed before now
	atNow      fenceAt // and of those completed at now
	inversions int
	firstInv   *fenceInversion
	invExample []any

	keep  bool                         // keep the lock calls, for the record
	calls []lockCall                   // the lock calls, in the order they completed
	invs  history.ProcessMap[callInvs] // with keep, each process's invocations
	dirty bool                         // the gap's terms changed since it was settled
}

// A faultWindow is a fault from its beginning to its end (the history's
// end if none).
type faultWindow struct {
	index      int64
	kind       history.Keyword
	f          history.Keyword // the :f that began it: :pause, :kill, :start
	process    int64           // -1 for a fault of no one process
	start, end int64
	// stops says the pause stops its process whole (SIGSTOP), not one
	// goroutine of it: not a sleep, nor the blocking holder's own pause of
	// stop-waiters (the stopped waiters' are named by :worker).
	stops bool
}

func newLockTracker() lockTracker {
	return lockTracker{last: lastHolder{op: -1}}
}

// add takes the next op of the history; sec, for an acquire's :ok, is
// the section it began (whose lease and fence the sweep reads, rather
// than look them up in the op again). Most ops (reads, writes) only move
// the sweep's time.
func (t *lockTracker) add(o *history.Op, sec *Section) {
	if !t.started || o.Time > t.now {
		t.advance(o.Time)
	}
	if !o.IsClient() {
		t.fault(o)
		return
	}
	if (o.F == history.FRead || o.F == history.FWrite) && o.Type != history.Info {
		return
	}
	if o.Process.IsRenewer() {
		// A renewal by a lock's own watchdog, beside its holder's ops: the
		// record holds it to the server's word; it neither holds nor waits.
		if t.keep && o.F == history.FRenew {
			t.renewal(o)
		}
		return
	}
	switch o.F {
	case history.FAcquire:
		t.acquire(o, sec)
	case history.FRelease:
		t.release(o)
	case history.FExtend, history.FRenew:
		if t.keep {
			t.renewal(o)
		}
	}
	if o.Type == history.Info && o.F != history.FAcquire && o.F != history.FRelease {
		t.retire(o)
	}
}

// advance moves the sweep past the ops of its time to time now: what
// they left held until now. Ops that share a time are one instant, and
// what held between them held for no time.
func (t *lockTracker) advance(now int64) {
	if t.started {
		if t.dirty {
			t.settle(t.now)
			t.dirty = false
		}
		if t.atNow.fence > 0 {
			t.settled = maxFence(t.settled, t.atNow)
			t.atNow = fenceAt{}
		}
	}
	t.started, t.now = true, now
}

// settle opens or closes a gap at time now, as the ops taken at now leave
// the lock.
func (t *lockTracker) settle(now int64) {
	open := t.holders == 0 && !t.maybe && t.waiters > 0 && t.global == 0
	switch {
	case open && !t.inGap:
		t.inGap = true
		t.current = gap{start: now, after: t.last, waiter: -1}
		t.current.waiter, t.current.waitIdx = t.aWaiter()
	case !open && t.inGap:
		t.inGap = false
		t.current.end = now
		t.current.lease = t.lease
		t.endGap(t.current)
	}
}

// aWaiter names a live waiter, for the words: the one counted last if it
// still is, else the first found (a scan, rare: a gap opens when a waiter
// is counted or a holder lets go, and the waiter counted last mostly still
// waits).
func (t *lockTracker) aWaiter() (history.Process, int64) {
	if lp, ok := t.procs.Get(t.counted); ok && lp.counted {
		return t.counted, lp.invIdx
	}
	for p, lp := range t.procs.All() {
		if lp.counted {
			return p, lp.invIdx
		}
	}
	return -1, -1
}

// endGap counts g if it outlasted its lease; a gap before the first grant
// waits for its lease. A lock that grants no lease (an advisory lock) has
// no orphans by the history alone.
func (t *lockTracker) endGap(g gap) {
	if g.lease == 0 {
		if !t.granted {
			t.pending = append(t.pending, g)
		}
		return
	}
	if g.end-g.start <= g.threshold() {
		return
	}
	t.gaps++
	t.maxGap = max(t.maxGap, g.end-g.start)
	if t.first == nil || g.start < t.first.start {
		first := g // a copy: taking g's address would put every gap on the heap
		t.first = &first
	}
}

func (t *lockTracker) acquire(o *history.Op, sec *Section) {
	lp, _ := t.procs.Get(o.Process)
	if t.keep {
		t.keepInv(o)
	}
	if o.Type == history.Invoke {
		lp.waiting, lp.before = true, t.settled
		lp.invTime, lp.invIdx = o.Time, o.Index
		t.count(&lp)
		if lp.counted {
			t.counted = o.Process
		}
		t.procs.Set(o.Process, lp)
		return
	}
	lp.waiting = false
	t.count(&lp)
	switch o.Type {
	case history.Ok:
		t.grant(o, sec, &lp)
	case history.Info:
		t.maybe, t.dirty = true, true // it may have been granted; a later grant ends that
	}
	t.procs.Set(o.Process, lp)
}

// grant takes an acquire's :ok: the process holds the lock, and its fence
// is held to those of the grants completed before it was invoked.
func (t *lockTracker) grant(o *history.Op, sec *Section, lp *lockProc) {
	if !lp.holding {
		t.holders++
	}
	lp.holding, t.maybe, t.granted, t.dirty = true, false, true, true
	if sec.LeaseNS > 0 {
		t.lease = sec.LeaseNS
		for _, g := range t.pending {
			g.lease = t.lease
			t.endGap(g)
		}
		t.pending = t.pending[:0]
	}
	f := sec.Fence
	if f <= 0 {
		return
	}
	t.fenced++
	at := fenceAt{fence: f, op: o.Index, proc: o.Process, time: o.Time}
	if b := lp.before; b.fence > 0 && f <= b.fence {
		t.inversions++
		if t.firstInv == nil {
			t.firstInv = &fenceInversion{earlier: b, later: at, invTime: lp.invTime}
		}
		if len(t.invExample) < evidenceLimit {
			t.invExample = append(t.invExample, []any{b.op, at.op})
		}
	}
	t.atNow = maxFence(t.atNow, at)
}

func maxFence(a, b fenceAt) fenceAt {
	if b.fence > a.fence {
		return b
	}
	return a
}

// release takes a release's completion: the section is over (:ok or
// :fail), or may not be (:info: the lock may still be held until another
// grant shows it is not).
func (t *lockTracker) release(o *history.Op) {
	if t.keep {
		t.keepInv(o)
	}
	if o.Type == history.Invoke {
		return
	}
	lp, _ := t.procs.Get(o.Process)
	if lp.holding {
		lp.holding, t.dirty = false, true
		t.holders--
		t.last = lastHolder{proc: o.Process, op: o.Index, how: o.Type}
		t.procs.Set(o.Process, lp)
	}
	if o.Type == history.Info {
		t.maybe, t.dirty = true, true
	}
}

// renewal keeps an extend or a renew, for the record.
func (t *lockTracker) renewal(o *history.Op) {
	t.keepInv(o)
}

// keepInv keeps, for the record, the invocation of a lock call, and the
// call when o completes it.
func (t *lockTracker) keepInv(o *history.Op) {
	iv, _ := t.invs.Get(o.Process)
	k := kindOf(o.F)
	if o.Type == history.Invoke {
		iv.inv[k], iv.idx[k] = o.Time, o.Index
		t.invs.Set(o.Process, iv)
		return
	}
	t.keepCall(o, iv.inv[k], iv.idx[k])
}

// retire takes an :info completion of a step of a section: the process is
// retired, and its worker may still hold the lock (it goes on under
// another process number) unless it was killed.
func (t *lockTracker) retire(o *history.Op) {
	killed := o.Error == history.ErrKilled
	if t.keep {
		t.calls = append(t.calls, lockCall{f: o.F, process: o.Process, done: o.Time, doneIdx: o.Index, typ: history.Info, killed: killed, retire: true})
	}
	lp, _ := t.procs.Get(o.Process)
	if !lp.holding {
		return
	}
	lp.holding, t.dirty = false, true
	t.holders--
	t.procs.Set(o.Process, lp)
	t.last = lastHolder{proc: o.Process, op: o.Index, how: history.Info, kill: killed}
	if !killed {
		t.maybe = true
	}
}

// count keeps lp's place among the live waiters.
func (t *lockTracker) count(lp *lockProc) {
	live := lp.waiting && lp.frozen == 0
	switch {
	case live && !lp.counted:
		t.waiters++
		t.dirty = true
	case !live && lp.counted:
		t.waiters--
		t.dirty = true
	}
	lp.counted = live
}

// fault takes a nemesis event: a fault of one process freezes it (a
// pause, a kill, a cut link, a delay: it is not refused, it cannot ask);
// one of no process (a server paused, killed or failed over) all of them.
func (t *lockTracker) fault(o *history.Op) {
	e, ok := history.ReadFaultEvent(*o)
	if !ok || e.Failed {
		return
	}
	if i := t.pairs.Add(len(t.faults), e); i >= 0 {
		t.faults[i].end = o.Time
		t.freeze(t.faults[i].process, -1)
	}
	if e.Begin {
		stops := e.F == history.FPause && e.Kind != history.PauseSleep && (e.Kind != history.PauseStopWaiters || e.Value[history.Keyword("worker")] != nil)
		t.faults = append(t.faults, faultWindow{index: o.Index, kind: e.Kind, f: e.F, process: e.Process, start: o.Time, end: math.MaxInt64, stops: stops})
		t.freeze(e.Process, 1)
	}
}

// freeze adds d to the faults in force on process p (-1: on all).
func (t *lockTracker) freeze(p int64, d int) {
	if p < 0 {
		t.global += d
		t.dirty = true
		return
	}
	lp, _ := t.procs.Get(history.Process(p))
	lp.frozen += int32(d)
	t.count(&lp)
	if lp.counted {
		t.counted = history.Process(p)
	}
	t.procs.Set(history.Process(p), lp)
}

// finish ends the history at time end: a gap still open ends there, and a
// fault never ended lasts until then.
func (t *lockTracker) finish(end int64) {
	if t.dirty {
		t.settle(t.now) // what the last instant left holds for no time
		t.dirty = false
	}
	if t.inGap {
		t.inGap = false
		t.current.end, t.current.lease = end, t.lease
		t.endGap(t.current)
	}
	for i := range t.faults {
		t.faults[i].end = min(t.faults[i].end, end)
	}
}
