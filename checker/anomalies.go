package checker

import (
	"fmt"

	"github.com/hiatus-dev/hiatus/history"
)

// This file makes the results of the three anomalies of a lock
// (docs/checkers.md): :availability (orphans), :fence-order (fence
// inversions) and, with the lock server's record, :lock-server (false
// oks).

// The sources of an anomaly check's figures.
const (
	sourceHistory history.Keyword = "history" // the history alone
	sourceRecord  history.Keyword = "record"  // the lock server's record beside it
)

// anomalies are the anomaly checks of the Stream's history, and of its
// record when it has one.
func (s *Stream) anomalies() []Result {
	if s.view == nil {
		rs := []Result{s.availabilityHistory(), s.fenceOrderHistory()}
		if s.record != nil {
			// A record of several lock nodes, not matched (Record.LockNodes).
			for i := range rs {
				rs[i].Fields = append(rs[i].Fields, Field{"record-lock-nodes", s.record.LockNodes})
			}
		}
		return rs
	}
	if s.recordBad > 0 {
		why := fmt.Sprintf("%d events of the lock server's record cannot be read; first: %s", s.recordBad, s.recordFirstBad)
		return []Result{
			{Name: "availability", Valid: Unknown, Explanation: why},
			{Name: "fence-order", Valid: Unknown, Explanation: why},
			{Name: "lock-server", Valid: Unknown, Explanation: why},
		}
	}
	if n := s.view.oks(); s.view.grants() == 0 && n > 0 {
		// The record saw none of the lock's keys: a lock that keeps them
		// under names of its own, which the recorder did not watch. It says
		// nothing of the lock, and the history alone is checked, as without
		// a record; the lock's ok answers go unjudged, and the results say
		// the record had no grant.
		rs := []Result{s.availabilityHistory(), s.fenceOrderHistory()}
		for i := range rs {
			rs[i].Fields = append(rs[i].Fields, Field{"record-grants", 0}, Field{"unjudged-oks", n})
		}
		return rs
	}
	rs := []Result{s.availabilityRecord(), s.fenceOrderRecord(), s.lockServer()}
	if s.view.slack > DefaultSlack {
		// The record said its stamps were known no better (Record.Slack):
		// what its findings rested on is said beside them.
		for i := range rs {
			rs[i].Fields = append(rs[i].Fields, Field{"record-slack-ms", (s.view.slack + 1e6 - 1) / 1e6})
		}
	}
	return rs
}

// availabilityHistory is :availability by the history alone: its orphans
// are its gaps longer than a lease.
func (s *Stream) availabilityHistory() (r Result) {
	const name = "availability"
	defer recovered(name, &r)
	t := &s.locks
	r = Result{Name: name, Valid: Valid, Fields: []Field{
		{"source", sourceHistory},
		{"orphans", t.gaps},
		{"orphan-max-ms", t.maxGap / 1e6},
		{"orphans-reported", 0},
	}}
	if t.gaps == 0 {
		return r
	}
	g := t.first
	r.Valid = Invalid
	r.Fields = append(r.Fields, Field{"orphan-examples", []any{map[history.Keyword]any{
		"start-ms": g.start / 1e6, "ms": (g.end - g.start) / 1e6, "waiter": int64(g.waiter), "lease-ms": g.lease / 1e6,
	}}})
	longer := fmt.Sprintf("longer than its %d ms lease", g.lease/1e6)
	if g.threshold() > g.lease {
		longer = fmt.Sprintf("longer than twice its %d ms lease: the one its holder's key may outlive it by, and one more", g.lease/1e6)
	}
	r.Explanation = fmt.Sprintf("by the history alone, from %s to %s (%d ms, %s) no process held the lock or could have (%s), while %s waited for it: a key no live holder had, or a lock slower to hand itself over than its lease",
		secs(g.start), secs(g.end), (g.end-g.start)/1e6, longer, s.lastWords(g.after), s.waiterWords(g))
	if t.gaps > 1 {
		r.Explanation += fmt.Sprintf("; %d such orphans, the longest %d ms", t.gaps, t.maxGap/1e6)
	}
	r.Explanation += "; the history cannot say which layer broke: the lock server's record can"
	return r
}

// lastWords says how the last section before a gap ended.
func (s *Stream) lastWords(h lastHolder) string {
	switch {
	case h.op < 0:
		return "no process had held it yet"
	case h.kill:
		return fmt.Sprintf("its last holder, process %v, was killed (op %d)", h.proc, h.op)
	case h.how == history.Info:
		return fmt.Sprintf("its last holder, process %v, was cut short by an :info (op %d), and a lease had passed", h.proc, h.op)
	case h.how == history.Fail:
		return fmt.Sprintf("its last holder, process %v, released it, told it was no longer its (op %d)", h.proc, h.op)
	}
	return fmt.Sprintf("its last holder, process %v, released it (op %d)", h.proc, h.op)
}

