package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/hiatus-dev/hiatus/history"
)

// The layers that can break a lock, as the record tells them apart.
const (
	layerLease   history.Keyword = "lease"   // the lease model: a holder outlived its key
	layerLibrary history.Keyword = "library" // the client library said what the server did not do
	layerServer  history.Keyword = "server"  // the server broke its own rule
)

// layerName says a layer in words: "lease outlived", "library",
// "server".
func layerName(l history.Keyword) string {
	if l == layerLease {
		return "lease outlived"
	}
	return string(l)
}

// An orphan is an interval in which the record's key held a token no live
// holder had, the history had no holder either, and the server refused
// acquires.
type orphan struct {
	span       int
	start, end int64
	refused    int
	firstRef   int64
	lease      int64
	grain      int64        // how long past the lease the server may keep the key (its grant's, at most the lease)
	fault      *faultWindow // the fault that hit its holder, if one did
	// reported: no longer than a lease (and the server's expiry grain)
	// after a fault hit its holder, or a grant came to a waiter that a
	// fault of its own held (the lease doing its job), or than a lease and
	// undone by the give-up of
	// the run's end (undoneAtEnd: hiatus's doing). A longer one is the
	// library's: its grant held the key while every worker waited, which
	// no worker's lock call after it can tell from the run's end.
	reported bool
}

// undoneAtEnd reports whether span s was granted to an acquire the run's
// end gave up, and undone by that give-up: its own connection deleted the
// key no earlier than the last lock call a worker began (the run ended
// after it). A grant of such an acquire that the library let lapse, or
// undid before the run's end, is the library's.
func (v *recordView) undoneAtEnd(s span, lastCall int64) bool {
	if s.why != whyGaveUp || s.endHow != endDelete || s.endEv < 0 || v.evs[s.endEv].client != s.client {
		return false
	}
	return !v.before(s.end, lastCall)
}

// lastCall is when the last lock call a worker began was invoked.
func (v *recordView) lastCall() int64 {
	var last int64
	for _, c := range v.calls {
		if !c.retire {
			last = max(last, c.inv)
		}
	}
	return last
}

// orphans finds the record's orphans; lease is the history's, for a
// grant the record and its holder give none; end is the history's end,
// where a key the record leaves held is taken as held to.
func (v *recordView) orphans(lease, end int64) []orphan {
	held, lastCall := v.heldIntervals(), v.lastCall()
	if n := len(v.evs); n > 0 {
		end = max(end, v.evs[n-1].time)
	}
	var out []orphan
	for i := range v.spans {
		s := &v.spans[i]
		if s.status == holdMaybe {
			continue
		}
		from := s.start
		if s.status == holdKnown {
			if s.heldTo == math.MaxInt64 {
				continue
			}
			from = max(from, satAdd(s.heldTo, v.slack))
		}
		for _, piece := range uncovered(from, min(s.end, end), held) {
			n, first := refusedIn(v.refuses[s.key], piece[0], piece[1])
			if n == 0 {
				continue
			}
			o := orphan{span: i, start: piece[0], end: piece[1], refused: n, firstRef: first, lease: cmp0(s.lease, v.holderLease(s), lease)}
			o.grain = min(s.grain, o.lease)
			switch {
			case s.status == holdKnown:
				if f, ok := v.faultOn(v.calls[s.holder].process, v.calls[s.holder].inv, piece[0]); ok {
					o.fault = &f
				}
			case s.after >= 0 && s.why != whyNoCall:
				// The grant fell inside an acquire of the stopped worker's;
				// one that came after its acquire ended (whyNoCall) went to
				// no one, stopped or not.
				if f, ok := v.hitAt(v.calls[s.after].process, s.start); ok {
					o.fault = &f
				}
			}
			o.reported = o.fault != nil && o.lease > 0 && o.end-o.start <= o.lease+o.grain
			o.reported = o.reported || v.undoneAtEnd(*s, lastCall) && o.lease > 0 && o.end-o.start <= o.lease
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b orphan) int { return cmp.Compare(a.start, b.start) })
	return out
}

func (v *recordView) holderLease(s *span) int64 {
	if s.status == holdKnown {
		return v.calls[s.holder].leaseNS
	}
	return 0
}

// cmp0 is the first of xs that is not 0.
func cmp0(xs ...int64) int64 {
	for _, x := range xs {
		if x > 0 {
			return x
		}
	}
	return 0
}

