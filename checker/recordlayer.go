package checker

import (
	"fmt"
	"strings"

	"github.com/hiatus-dev/hiatus/history"
)

// This file says, from the lock server's record, which layer broke: the
// lease model (a holder outlived its key), the library (it said what the
// server did not do), or the server (it broke its own rule).

// orphanWords says what made orphan o and which layer it was.
func (v *recordView) orphanWords(o orphan) (history.Keyword, string) {
	s := v.spans[o.span]
	e := v.evs[s.startEv]
	tail := fmt.Sprintf("; the key held the lock until %s (%s), no live holder had it, and the server refused %d %s meanwhile (the first at %s)",
		v.untilWords(s), msWords(o.end-o.start), o.refused, pluralInt(o.refused, "acquire", "acquires"), secs(o.firstRef))
	if s.status == holdNone {
		op := int64(-1)
		if s.after >= 0 {
			op = v.calls[s.after].doneIdx
		}
		why, layer := s.why.words(op), layerLibrary
		switch {
		case o.reported && o.fault != nil:
			why = fmt.Sprintf("%s hit its worker (process %v) when it came, and %s", v.faultWords(*o.fault), v.calls[s.after].process, why)
			layer, tail = layerLease, tail+fmt.Sprintf(": no longer than its %s, the lease doing its job", leaseWords(o))
		case o.reported: // undoneAtEnd
			why, layer = whyUndone.words(op), "" // no layer's: the run's end
			tail += ": hiatus's doing, not the lock's"
		}
		return layer, fmt.Sprintf("%s's grant at %s (%s) went to no one: %s%s", clientName(s.client), secs(s.start), e.command, why, tail)
	}
	c := v.calls[s.holder]
	var what string
	switch {
	case s.dead:
		what = fmt.Sprintf("process %v, holding since %s, was killed at %s (op %d)", c.process, secs(c.done), secs(s.heldTo), v.calls[s.endCall].doneIdx)
	case s.endCall >= 0 && v.calls[s.endCall].f == history.FRelease:
		r := v.calls[s.endCall]
		told := "ok"
		if r.typ == history.Fail {
			told = fmt.Sprintf("that it no longer held it (%s)", canon(r.errv))
		}
		what = fmt.Sprintf("process %v's release (op %d) answered %s at %s, but its key stayed", c.process, r.doneIdx, told, secs(r.done))
	default:
		what = fmt.Sprintf("process %v's section ended at %s, but its key stayed", c.process, secs(s.heldTo))
	}
	layer := layerLibrary
	switch {
	case o.reported:
		layer = layerLease
		tail += fmt.Sprintf(": no longer than its %s after %s hit its holder, the lease doing its job", leaseWords(o), v.faultWords(*o.fault))
	case o.fault != nil && o.lease > 0:
		layer = v.outlivedBy(s)
		tail += fmt.Sprintf(": longer than its %s lease", msWords(o.lease))
	case s.dead:
		layer = v.outlivedBy(s)
	}
	return layer, what + tail
}

// leaseWords says an orphan's lease and the server's expiry grain, if any:
// "500 ms", "500 ms (and the server's 100 ms tick)".
func leaseWords(o orphan) string {
	if o.grain > 0 {
		return fmt.Sprintf("%s lease (and the server's %s tick)", msWords(o.lease), msWords(o.grain))
	}
	return msWords(o.lease) + " lease"
}

// outlivedBy says who kept a key past its lease: a library that renewed
// it after its holder's section ended, else the server.
func (v *recordView) outlivedBy(s span) history.Keyword {
	for _, e := range v.evs[s.startEv:] {
		if e.time >= s.end {
			break
		}
		if e.act == history.SRenew && e.key == s.key && e.time > s.heldTo {
			return layerLibrary
		}
	}
	return layerServer
}

// faultWords names a fault: "nemesis op 33 (kill-worker)".
func (v *recordView) faultWords(f faultWindow) string {
	return fmt.Sprintf("nemesis op %d (%s)", f.index, f.kind)
}