func (s *Stream) waiterWords(g *gap) string {
	if g.waiter < 0 {
		return "a process"
	}
	return fmt.Sprintf("process %v (its acquire invoked at op %d)", g.waiter, g.waitIdx)
}

// fenceOrderHistory is :fence-order by the history's order: an acquire
// invoked after another completed got a fence no larger than its.
func (s *Stream) fenceOrderHistory() (r Result) {
	const name = "fence-order"
	defer recovered(name, &r)
	t := &s.locks
	r = Result{Name: name, Valid: Valid, Fields: []Field{
		{"source", sourceHistory},
		{"fenced-grants", t.fenced},
		{"fence-inversions", t.inversions},
		{"fence-inversion-examples", t.invExample},
	}}
	if t.inversions == 0 {
		return r
	}
	r.Valid = Invalid
	v := t.firstInv
	r.Explanation = fmt.Sprintf("by the history's order: op %d (process %v) was granted fence %d, though its acquire was invoked at %s, after op %d (process %v) had been granted fence %d at %s: a later holder's writes can be refused while the stale holder's are accepted",
		v.later.op, v.later.proc, v.later.fence, secs(v.invTime), v.earlier.op, v.earlier.proc, v.earlier.fence, secs(v.earlier.time))
	if f, ok := t.restartBetween(v.earlier.time, v.invTime); ok {
		r.Explanation += fmt.Sprintf("; server: the fence counter went back when nemesis op %d (%s) took its server down", f.index, f.kind)
		r.Fields = append(r.Fields, Field{"layer", layerServer})
	}
	if t.inversions > 1 {
		r.Explanation += fmt.Sprintf("; %d such grants", t.inversions)
	}
	return r
}

// restartBetween is a kill of no one process (a server's) in force at
// some point in [from, to].
func (t *lockTracker) restartBetween(from, to int64) (faultWindow, bool) {
	for _, f := range t.faults {
		if f.f == history.FKill && f.process < 0 && f.start <= to && f.end >= from {
			return f, true
		}
	}
	return faultWindow{}, false
}

// availabilityRecord is :availability by the record: its orphans are the
// intervals in which the key held a token no live holder had while the
// server refused acquires.
func (s *Stream) availabilityRecord() (r Result) {
	const name = "availability"
	defer recovered(name, &r)
	os, unsure := s.view.sure(s.view.orphans(s.locks.lease, s.maxTime))
	var longest int64
	reported := 0
	var first *orphan
	var examples []any
	for i, o := range os {
		longest = max(longest, o.end-o.start)
		if o.reported {
			reported++
		} else if first == nil {
			first = &os[i]
		}
		if len(examples) < evidenceLimit {
			examples = append(examples, s.view.orphanEvidence(o))
		}
	}
	r = Result{Name: name, Valid: Valid, Fields: []Field{
		{"source", sourceRecord},
		{"orphans", len(os)},
		{"orphan-max-ms", longest / 1e6},
		{"orphans-reported", reported},
		{"orphan-examples", examples},
	}}
	if s.view.unsure() {
		r.Fields = append(r.Fields, Field{"unsure", unsure})
	}
	if words := s.view.unsureWords(unsure); first == nil && words != "" {
		r.Valid, r.Explanation = Unknown, words
		return r
	}
	if first == nil {
		if len(os) > 0 {
			layer, words := s.view.orphanWords(os[0])
			if layer != "" {
				words = layerName(layer) + ": " + words
			}
			r.Fields = append(r.Fields, Field{"note", words})
		}
		return r
	}
	r.Valid = Invalid
	layer, words := s.view.orphanWords(*first)
	r.Fields = append(r.Fields, Field{"layer", layer})
	r.Explanation = layerName(layer) + ": " + words
	if n := len(os) - reported; n > 1 {
		r.Explanation += fmt.Sprintf("; %d such orphans, the longest %d ms", n, longest/1e6)
	}
	return r
}

