package checker

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// This file holds the words that explain a violation.

// explain says in words which op could not be linearized and why.
func (lr *linearRun) explain(v violation, model string) string {
	if v.part < 0 {
		return "porcupine found the history not linearizable, but gave no operation to blame"
	}
	m := v.op.Metadata.(opMeta)
	what := lr.model.DescribeOperation(v.op.Input, v.op.Output)
	span := fmt.Sprintf("invoked at %s", opName(lr.hist, m.inv))
	if m.done >= 0 {
		span += fmt.Sprintf(", completed at %s", opName(lr.hist, m.done))
	} else {
		span += ", never completed"
	}
	states := make([]string, len(v.states))
	for i, s := range v.states {
		states[i] = fmt.Sprint(s)
	}
	msg := fmt.Sprintf("%s (process %v: %s; %s) cannot be linearized: the orders of the ops before it that the %s allows (the furthest linearizes %d) leave it at %s, where %s is impossible",
		opName(lr.hist, v.completion()), m.process, what, span, model, len(v.prefix), orList(states), what)
	if n := len(v.prefix); n > 0 {
		last := v.prefix[n-1]
		lm := last.Metadata.(opMeta)
		msg += fmt.Sprintf("; the last op linearized is %s (process %v: %s)",
			opName(lr.hist, writeOf(lm)), lm.process, lr.model.DescribeOperation(last.Input, last.Output))
	}
	return msg
}