// inversionWords says what made the fence inversion p and which layer it
// was: a fence taken apart from its grant, after a later grant's, is the
// library's; fences handed out in the grants' order whose values went
// back are the server's. When the record holds no INCR of a fence (a
// library's own counter), when each was taken is unknown: an answer's
// time is no INCR's (a late reply, or a fence taken for another grant
// of the worker's), and only a server taken down between the grants
// (restart) makes the counter's going back the likelier.
func (v *recordView) inversionWords(p [2]grantFence, restart func(from, to int64) (faultWindow, bool)) (history.Keyword, string) {
	a, b := v.spans[p[0].span], v.spans[p[1].span]
	words := fmt.Sprintf("%s's grant at %s (%s) received fence %d at %s, though %s's grant at %s came before it and received fence %d at %s",
		clientName(b.client), secs(b.start), v.evs[b.startEv].command, p[1].fence, secs(p[1].at),
		clientName(a.client), secs(a.start), p[0].fence, secs(p[0].at))
	if !p[0].seen || !p[1].seen {
		unseen := "either fence, so when each was taken is unknown"
		switch {
		case p[0].seen:
			unseen = clientName(b.client) + "'s fence, so when it was taken is unknown"
		case p[1].seen:
			unseen = clientName(a.client) + "'s fence, so when it was taken is unknown"
		}
		words += ": the record holds no INCR of " + unseen
		if f, ok := restart(a.start, p[1].at); ok {
			return layerServer, words + fmt.Sprintf("; the fence counter may have gone back when %s took its server down", v.faultWords(f))
		}
		if p[0].at > p[1].at {
			return layerLibrary, words + fmt.Sprintf("; %s's larger fence was answered %s after its grant, after %s's: taken apart from its grant, after the later grant's (a late reply, or a pause between the two); a later holder's writes can then be refused while the stale holder's are accepted",
				clientName(a.client), msWords(p[0].at-a.start), clientName(b.client))
		}
		return layerLibrary, words + fmt.Sprintf("; no server of the lock's was taken down between them: %s's smaller fence, answered after %s's larger one, was taken before it, apart from this grant (for an earlier one, and answered late); a later holder's writes can then be refused while the stale holder's are accepted",
			clientName(b.client), clientName(a.client))
	}
	if p[0].at > p[1].at {
		return layerLibrary, words + fmt.Sprintf(": %s took its fence %s after its grant, apart from it; a later holder's writes can then be refused while the stale holder's are accepted",
			clientName(a.client), msWords(p[0].at-a.start))
	}
	return layerServer, words + ": the fence counter went back; a later holder's writes can then be refused while the stale holder's are accepted"
}

// A layerBlame is what layerWords found: the layer, its words, and
// whether the section held no key of the server's at all (its acquire
// was answered without one), so that a pause is not said to have hit
// it while it held its lease.
type layerBlame struct {
	layer   history.Keyword
	words   string
	keyless bool
}

// layerWords says, for a write of process p sent at time t that the
// lock-counter checks blame, which layer let another holder in: how the
// key of p's section was lost before t, and who took it. Its layer is ""
// when the record blames none.
func (v *recordView) layerWords(p history.Process, t int64) layerBlame {
	a := v.sectionAt(p, t)
	if a < 0 {
		return layerBlame{}
	}
	c := v.calls[a]
	j, ok := v.spanOf[a]
	if !ok {
		if !v.slots[v.slot(p)] {
			return layerBlame{}
		}
		if words, ok := v.lineWords(c); ok {
			return layerBlame{layerLibrary, words, true}
		}
		return layerBlame{layer: layerLibrary, words: fmt.Sprintf("process %v's acquire (op %d) answered ok at %s, but the server's record has no grant to it", p, c.doneIdx, secs(c.done))}
	}
	s := v.spans[j]
	if !v.before(s.end, t) {
		return layerBlame{} // its key was its at the write: the record blames no layer of its
	}
	if v.before(s.end, c.done) && !v.answeredInTime(c, s) && !v.heldDuring(c, s) {
		return layerBlame{layerLibrary, fmt.Sprintf("process %v's acquire (op %d) was answered ok at %s, after its key was gone (%s)", p, c.doneIdx, secs(c.done), v.endWords(s)), true}
	}
	if f := v.extendedGone(a, s, t); f != nil {
		return layerBlame{layer: layerLibrary, words: f.words} // the lease lapsed, and the library said it had not
	}
	layer, words := v.lostWords(p, c, j, t)
	return layerBlame{layer: layer, words: words}
}

