package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/hiatus-dev/hiatus/history"
)

// A recordView is the lock server's record beside the history's lock
// calls: each span of a key matched to the acquire it answered, and each
// section to the span it held.
type recordView struct {
	evs     []serverEvent
	spans   []span
	live    []int // spans the server granted while a key still held a live token
	calls   []lockCall
	byProc  map[history.Process][]int // each process's calls, in the order they completed
	spanOf  map[int]int               // acquire call -> the span it was answered with
	workers int64
	faults  []faultWindow
	slots   map[int64]bool // the slots the record names a connection of
	refuses map[string][]int64
	fences  []int          // the events of :fence, in time order
	gaps    []int          // the events of :gap: where the record lost sight of its node
	doubts  []doubt        // where the record read a key by its guesses
	byToken map[string]int // the last span of each token
	slack   int64          // Record.Slack
}

// within reports whether time t of the record lies in [from, to] of the
// history, give or take the slack.
func (v *recordView) within(t, from, to int64) bool {
	return t >= from-v.slack && t <= satAdd(to, v.slack)
}

// before reports whether time a is surely before time b, one of them the
// record's and the other the history's: by more than the slack.
func (v *recordView) before(a, b int64) bool {
	return satAdd(a, v.slack) < b
}

// satAdd is a+d, held at math.MaxInt64.
func satAdd(a, d int64) int64 {
	if a > math.MaxInt64-d {
		return math.MaxInt64
	}
	return a + d
}

// newRecordView matches the record's events evs to the history's calls.
func newRecordView(evs []serverEvent, calls []lockCall, workers int, slack int64, faults []faultWindow) *recordView {
	if slack <= 0 {
		slack = DefaultSlack
	}
	v := &recordView{evs: evs, calls: calls, workers: int64(workers), faults: faults, slack: slack,
		byProc: map[history.Process][]int{}, spanOf: map[int]int{}, slots: map[int64]bool{}, refuses: map[string][]int64{}}
	slices.SortStableFunc(v.calls, func(a, b lockCall) int { return cmp.Compare(a.done, b.done) })
	for i, c := range v.calls {
		v.byProc[c.process] = append(v.byProc[c.process], i)
	}
	for i, e := range evs {
		if n, ok := history.WorkerSlot(e.client); ok {
			v.slots[n] = true
		}
		switch e.act {
		case history.SRefuse:
			v.refuses[e.key] = append(v.refuses[e.key], e.time)
		case history.SFence:
			v.fences = append(v.fences, i)
		case history.SGap:
			v.gaps = append(v.gaps, i)
		}
	}
	v.doubts = doubts(evs)
	v.spans, v.live = spans(evs)
	v.byToken = map[string]int{}
	for i, s := range v.spans {
		if s.token != "" {
			v.byToken[s.token] = i
		}
	}
	v.matchTokens()
	v.matchWindows()
	for i := range v.spans {
		if s := &v.spans[i]; s.status == holdKnown {
			v.spanOf[s.holder] = i
			v.holdEnd(s)
		}
	}
	return v
}

// A doubt is a stretch of the record in which what it read of a key is
// its guess (history.KeyGuess): from its first guessed event until the
// key's next event read surely.
type doubt struct {
	first    int // the first guessed event
	from, to int64
}

// doubts lists the record's doubts, by key, in time order of their start.
func doubts(evs []serverEvent) []doubt {
	var out []doubt
	open := map[string]int{} // key -> its doubt under way, in out
	for i, e := range evs {
		n, ok := open[e.key]
		switch {
		case e.guess && !ok:
			open[e.key] = len(out)
			out = append(out, doubt{first: i, from: e.time, to: math.MaxInt64})
		case !e.guess && ok:
			out[n].to = e.time
			delete(open, e.key)
		}
	}
	return out
}

// blind is the record's first gap, or else doubt, that overlaps [from,
// to], ends included: what the node did then the record did not see, or
// guessed, so nothing it shows there is sure; ok is false when it saw all
// of it surely.
func (v *recordView) blind(from, to int64) (serverEvent, bool) {
	for _, i := range v.gaps {
		if g := v.evs[i]; !v.before(to, g.time) && !v.before(g.deadline, from) {
			return g, true
		}
	}
	for _, d := range v.doubts {
		if !v.before(to, d.from) && !v.before(d.to, from) {
			return v.evs[d.first], true
		}
	}
	return serverEvent{}, false
}

// unsure reports whether the record has a stretch it did not see, or
// read by guesses.
func (v *recordView) unsure() bool { return len(v.gaps) > 0 || len(v.doubts) > 0 }