// uncovered is [from, to) less the merged intervals held, as pieces. An
// end of math.MaxInt64 is the record's end.
func uncovered(from, to int64, held [][2]int64) [][2]int64 {
	var out [][2]int64
	k := sort.Search(len(held), func(k int) bool { return held[k][1] > from })
	for ; k < len(held) && held[k][0] < to && from < to; k++ {
		if held[k][0] > from {
			out = append(out, [2]int64{from, held[k][0]})
		}
		from = max(from, held[k][1])
	}
	if from < to {
		out = append(out, [2]int64{from, to})
	}
	return out
}

// refusedIn counts the refusals in [from, to), and gives the first.
func refusedIn(times []int64, from, to int64) (int, int64) {
	lo := sort.Search(len(times), func(k int) bool { return times[k] >= from })
	hi := sort.Search(len(times), func(k int) bool { return times[k] >= to })
	if hi <= lo {
		return 0, 0
	}
	return hi - lo, times[lo]
}

// A grantFence is a grant of the record and the fence it took.
type grantFence struct {
	span  int
	fence int64
	at    int64 // when the fence was handed out
	// seen says at is the record's INCR of the fence, the server's
	// time; else it is when the acquire was answered with it.
	seen bool
}

// grantFences gives each span the fence its grant took: its holder's, as
// the history has it, or else the first :fence its connection took after
// the grant and before its next.
func (v *recordView) grantFences() []grantFence {
	var out []grantFence
	for i, s := range v.spans {
		g := grantFence{span: i, fence: -1}
		if s.status == holdKnown && v.calls[s.holder].fence > 0 {
			c := v.calls[s.holder]
			g.fence, g.at = c.fence, c.done
			for _, k := range v.fences {
				if e := v.evs[k]; e.value == c.fence && v.within(e.time, c.inv, c.done) {
					g.at, g.seen = e.time, true
				}
			}
		} else if f, at, ok := v.fenceAfter(i); ok {
			g.fence, g.at, g.seen = f, at, true
		}
		if g.fence > 0 {
			out = append(out, g)
		}
	}
	return out
}

// fenceAfter is the first :fence of span i's connection after its grant
// and before that connection's next grant.
func (v *recordView) fenceAfter(i int) (int64, int64, bool) {
	s := v.spans[i]
	if s.client == "" {
		return 0, 0, false
	}
	next := int64(math.MaxInt64)
	for _, t := range v.spans[i+1:] {
		if t.client == s.client {
			next = t.start
			break
		}
	}
	k := sort.Search(len(v.fences), func(k int) bool { return v.evs[v.fences[k]].time >= s.start })
	for ; k < len(v.fences); k++ {
		e := v.evs[v.fences[k]]
		if e.time >= next {
			break
		}
		if e.client == s.client {
			return e.value, e.time, true
		}
	}
	return 0, 0, false
}

// inversions finds the grants that took a fence no larger than a grant
// before them: [earlier later] pairs of grantFences, in the order of the
// later grants.
func inversions(gs []grantFence) [][2]grantFence {
	var out [][2]grantFence
	var top grantFence
	for i, g := range gs {
		if i > 0 && g.fence <= top.fence {
			out = append(out, [2]grantFence{top, g})
		}
		if i == 0 || g.fence > top.fence {
			top = g
		}
	}
	return out
}

// A falseOK is a lock call the library answered :ok that the record
// shows did not hold, or a grant the server made over a live holder's key.
type falseOK struct {
	from  int64 // where its evidence begins: the grant of the key it judged
	at    int64 // when: the call's completion, or the grant
	op    int64 // the call's :index, or the record event's
	call  history.Keyword
	proc  history.Process
	layer history.Keyword
	words string
}

// falseOKs holds every :ok lock call to what the record shows, and lists
// the grants the server made while another live holder's key held; judged
// counts the calls the record could judge.
func (v *recordView) falseOKs() (out []falseOK, judged int) {
	for i, c := range v.calls {
		if c.typ != history.Ok || c.retire || !v.slots[v.slot(c.process)] && v.spanOf[i] == 0 && !v.matched(i) {
			continue
		}
		judged++
		var f *falseOK
		switch c.f {
		case history.FAcquire:
			f = v.acquireOK(i)
		case history.FRelease:
			f = v.releaseOK(i)
		default:
			f = v.renewOK(i)
		}
		if f != nil {
			out = append(out, *f)
		}
	}
	out = append(out, v.serverGrants()...)
	slices.SortStableFunc(out, func(a, b falseOK) int { return cmp.Compare(a.at, b.at) })
	return out, judged
}

func (v *recordView) matched(call int) bool {
	_, ok := v.spanOf[call]
	return ok
}