// fenceOrderRecord is :fence-order by the record's order of grants.
func (s *Stream) fenceOrderRecord() (r Result) {
	const name = "fence-order"
	defer recovered(name, &r)
	gs := s.view.grantFences()
	inv, unsure := s.view.sureInversions(inversions(gs))
	var examples []any
	for _, p := range inv {
		if len(examples) == evidenceLimit {
			break
		}
		examples = append(examples, []any{s.view.evs[s.view.spans[p[0].span].startEv].index, s.view.evs[s.view.spans[p[1].span].startEv].index})
	}
	r = Result{Name: name, Valid: Valid, Fields: []Field{
		{"source", sourceRecord},
		{"fenced-grants", len(gs)},
		{"fence-inversions", len(inv)},
		{"fence-inversion-examples", examples},
	}}
	if s.view.unsure() {
		r.Fields = append(r.Fields, Field{"unsure", unsure})
	}
	if len(inv) == 0 {
		if words := s.view.unsureWords(unsure); words != "" && (len(gs) > 0 || len(s.view.fences) > 0) {
			r.Valid, r.Explanation = Unknown, words
		}
		return r
	}
	r.Valid = Invalid
	layer, words := s.view.inversionWords(inv[0], s.locks.restartBetween)
	r.Fields = append(r.Fields, Field{"layer", layer})
	r.Explanation = layerName(layer) + ": " + words
	if len(inv) > 1 {
		r.Explanation += fmt.Sprintf("; %d such grants", len(inv))
	}
	return r
}

// lockServer is :lock-server: the lock's answers against the record.
func (s *Stream) lockServer() (r Result) {
	const name = "lock-server"
	defer recovered(name, &r)
	all, judged := s.view.falseOKs()
	fs, unsure := s.view.sureOKs(all)
	var examples []any
	for _, f := range fs {
		if len(examples) == evidenceLimit {
			break
		}
		m := map[history.Keyword]any{"op": f.op, "call": f.call, "layer": f.layer, "at-ms": f.at / 1e6}
		if f.proc >= 0 {
			m["process"] = int64(f.proc)
		}
		examples = append(examples, m)
	}
	r = Result{Name: name, Valid: Valid, Fields: []Field{
		{"false-oks", len(fs)},
		{"judged", judged},
		{"grants", s.view.grants()},
		{"false-ok-examples", examples},
	}}
	if s.view.unsure() {
		r.Fields = append(r.Fields, Field{"unsure", unsure})
	}
	switch {
	case len(fs) > 0:
		r.Valid = Invalid
		r.Fields = append(r.Fields, Field{"layer", fs[0].layer})
		r.Explanation = layerName(fs[0].layer) + ": " + fs[0].words
		if len(fs) > 1 {
			r.Explanation += fmt.Sprintf("; %d such answers", len(fs))
		}
	case judged == 0 && s.view.oks() > 0:
		r.Valid = Unknown
		r.Explanation = "the lock server's record names no connection of the history's processes (its :client is \"worker-N\" for process N) and shares no token with them: no answer could be held to it"
	case s.view.unsureWords(unsure) != "":
		r.Valid, r.Explanation = Unknown, s.view.unsureWords(unsure)
	}
	return r
}

// sure keeps the orphans the record saw whole, and counts the others.
func (v *recordView) sure(os []orphan) ([]orphan, int) {
	var out []orphan
	for _, o := range os {
		if _, blind := v.blind(v.spans[o.span].start, o.end); !blind {
			out = append(out, o)
		}
	}
	return out, len(os) - len(out)
}

// sureInversions keeps the inversions whose grants and fences the record
// saw, and counts the others.
func (v *recordView) sureInversions(ps [][2]grantFence) ([][2]grantFence, int) {
	var out [][2]grantFence
	for _, p := range ps {
		a, b := v.spans[p[0].span].start, v.spans[p[1].span].start
		if _, blind := v.blind(min(a, b), max(a, b, p[0].at, p[1].at)); !blind {
			out = append(out, p)
		}
	}
	return out, len(ps) - len(out)
}

// sureOKs keeps the false oks whose evidence the record saw whole, and
// counts the others.
func (v *recordView) sureOKs(fs []falseOK) ([]falseOK, int) {
	var out []falseOK
	for _, f := range fs {
		if _, blind := v.blind(f.from, f.at); !blind {
			out = append(out, f)
		}
	}
	return out, len(fs) - len(out)
}

// grants counts the spans a grant or overwrite began.
func (v *recordView) grants() int { return len(v.spans) }

// oks counts the lock calls answered :ok.
func (v *recordView) oks() int {
	n := 0
	for _, c := range v.calls {
		if c.typ == history.Ok && !c.retire {
			n++
		}
	}
	return n
}

// orphanEvidence is an orphan as results.edn lists it.
func (v *recordView) orphanEvidence(o orphan) map[history.Keyword]any {
	s := v.spans[o.span]
	m := map[history.Keyword]any{
		"grant": v.evs[s.startEv].index, "key": s.key, "start-ms": o.start / 1e6, "ms": (o.end - o.start) / 1e6,
		"refused": o.refused, "reported": o.reported, "lease-ms": o.lease / 1e6,
	}
	if s.status == holdKnown {
		m["holder"] = int64(v.calls[s.holder].process)
	}
	return m
}