// unsureWords says why a check cannot call the run valid, "" when it
// can: the record lost sight of its node, or read the key by its guesses.
// A guess may agree with a false answer (a grant the library claimed and
// the model guessed, which the server refused) or hide an orphan (a grant
// read as a refusal), so a doubt, as a gap, leaves no check valid; unsure
// counts the anomalies it set aside.
func (v *recordView) unsureWords(unsure int) string {
	switch {
	case len(v.gaps) > 0:
		return v.blindWords()
	case len(v.doubts) > 0:
		e := v.evs[v.doubts[0].first]
		aside := ""
		if unsure > 0 {
			aside = fmt.Sprintf(" (%s set aside)", pluralInt(unsure, "1 anomaly", fmt.Sprintf("%d anomalies", unsure)))
		}
		return fmt.Sprintf("the lock server's record read its node's commands alone (without the server's notifications) and guessed what the command at %s (%s) did to the key, near its deadline, and what the key held until it was sure again (%s): what rests on its guesses is not sure%s, and no anomaly outside them was seen",
			secs(e.time), e.command, pluralInt(len(v.doubts), "1 such stretch", fmt.Sprintf("%d such stretches", len(v.doubts))), aside)
	}
	return ""
}

// blindWords says why a check of a record with gaps cannot call the run
// valid.
func (v *recordView) blindWords() string {
	g := v.evs[v.gaps[0]]
	until := "never saw it again"
	if g.deadline != math.MaxInt64 {
		until = "saw it again at " + secs(g.deadline)
	}
	why := ""
	if g.why != "" {
		why = " (" + g.why + ")"
	}
	return fmt.Sprintf("the lock server's record lost sight of its node at %s%s and %s: what the server did then is not in it, and no anomaly outside it was seen", secs(g.time), why, until)
}

// slot is the worker slot of process p.
func (v *recordView) slot(p history.Process) int64 {
	if v.workers > 0 && p >= 0 {
		return int64(p) % v.workers
	}
	return int64(p)
}

// clientSlot is the slot a connection's name names, with the record's
// own numbering folded as the processes' are.
func (v *recordView) clientSlot(client string) (int64, bool) {
	n, ok := history.WorkerSlot(client)
	if ok && v.workers > 0 {
		n %= v.workers
	}
	return n, ok
}

// matchTokens matches spans to the acquires answered with their token
// (or, as etcd's locks name a grant by its key, with their key).
func (v *recordView) matchTokens() {
	byToken := map[string]int{}
	for i, c := range v.calls {
		if c.f == history.FAcquire && c.typ == history.Ok && c.token != "" {
			byToken[c.token] = i
		}
	}
	if len(byToken) == 0 {
		return
	}
	taken := map[int]bool{}
	for i := range v.spans {
		s := &v.spans[i]
		c, ok := byToken[s.token]
		if !ok || s.token == "" {
			c, ok = byToken[s.key]
		}
		if ok && !taken[c] {
			s.holder, s.status, taken[c] = c, holdKnown, true
		}
	}
}

// An acquireWindow is an acquire of one slot, and the interval in which a
// grant may have answered it.
type acquireWindow struct {
	call     int
	from, to int64
}

// matchWindows matches the spans no token matched to the acquire of their
// connection's slot in whose interval they began: an :ok acquire is
// answered by the last grant in its interval (the earlier ones it was not
// told of), a :fail one by none, one of unknown outcome maybe by any.
func (v *recordView) matchWindows() {
	windows := v.acquireWindows()
	taken := map[int]bool{}
	for i := range v.spans {
		if s := &v.spans[i]; s.status == holdKnown {
			taken[s.holder] = true
		}
	}
	last := map[int]int{} // :ok acquire -> the last span begun in its interval
	for i := range v.spans {
		s := &v.spans[i]
		if s.status == holdKnown {
			continue
		}
		n, ok := v.clientSlot(s.client)
		if !ok {
			s.status = holdMaybe // a connection no worker's: who took it is unknown
			continue
		}
		ws := windows[n]
		// The window begun before the grant, or, if it does not hold it,
		// the next, begun within the slack after it: with a wide slack
		// (Record.Slack) the next acquire may begin within it, and the
		// grant is not taken from the window it falls in.
		k := sort.Search(len(ws), func(k int) bool { return ws[k].from > s.start }) - 1
		if k+1 < len(ws) && (k < 0 || !v.within(s.start, ws[k].from, ws[k].to)) && v.within(s.start, ws[k+1].from, ws[k+1].to) {
			k++
		}
		if k < 0 || !v.within(s.start, ws[k].from, ws[k].to) {
			s.why = whyNoCall
			if k >= 0 {
				s.after = ws[k].call
			}
			continue
		}
		c := v.calls[ws[k].call]
		s.after = ws[k].call
		switch {
		case c.typ == history.Ok && !taken[ws[k].call]:
			if j, ok := last[ws[k].call]; ok {
				v.spans[j].why = whyLater
			}
			last[ws[k].call] = i
		case c.typ == history.Ok:
			s.why = whyOther
		case c.typ == history.Fail && c.errv == history.ErrTimeout:
			s.why = whyGaveUp
		case c.typ == history.Fail:
			s.why = whyFailed
		default:
			s.status = holdMaybe
		}
	}
	for c, i := range last {
		v.spans[i].holder, v.spans[i].status, v.spans[i].why = c, holdKnown, whyHeld
	}
}