// acquireOK judges an acquire answered :ok: the server granted it, and its
// key was still its when it was answered.
func (v *recordView) acquireOK(i int) *falseOK {
	c := v.calls[i]
	f := &falseOK{from: c.inv, at: c.done, op: c.doneIdx, call: c.f, proc: c.process, layer: layerLibrary}
	j, ok := v.spanOf[i]
	if !ok {
		f.words = fmt.Sprintf("%s answered ok at %s, but the server's record has no grant to it: the key was %s then",
			v.callName(c), secs(c.done), v.keyAt(c.done))
		if words, ok := v.lineWords(c); ok {
			f.words = words
		}
		return f
	}
	s := v.spans[j]
	f.from = min(f.from, s.start)
	if !v.before(s.end, c.done) {
		return nil
	}
	if v.answeredInTime(c, s) || v.heldDuring(c, s) {
		return nil // it may have been answered while its key held: an ok that came late
	}
	if v.grantAfterGone(c, s) {
		f.layer = layerServer
	}
	f.words = fmt.Sprintf("%s was answered ok at %s, after its key was gone (%s)", v.callName(c), secs(c.done), v.endWords(s))
	if !v.heldLock(s, c.inv) {
		f.words = fmt.Sprintf("%s was answered ok (granted) at %s after its key was gone (%s; older keys held the lock while it lived): its grant came after its key was gone",
			v.callName(c), secs(c.done), v.endWords(s))
	}
	return f
}

// grantAfterGone reports whether the record has the server grant c's
// connection the lock after s, its key, was gone: the server's own word.
func (v *recordView) grantAfterGone(c lockCall, s span) bool {
	for _, e := range v.evs[max(s.endEv, 0):] {
		if e.time > c.done {
			break
		}
		if e.act == history.SGrant && e.time > s.end && e.client == s.client && (e.token == s.token || e.key == s.key) {
			return true
		}
	}
	return false
}

// renewOK judges an extend or a renew answered :ok: its section's key was
// still its section's when it was answered.
func (v *recordView) renewOK(i int) *falseOK {
	c := v.calls[i]
	j, ok := v.byToken[c.token] // a renewal names its grant
	if c.token == "" || !ok {
		a := v.sectionAt(c.process, c.inv)
		if j, ok = v.spanOf[a]; a < 0 || !ok {
			return nil // no grant to judge it by: the acquire is judged
		}
	}
	s := v.spans[j]
	f := &falseOK{from: min(s.start, c.inv), at: c.done, op: c.doneIdx, call: c.f, proc: c.process, layer: layerLibrary}
	if e, mine := v.removedBy(s, c, false); mine && !v.releasing(s, e.time) { // whenever the ok came, the call itself took the key away
		other := ""
		if n := v.takerBefore(j, s.heldTo); n >= 0 {
			other = fmt.Sprintf("; %s took the lock at %s", clientName(v.spans[n].client), secs(v.spans[n].start))
		}
		f.words = fmt.Sprintf("%s's %s (%s at %s) deleted its own key, and was answered ok%s", clientName(e.client), c.f, e.command, secs(e.time), other)
		return f
	}
	if !v.before(s.end, c.done) {
		return nil
	}
	if !v.before(s.end, c.inv) && v.answeredInTime(c, s) {
		return nil
	}
	f.words = fmt.Sprintf("%s answered ok at %s, but its key was gone (%s)", v.callName(c), secs(c.done), v.endWords(s))
	n := v.spanAt(s.key, c.done)
	switch {
	case n < 0 || n == j:
	case v.spans[n].token == s.token && s.token != "":
		// The library set the lapsed key again with the grant's token:
		// a new grant, answered as the old one's renewal.
		o := v.spans[n]
		f.words += fmt.Sprintf(", and %s's %s at %s set it again with its token", clientName(o.client), v.evs[o.startEv].command, secs(o.start))
		if k := v.takerBefore(j, o.start); k >= 0 {
			f.words += fmt.Sprintf(", after %s had taken the lock at %s", clientName(v.spans[k].client), secs(v.spans[k].start))
		}
	default:
		o := v.spans[n]
		f.words += fmt.Sprintf(", and the key was %s then (its %s at %s)", clientName(o.client)+"'s", grantVerb(v.evs[o.startEv]), secs(o.start))
	}
	return f
}

// spanAt is the span of key that held it at time t; -1 if none.
func (v *recordView) spanAt(key string, t int64) int {
	for i := len(v.spans) - 1; i >= 0; i-- {
		if s := v.spans[i]; s.key == key && s.start <= t && s.end > t {
			return i
		}
	}
	return -1
}