func orList(xs []string) string {
	switch len(xs) {
	case 0:
		return "no state"
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// explainLockCounter explains porcupine's lock-counter violation in the
// terms of the lock: the writes that collided and the pause that let them.
func (s *Stream) explainLockCounter(lr *linearRun, v violation) (string, []Field) {
	if v.part < 0 {
		return lr.explain(v, ModelLockCounter), nil
	}
	in := v.op.Input.(lcOp)
	m := v.op.Metadata.(opMeta)
	if !in.write {
		return fmt.Sprintf("%s (process %v) read %d, but the writes before it leave the counter at %s: %s",
			s.name(v.completion()), m.process, in.value, orList(toStrings(v.states)), lr.lostHint()), nil
	}
	// Another acknowledged write of the same value collided with this one.
	for _, other := range lr.parts[v.part] {
		o, om := other.Input.(lcOp), other.Metadata.(opMeta)
		if !o.write || o.maybe || o.value != in.value || om.inv == m.inv {
			continue
		}
		first, second := om, m
		if writeOf(first) > writeOf(second) {
			first, second = second, first
		}
		msg := fmt.Sprintf("%s and %s both wrote %d", s.name(writeOf(first)), s.name(writeOf(second)), in.value)
		if c := s.collisionCause(s.callAt(first), s.callAt(second)); c != "" {
			msg += "; " + c
		}
		return msg, []Field{{"colliding", []any{s.id(writeOf(first)), s.id(writeOf(second))}}}
	}
	msg := fmt.Sprintf("%s (process %v) %s, but the writes before it leave the counter at %s",
		s.name(writeOf(m)), m.process, did(s.callAt(m)), orList(toStrings(v.states)))
	if c := s.cause(s.callAt(m)); c != "" {
		msg += "; " + c
	}
	return msg, nil
}

// callAt is the counter operation porcupine's op m was made from.
func (s *Stream) callAt(m opMeta) lcCall {
	for _, c := range s.calls.slice() {
		if c.inv == m.inv {
			return c
		}
	}
	return lcCall{inv: m.inv, done: m.done, process: m.process, call: history.Unset, write: true}
}

// explainWalk says in words where the counter walk w stopped, and gives the
// evidence for results.edn.
func (s *Stream) explainWalk(w *counterWalk, v walkViolation, initial int64) (string, []Field) {
	c := s.calls.get(v.op)
	fields := []Field{{"op", s.id(c.pos())}, {"process", int64(c.process)}, {"value", v.value}}
	var msg string
	switch v.fault {
	case faultBelow:
		msg = fmt.Sprintf("%s %s, but the counter starts at %d and only rises", s.who(c), did(c), initial)
	case faultNotIncrement:
		msg = fmt.Sprintf("%s %s: a section writes what it read plus one", s.who(c), did(c))
	case faultCollision:
		first := s.calls.get(v.other)
		msg = fmt.Sprintf("%s and %s both wrote %d", s.name(first.pos()), s.name(c.pos()), v.value)
		if first.read && c.read && first.from == c.from {
			msg += fmt.Sprintf(" after reading %d", c.from)
		}
		if cause := s.collisionCause(first, c); cause != "" {
			msg += "; " + cause
		}
		return msg, append(fields, Field{"colliding", []any{s.id(first.pos()), s.id(c.pos())}})
	case faultGap:
		msg = fmt.Sprintf("%s %s, but no write, acknowledged or of unknown outcome, made the counter %d", s.who(c), did(c), v.value)
	case faultFence:
		o := s.calls.get(v.other)
		fields = append(fields, Field{"other", s.id(o.pos())})
		had := fmt.Sprintf("%s had written %d with fence %d before it", s.who(o), o.value, o.fence)
		if o.maybe {
			had = fmt.Sprintf("in every order the history allows, a write with a fence of %d or more took effect before it (such as %s, a write of %d whose outcome is unknown)",
				o.fence, s.who(o), o.value)
		}
		msg = fmt.Sprintf("%s wrote %d with fence %d, but %s: a fence takes effect only above every fence before it", s.who(c), c.value, c.fence, had)
		if c.maybe {
			msg = fmt.Sprintf("the counter must have reached %d, which only writes of unknown outcome wrote; the first, %s, carries fence %d, but %s: a fence takes effect only above every fence before it",
				v.value, s.who(c), c.fence, had)
		}
	case faultOrder:
		var more []Field
		msg, more = s.explainOrder(w, v, c)
		fields = append(fields, more...)
	}
	if c.write {
		if cause := s.cause(c); cause != "" {
			msg += "; " + cause
		}
	}
	return msg, fields
}

// explainOrder explains a faultOrder of the walk w, where c is the op blamed.
func (s *Stream) explainOrder(w *counterWalk, v walkViolation, c lcCall) (string, []Field) {
	o := s.calls.get(v.other)
	fields := []Field{{"other", s.id(o.pos())}}
	if v.staleRead {
		done := fmt.Sprintf("read %d", o.value)
		if o.write {
			done = fmt.Sprintf("written %d", o.value)
		}
		return fmt.Sprintf("%s read %d, but %s had %s before it began: the counter was at least %d by then",
			s.who(c), c.value, s.who(o), done, v.value), fields
	}
	if !c.write && o.write && !o.maybe && o.value == c.value {
		// A read of k completed before the acknowledged write of k began: a
		// write of unknown outcome made k, and o wrote it again. (Not said
		// of a fenced one, which its fence may have kept from landing.)
		if ms := unfenced(w.maybeWriters(c.value, w.item(v.op).r)); len(ms) > 0 {
			m := s.calls.get(ms[0].i)
			fields = append(fields, Field{"maybe-writer", s.id(m.pos())})
			only := fmt.Sprintf("only %s, a write of unknown outcome%s,", s.who(m), s.at("invoked", m.call))
			if len(ms) > 1 {
				only = fmt.Sprintf("only the %d writes of unknown outcome invoked before it (first %s%s)", len(ms), s.who(m), s.at("invoked", m.call))
			}
			again := fmt.Sprintf("%s then wrote %d again%s", s.who(o), o.value, s.at("invoked", o.call))
			if o.read {
				again += fmt.Sprintf(" after reading %d", o.from)
			}
			msg := fmt.Sprintf("%s read %d%s, which %s could have produced; %s: an update was lost",
				s.who(c), c.value, s.at("completed", c.ret), only, again)
			if cause := s.cause(o); cause != "" {
				msg += "; " + cause
			}
			return msg, fields
		}
	}
	reached := v.value
	if c.write {
		reached--
	}
	wrote := fmt.Sprintf("which wrote %d", o.value)
	if o.maybe {
		wrote = fmt.Sprintf("whose write of %d has an unknown outcome and is the only one that can have made it", o.value)
		if n := len(w.maybeWriters(o.value, math.MaxInt64)); n > 1 {
			wrote = fmt.Sprintf("whose write of %d has an unknown outcome (and none of the %d other writes of %d of unknown outcome fits an order the history allows either)", o.value, n-1, o.value)
		}
	}
	return fmt.Sprintf("%s %s, but completed before %s, %s, began at %s: the counter cannot have reached %d by then",
		s.who(c), did(c), s.who(o), wrote, s.name(o.inv), reached), fields
}

// unfenced keeps the writes that carry no fence.
func unfenced(items []walkItem) []walkItem {
	var out []walkItem
	for _, it := range items {
		if it.fence == 0 {
			out = append(out, it)
		}
	}
	return out
}

// who names call c and its process.
func (s *Stream) who(c lcCall) string {
	return fmt.Sprintf("%s (process %v)", s.name(c.pos()), c.process)
}

// at says what happened when, on the history's clock from its first op:
// " (completed at +34ms)"; "" in a history without times.
func (s *Stream) at(what string, t int64) string {
	if !s.timed {
		return ""
	}
	return fmt.Sprintf(" (%s at +%v)", what, time.Duration(t-s.firstTime))
}

// did says what call c did.
func did(c lcCall) string {
	switch {
	case c.write && c.read:
		return fmt.Sprintf("wrote %d after reading %d", c.value, c.from)
	case c.write:
		return fmt.Sprintf("wrote %d, its section having read nothing", c.value)
	}
	return fmt.Sprintf("read %d", c.value)
}

// describeProof says which read proves that a write of unknown outcome took
// effect.
func (s *Stream) describeProof(p proof) string {
	rd, m := s.calls.get(p.read), s.calls.get(p.maybe)
	// A fenced write may have been refused; then nothing explains the read,
	// and :linear says so.
	landed := ""
	if m.fence > 0 {
		landed = " (if fences let it land)"
	}
	kind, kinds := "a write of unknown outcome", "writes of unknown outcome"
	if m.late {
		kind, kinds = "a write the audit table settled after the run, which landed at no known time", "writes of unknown outcome or time"
	}
	if p.n == 1 {
		return fmt.Sprintf("%s read %d, which only %s, %s, could have produced%s", s.who(rd), rd.value, s.who(m), kind, landed)
	}
	return fmt.Sprintf("%s read %d, which only the %d %s invoked before it (first %s) could have produced%s",
		s.who(rd), rd.value, p.n, kinds, s.who(m), landed)
}

// collisionCause says what let two increments of one value collide: the
// pause behind either, else the lease either outlived.
func (s *Stream) collisionCause(a, b lcCall) string {
	for _, paused := range []bool{true, false} {
		for _, c := range []lcCall{a, b} {
			if why := s.sectionCause(c, paused); why != "" {
				return why
			}
		}
	}
	return ""
}

// cause says what let increment c's section lose the lock: a pause, else a
// lease it outlived; "" if neither.
func (s *Stream) cause(c lcCall) string {
	if why := s.sectionCause(c, true); why != "" {
		return why
	}
	return s.sectionCause(c, false)
}

// whileHolding is how a pause's words say the section held its lease,
// as the history has it; toldHeld makes it the library's word alone.
const whileHolding = "while holding a"

// toldHeld rewrites, in explanation expl, the words of a pause of process
// p "while holding a N ms lease" as "while told it held a N ms lease":
// the record shows its section had no key at the server.
func toldHeld(expl string, p history.Process) string {
	for _, lead := range []string{fmt.Sprintf("process %v was paused (", p), fmt.Sprintf("process %v (op ", p)} {
		i := strings.Index(expl, lead)
		if i < 0 {
			continue
		}
		clause, _, _ := strings.Cut(expl[i:], ";")
		if j := strings.Index(clause, " "+whileHolding+" "); j >= 0 {
			return expl[:i+j] + " while told it held a " + expl[i+j+len(whileHolding)+2:]
		}
	}
	return expl
}

// sectionCause says what let increment c's section lose the lock: with
// paused, the pause that stopped its process while it held the lock;
// otherwise, a write sent after its lease had expired. "" if neither.
func (s *Stream) sectionCause(c lcCall, paused bool) string {
	sec, ok := s.secs.sectionOf(c.process, c.call)
	if !ok {
		return ""
	}
	pa, ok := pauseDuring(sec, s.pauses.pauses)
	if ok && paused {
		msg := fmt.Sprintf("process %v (%s) was stopped by nemesis op %d (%s) for %d ms %s %d ms lease",
			c.process, s.name(c.pos()), pa.Index, pa.Kind, (pa.End-pa.Start)/1e6, whileHolding, sec.LeaseNS/1e6)
		if why := s.renewalCause(sec, &pa); why != "" {
			msg += ", but " + why // the pause did not cost the grant: the lock's renewals tell what did
		}
		return msg
	}
	if !ok && paused {
		if why := s.renewalCause(sec, nil); why != "" {
			return fmt.Sprintf("process %v (%s): %s", c.process, s.name(c.pos()), why)
		}
	}
	if !paused && sec.LeaseNS > 0 && sec.WriteInv > sec.Start+sec.LeaseNS {
		return fmt.Sprintf("process %v sent %s %d ms after its acquire, past its %d ms lease",
			c.process, s.name(c.pos()), (sec.WriteInv-sec.Start)/1e6, sec.LeaseNS/1e6)
	}
	return ""
}

// lostHint says what a read that no order of increments explains means.
func (lr *linearRun) lostHint() string {
	n := 0
	for _, p := range lr.parts {
		for _, op := range p {
			if in := op.Input.(lcOp); in.write && !in.maybe {
				n++
			}
		}
	}
	return fmt.Sprintf("%d writes were acknowledged, so some were lost or made twice", n)
}

// writeOf is the position of an increment's write: its completion, or for
// one that never completed its invocation's read.
func writeOf(m opMeta) int {
	if m.done >= 0 {
		return m.done
	}
	return m.inv
}

func toStrings(xs []any) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprint(x)
	}
	return out
}