// acquireWindows lists each slot's acquires in the order they began, each
// with its interval: invocation to completion; for one of unknown
// outcome, to the slot's next acquire (its request may land late).
func (v *recordView) acquireWindows() map[int64][]acquireWindow {
	out := map[int64][]acquireWindow{}
	for i, c := range v.calls {
		if c.f == history.FAcquire && !c.retire {
			n := v.slot(c.process)
			out[n] = append(out[n], acquireWindow{call: i, from: c.inv, to: c.done})
		}
	}
	for n, ws := range out {
		slices.SortFunc(ws, func(a, b acquireWindow) int { return cmp.Compare(a.from, b.from) })
		for k := range ws {
			if v.calls[ws[k].call].typ == history.Info {
				ws[k].to = math.MaxInt64
				if k+1 < len(ws) {
					ws[k].to = ws[k+1].from
				}
			}
		}
		out[n] = ws
	}
	return out
}

// holdEnd finds when the section of s's holder ended: its release
// completed (:ok or :fail), its process was killed, or another acquire of
// it began; a release of unknown outcome, an :info that retired it, or
// the history's end leave it held, as far as the history says.
func (v *recordView) holdEnd(s *span) {
	s.heldTo = math.MaxInt64
	calls := v.byProc[v.calls[s.holder].process]
	k := slices.Index(calls, s.holder)
	for _, i := range calls[k+1:] {
		c := v.calls[i]
		switch {
		case c.retire && c.killed:
			s.heldTo, s.endCall, s.dead = c.done, i, true
			return
		case c.retire:
			return
		case c.f == history.FRelease && c.typ != history.Info:
			s.heldTo, s.endCall = c.done, i
			return
		case c.f == history.FRelease:
			return
		case c.f == history.FAcquire:
			s.heldTo, s.endCall = c.inv, i
			return
		}
	}
}

// sectionAt is the :ok acquire of process p whose section was under way
// at time t, or the last before t; -1 if none.
func (v *recordView) sectionAt(p history.Process, t int64) int {
	at := -1
	for _, i := range v.byProc[p] {
		c := v.calls[i]
		if c.f == history.FAcquire && c.typ == history.Ok && c.done <= t {
			at = i
		}
	}
	return at
}

// heldIntervals are the intervals in which the history has some process
// holding the lock (an :ok acquire to the end of its section), merged.
func (v *recordView) heldIntervals() [][2]int64 {
	var iv [][2]int64
	for i := range v.spans {
		if s := v.spans[i]; s.status == holdKnown {
			iv = append(iv, [2]int64{v.calls[s.holder].done, s.heldTo})
		}
	}
	for i, c := range v.calls {
		if c.f == history.FAcquire && c.typ == history.Ok {
			if _, ok := v.spanOf[i]; !ok {
				end := int64(math.MaxInt64)
				if e := v.sectionEnd(i); e >= 0 {
					end = e
				}
				iv = append(iv, [2]int64{c.done, end})
			}
		}
	}
	slices.SortFunc(iv, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]int64
	for _, x := range iv {
		if n := len(out); n > 0 && x[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// sectionEnd is when the section of acquire call a ended, as holdEnd
// finds it; -1 if it may never have.
func (v *recordView) sectionEnd(a int) int64 {
	s := span{holder: a}
	v.holdEnd(&s)
	if s.heldTo == math.MaxInt64 {
		return -1
	}
	return s.heldTo
}

// faultOn is a fault of process p (or of no one process) in force at some
// point in [from, to]; ok is false if none.
func (v *recordView) faultOn(p history.Process, from, to int64) (faultWindow, bool) {
	for _, f := range v.faults {
		if (f.process == int64(p) || f.process < 0) && f.start <= to && f.end >= from {
			return f, true
		}
	}
	return faultWindow{}, false
}

// hitAt is a fault of process p itself (not of a server, nor of every
// process) surely in force at time t of the record, that leaves it unable
// to take a grant or to undo one: its process stopped whole (SIGSTOP, not
// a sleep of one goroutine), killed, or its links cut or delayed. Its
// grant is held until its lease runs out, as a holder's is that such a
// fault hit.
func (v *recordView) hitAt(p history.Process, t int64) (faultWindow, bool) {
	for _, f := range v.faults {
		if (f.f != history.FPause || f.stops) && f.process == int64(p) && v.before(f.start, t) && v.before(t, f.end) {
			return f, true
		}
	}
	return faultWindow{}, false
}

// pauseOf is a pause of process p itself (not of a server: a paused
// server answers nothing) in force at some point in [from, to].
func (v *recordView) pauseOf(p history.Process, from, to int64) (faultWindow, bool) {
	for _, f := range v.faults {
		if f.f == history.FPause && f.process == int64(p) && f.start <= to && f.end >= from {
			return f, true
		}
	}
	return faultWindow{}, false
}