// lostWords says how the key of span j, which p's section (acquire c)
// held, was lost before t, and who took it.
func (v *recordView) lostWords(p history.Process, c lockCall, j int, t int64) (history.Keyword, string) {
	s := v.spans[j]
	next, took := "", "no one took the lock"
	n := v.takerBefore(j, t)
	if s.endHow == endGrant {
		n = v.nextSpan(j) // the grant over it
	}
	if n >= 0 {
		ns := v.spans[n]
		next = fmt.Sprintf("%s's %s at %s", clientName(ns.client), grantVerb(v.evs[ns.startEv]), secs(ns.start))
		took = fmt.Sprintf("%s took the lock at %s", clientName(ns.client), secs(ns.start))
	}
	switch s.endHow {
	case endExpire:
		return layerLease, v.outlivedWords(p, c, s, next)
	case endGrant:
		return layerServer, fmt.Sprintf("the server granted %s while process %v's key still held the lock (its deadline %s)", orSomeone(next), p, deadlineWords(s.deadline))
	case endOverwrite:
		e := v.evs[s.endEv]
		return layerLibrary, fmt.Sprintf("%s's SET without NX (%s at %s) overwrote process %v's key", clientName(e.client), e.command, secs(e.time), p)
	}
	e := v.evs[s.endEv]
	who := clientName(e.client) + "'s"
	if n, ok := v.clientSlot(e.client); ok && n == v.slot(p) {
		who = fmt.Sprintf("%s's %s", clientName(e.client), v.callDuring(p, e.time))
		return layerLibrary, fmt.Sprintf("%s (%s at %s) deleted its own key; %s", who, e.command, secs(e.time), took)
	}
	return layerLibrary, fmt.Sprintf("%s %s at %s deleted process %v's key; %s", who, e.command, secs(e.time), p, took)
}

// extendedGone is the last extend of the section of acquire a, sent
// before its write at t, that the library answered ok after span s, the
// section's key, was gone (renewOK's judgement): the careful holder asked,
// and was told it still held the lock. nil if none.
func (v *recordView) extendedGone(a int, s span, t int64) *falseOK {
	c := v.calls[a]
	var out *falseOK
	for _, i := range v.byProc[c.process] {
		e := v.calls[i]
		if e.f != history.FExtend || e.typ != history.Ok || e.inv < c.done || e.inv > t || !v.before(s.end, e.done) {
			continue
		}
		if f := v.renewOK(i); f != nil {
			out = f
		}
	}
	return out
}

// outlivedWords tells a holder that outlived its key: "process 1 was
// stopped 802 ms (nemesis op 15), its key expired at 3.412 s, worker 2's
// SET at 3.413 s".
func (v *recordView) outlivedWords(p history.Process, c lockCall, s span, next string) string {
	msg := fmt.Sprintf("process %v held its section past its key", p)
	if f, ok := v.pauseOf(p, c.done, s.end); ok {
		msg = fmt.Sprintf("process %v was stopped %s by %s", p, msWords(f.end-f.start), v.faultWords(f))
	}
	msg += fmt.Sprintf(", its key expired at %s", secs(s.end))
	if next != "" {
		msg += ", " + next
	}
	return msg
}

// callDuring names the lock call of process p under way at time t:
// "renew", "release"; "command" if none was.
func (v *recordView) callDuring(p history.Process, t int64) string {
	for _, i := range v.byProc[p] {
		if c := v.calls[i]; !c.retire && c.inv <= t && t <= c.done {
			return string(c.f)
		}
	}
	return "command"
}

// grantVerb names the command of a grant by its first word ("SET"), or
// the act when the record has no command.
func grantVerb(e serverEvent) string {
	if w, _, _ := strings.Cut(e.command, " "); w != "" {
		return w
	}
	return string(e.act)
}

func orSomeone(next string) string {
	if next == "" {
		return "no one"
	}
	return next
}

// msWords writes a duration of the history's clock in milliseconds.
func msWords(ns int64) string {
	return fmt.Sprintf("%d ms", ns/1e6)
}

func pluralInt(n int, one, many string) string {
	return plural(int64(n), one, many)
}