// releasing reports whether the release that ended span s's section was
// under way at time t: a delete then is the release's, not a renewal's
// beside it.
func (v *recordView) releasing(s span, t int64) bool {
	if s.endCall < 0 {
		return false
	}
	r := v.calls[s.endCall]
	return r.f == history.FRelease && v.within(t, r.inv, r.done)
}

// removedBy reports whether span s's key was removed by a command of
// call c's connection while c was under way, and gives the event; unnamed
// is the answer for a connection the record cannot name (sameConn).
func (v *recordView) removedBy(s span, c lockCall, unnamed bool) (serverEvent, bool) {
	if s.endEv < 0 || s.endHow != endDelete {
		return serverEvent{}, false
	}
	e := v.evs[s.endEv]
	return e, v.sameConn(e, c, unnamed) && v.within(e.time, c.inv, c.done)
}

// sameConn reports whether event e came from call c's connection; unnamed
// says what to report when the record cannot name e's connection: a
// ZooKeeper znode deleted before the record read whose session it was, a
// replica's command from its primary, whoever sent it there.
func (v *recordView) sameConn(e serverEvent, c lockCall, unnamed bool) bool {
	if e.client == "" || e.client == history.ClientPrimary {
		return unnamed
	}
	n, ok := v.clientSlot(e.client)
	return ok && n == v.slot(c.process)
}

// deletedNext reports whether span s's key was deleted by call c's
// connection after c was answered, as the next thing the record has of
// the key: a record stamped when its events arrive (etcd's watch) stamps
// the release's delete after the release's answer, by the watch's latency.
func (v *recordView) deletedNext(s span, c lockCall) bool {
	if s.endEv < 0 || s.endHow != endDelete {
		return false
	}
	e := v.evs[s.endEv]
	if !v.sameConn(e, c, false) || e.time <= c.done {
		return false
	}
	for k := s.endEv - 1; k >= 0 && v.before(c.done, v.evs[k].time); k-- {
		if v.evs[k].key == s.key && v.evs[k].time != e.time {
			return false // the server did more of the key between the answer and the delete
		}
	}
	return true
}

// releaseOK judges a release answered :ok: its section's key was its
// until the release removed it.
func (v *recordView) releaseOK(i int) *falseOK {
	c := v.calls[i]
	a := v.sectionAt(c.process, c.inv)
	j, ok := v.spanOf[a]
	if a < 0 || !ok {
		return nil
	}
	s := v.spans[j]
	f := &falseOK{from: min(s.start, c.inv), at: c.done, op: c.doneIdx, call: c.f, proc: c.process, layer: layerLibrary}
	// A delete the record cannot name may be this release's: no verdict.
	if _, mine := v.removedBy(s, c, true); mine || v.deletedNext(s, c) {
		return nil
	}
	switch {
	case v.before(c.done, s.end):
		f.words = fmt.Sprintf("%s answered ok at %s, but its key held on until %s", v.callName(c), secs(c.done), v.untilWords(s))
	case v.before(s.end, c.inv):
		f.words = fmt.Sprintf("%s answered ok at %s, but its key was already gone (%s): a release of a lapsed lock", v.callName(c), secs(c.done), v.endWords(s))
	default:
		if v.answeredInTime(c, s) {
			return nil
		}
		f.words = fmt.Sprintf("%s answered ok at %s, but it did not remove its key (%s)", v.callName(c), secs(c.done), v.endWords(s))
	}
	return f
}

// heldDuring reports whether acquire c's key s, which expired, was granted
// to it and held the lock at some moment while c was in flight: the answer may have been
// given then, however late it was written down (an op takes effect at some
// moment between its invocation and its completion, and a process stalled
// by the machine, a pause no fault made, records its ok late). A false ok
// is one the record contradicts at every such moment.
func (v *recordView) heldDuring(c lockCall, s span) bool {
	// Only an expiry: a late ok explains no delete nor overwrite.
	return s.endHow == endExpire && !v.before(s.end, c.inv) && v.heldLock(s, c.inv)
}

// answeredInTime reports whether call c may have been answered while its
// key s still held and only then stopped, so that its :ok came late: s
// expired, a fault froze c's process between the expiry and the :ok, and
// s could have held the lock after c began (heldLock).
func (v *recordView) answeredInTime(c lockCall, s span) bool {
	if s.endHow != endExpire {
		return false
	}
	if _, ok := v.pauseOf(c.process, s.end, c.done); !ok {
		return false
	}
	return v.heldLock(s, c.inv)
}

// heldLock reports whether key s could have held the lock at some point
// from time from until it was gone: no older key of another held it
// throughout (as etcd's keys wait in line behind the oldest).
func (v *recordView) heldLock(s span, from int64) bool {
	var older [][2]int64
	for _, o := range v.spans {
		if o.key != s.key && o.start < s.start && o.end > from {
			older = append(older, [2]int64{o.start, o.end})
		}
	}
	slices.SortFunc(older, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var merged [][2]int64
	for _, x := range older {
		if n := len(merged); n > 0 && x[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], x[1])
			continue
		}
		merged = append(merged, x)
	}
	return len(uncovered(max(s.start, from), s.end, merged)) > 0
}

// serverGrants are the grants the server made while another live
// holder's key still held the lock, and the overwrites a library made of
// one.
func (v *recordView) serverGrants() []falseOK {
	var out []falseOK
	for i := 1; i < len(v.spans); i++ {
		s, prev := v.spans[i], v.spans[i-1]
		for k := i - 1; k >= 0 && prev.key != s.key; k-- {
			prev = v.spans[k]
		}
		if prev.key != s.key || prev.endEv != s.startEv || prev.endHow != endGrant && prev.endHow != endOverwrite {
			continue
		}
		if prev.status != holdKnown || v.before(prev.heldTo, s.start) {
			continue // no live holder's key (one of unknown outcome is not known to be)
		}
		e := v.evs[s.startEv]
		f := falseOK{from: prev.start, at: s.start, op: e.index, call: e.act, proc: -1, layer: layerServer}
		f.words = fmt.Sprintf("the server granted %s the lock at %s (%s) while %s's key still held it (its deadline %s)",
			clientName(s.client), secs(s.start), e.command, clientName(prev.client), deadlineWords(prev.deadline))
		if prev.endHow == endOverwrite {
			f.layer = layerLibrary
			f.words = fmt.Sprintf("%s's SET without NX (%s at %s) overwrote %s's key, which still held the lock", clientName(s.client), e.command, secs(s.start), clientName(prev.client))
		}
		out = append(out, f)
	}
	return out
}

// takerBefore is the span of the same key that followed span j, begun
// before until by another connection: who took the lock while span j's
// holder still went on; -1 if none.
func (v *recordView) takerBefore(j int, until int64) int {
	n := v.nextSpan(j)
	if n < 0 || v.spans[n].start >= until || v.spans[n].client == v.spans[j].client {
		return -1
	}
	return n
}

// nextSpan is the span of the same key that followed span j, -1 if none.
func (v *recordView) nextSpan(j int) int {
	for k := j + 1; k < len(v.spans); k++ {
		if v.spans[k].key == v.spans[j].key {
			return k
		}
	}
	return -1
}

// keyAt says whose the key was at time t.
func (v *recordView) keyAt(t int64) string {
	for i := len(v.spans) - 1; i >= 0; i-- {
		if s := v.spans[i]; s.start <= t && s.end > t {
			return clientName(s.client) + "'s"
		}
	}
	return "free"
}

// endWords says how span s ended: "it expired at 1.234 s".
func (v *recordView) endWords(s span) string {
	switch s.endHow {
	case endExpire:
		return "it expired at " + secs(s.end)
	case endDelete:
		e := v.evs[s.endEv]
		return fmt.Sprintf("%s's %s deleted it at %s", clientName(e.client), e.command, secs(s.end))
	case endOverwrite:
		e := v.evs[s.endEv]
		return fmt.Sprintf("%s's %s overwrote it at %s", clientName(e.client), e.command, secs(s.end))
	case endGrant:
		return fmt.Sprintf("the server granted %s the lock over it at %s", clientName(v.evs[s.endEv].client), secs(s.end))
	}
	return "it held to the record's end"
}

// untilWords says until when span s held.
func (v *recordView) untilWords(s span) string {
	if s.endHow == endNone {
		return "the record's end"
	}
	return v.endWords(s)
}

// callName names a lock call: "worker 1's renew (op 52)".
func (v *recordView) callName(c lockCall) string {
	return fmt.Sprintf("process %v's %s (op %d)", c.process, c.f, c.doneIdx)
}

// clientName writes a connection's name for words: "worker-2" as
// "worker 2".
func clientName(client string) string {
	if client == "" {
		return "a connection of no name"
	}
	return strings.Replace(client, "-", " ", 1)
}

// secs writes a time of the history's clock as seconds from its start,
// "4.062 s"; a time below a millisecond, as a hand-made history's small
// integers are, in nanoseconds: "12 ns".
func secs(t int64) string {
	if t >= 0 && t < 1e6 {
		return fmt.Sprintf("%d ns", t)
	}
	return fmt.Sprintf("%.3f s", float64(t)/1e9)
}

func deadlineWords(d int64) string {
	if d == history.Unset {
		return "none"
	}
	return secs(d)
}
