package checker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/hiatus-dev/hiatus/history"
)

// This file holds the evidence of a violation: the words that explain it
// and porcupine's drawing of it.

// HTMLLimit is the most operations CheckHTML draws: porcupine's
// visualization lays out every operation in the browser, which grows slow
// past a few thousand.
const HTMLLimit = 2000

// ErrNoVisualization is returned by CheckHTML when there is no
// linearizability search to draw: the counter model has none, and a
// search that never ran (ops of the wrong shape, a cancelled context)
// leaves nothing.
var ErrNoVisualization = errors.New("no linearizability search to draw")

// A Visualization says what CheckHTML drew.
type Visualization struct {
	Ops   int    // operations drawn
	Total int    // operations the search checked
	Note  string // what was left out and why; empty when nothing was
}

// CheckHTML is Check, and also writes porcupine's visualization of the
// linearizability search to w: the history, the longest linearizations
// found and, for lock-counter histories, the lease windows, pauses and
// fence rejections beside them. A history of more than HTMLLimit ops is
// drawn only in part: the window around the first violation, or its start
// when there is none; the Visualization says which. The results are
// Check's even when the drawing fails.
func CheckHTML(ctx context.Context, w io.Writer, ops []history.Op, opts Options) (Results, Visualization, error) {
	p, err := newPlan(ops, opts)
	if err != nil {
		return Results{}, Visualization{}, err
	}
	rs, lr := p.run(ctx, true)
	if lr == nil {
		why := "the " + p.model + " model has no linearizability search"
		if r, ok := rs.Check("linear"); ok {
			why = "the search did not run: " + r.Explanation
		}
		return rs, Visualization{}, fmt.Errorf("%w: %s", ErrNoVisualization, why)
	}
	vis, err := lr.draw(ctx, w, p.timeout)
	return rs, vis, err
}

// draw writes the visualization of the search to w, windowed when the
// history is too large; a panic of porcupine's drawing becomes an error.
func (lr *linearRun) draw(ctx context.Context, w io.Writer, timeout time.Duration) (vis Visualization, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("draw the search: porcupine panicked: %v", p)
		}
	}()
	all := lr.ops()
	vis = Visualization{Ops: len(all), Total: len(all)}
	model, info, drawn := lr.model, lr.info, all
	if len(all) > HTMLLimit {
		win, err := lr.window(ctx, timeout)
		if err != nil {
			return vis, err
		}
		model, info, drawn = win.model, win.info, win.ops
		vis.Ops, vis.Note = len(win.ops), win.note
	}
	if lr.timed {
		info.AddAnnotations(lr.annotations(drawn, len(drawn) < len(all)))
	}
	if err := porcupine.Visualize(model, info, w); err != nil {
		return vis, fmt.Errorf("write visualization: %w", err)
	}
	return vis, nil
}

// A window is part of a partition, checked again on its own from the state
// the ops linearized before it leave.
type window struct {
	model porcupine.Model
	ops   []porcupine.Operation
	info  porcupine.LinearizationInfo
	note  string
}

// window picks HTMLLimit ops to draw. For a history porcupine found not
// linearizable, they are the ops around the first violation: the longest
// partial linearization up to it is replayed to a state, its last ops and
// the ones after it are checked again from there. Otherwise they are the
// first ops of the first partition (of its linearization, when there is
// one, so that the window is linearizable as the whole is).
func (lr *linearRun) window(ctx context.Context, timeout time.Duration) (window, error) {
	total := len(lr.ops())
	partials := lr.info.PartialLinearizationsOperations()
	key := func(op porcupine.Operation) int { return op.Metadata.(opMeta).inv }
	var w window
	var head, rest []porcupine.Operation
	switch v := lr.violation(); {
	case lr.result == porcupine.Illegal && v.part >= 0:
		part := lr.parts[v.part]
		if len(part) <= HTMLLimit {
			rest = part
			w.note = fmt.Sprintf("the history has %d ops, more than the %d a browser draws well; drawn: partition %d of %d, which holds the first violation (%s)",
				total, HTMLLimit, v.part+1, len(lr.parts), opName(lr.hist, v.completion()))
			break
		}
		k := max(0, len(v.prefix)-HTMLLimit/2)
		head = v.prefix[:k]
		done := map[int]bool{}
		for _, op := range head {
			done[key(op)] = true
		}
		for _, op := range part {
			if !done[key(op)] {
				rest = append(rest, op)
			}
		}
		sort.SliceStable(rest, func(i, j int) bool { return rest[i].Call < rest[j].Call })
		rest = rest[:min(len(rest), HTMLLimit)]
		w.note = fmt.Sprintf("the history has %d ops, more than the %d a browser draws well; drawn: the %d ops around the first violation (%s)",
			total, HTMLLimit, len(rest), opName(lr.hist, v.completion()))
		if len(head) > 0 {
			w.note += fmt.Sprintf(", starting from the state %s that the %d ops linearized before them leave",
				lr.model.DescribeState(lr.replay(head)), len(head))
		}
	default:
		part := lr.parts[0]
		var lin []porcupine.Operation
		if len(partials) > 0 {
			for _, l := range partials[0] {
				if len(l) == len(part) {
					lin = l
					break
				}
			}
		}
		if lin == nil {
			lin = append([]porcupine.Operation(nil), part...)
			sort.SliceStable(lin, func(i, j int) bool { return lin[i].Call < lin[j].Call })
		}
		rest = lin[:min(len(lin), HTMLLimit)]
		w.note = fmt.Sprintf("the history has %d ops, more than the %d a browser draws well; drawn: the first %d of them", total, HTMLLimit, len(rest))
		if len(lr.parts) > 1 {
			w.note += fmt.Sprintf(", of partition 1 of %d", len(lr.parts))
		}
	}
	start := lr.replay(head)
	w.model = lr.model
	w.model.Init = func() any { return start }
	w.ops = rest
	res, info, err := search(ctx, w.model, [][]porcupine.Operation{rest}, timeout)
	if err != nil {
		return w, fmt.Errorf("check the window to draw: %w", err)
	}
	if lr.result == porcupine.Illegal && res != porcupine.Illegal {
		w.note += "; on its own this window is linearizable: the violation needs ops outside it, so read it with the results"
	}
	w.info = info
	return w, nil
}

// annotations marks, beside a lock-counter history, each section's lease,
// each pause and each write rejected for a stale fence. With windowed, only
// those that meet the drawn ops' time span are kept.
func (lr *linearRun) annotations(drawn []porcupine.Operation, windowed bool) []porcupine.Annotation {
	lo, hi := int64(-1<<63), int64(1<<63-1)
	if windowed {
		lo, hi = hi, lo
		for _, op := range drawn {
			lo, hi = min(lo, op.Call), max(hi, op.Call)
			if op.Return < lr.end {
				hi = max(hi, op.Return)
			}
		}
	}
	keep := func(a, b int64) bool { return b >= lo && a <= hi }
	var out []porcupine.Annotation
	// A lease ends when the lock is released or when it expires, whichever
	// comes first; the part of a section past its lease is marked apart.
	for _, s := range Sections(lr.hist) {
		if s.LeaseNS == 0 || !keep(s.Start, max(s.End, s.Start+s.LeaseNS)) {
			continue
		}
		tag := fmt.Sprintf("lease p%v", s.Process)
		expiry := s.Start + s.LeaseNS
		desc := fmt.Sprintf("lease %d ms", s.LeaseNS/1e6)
		if s.Fence > 0 {
			desc += fmt.Sprintf(", fence %d", s.Fence)
		}
		out = append(out, porcupine.Annotation{
			Tag: tag, Start: s.Start, End: min(s.End, expiry),
			Description: desc, Details: fmt.Sprintf("process %v acquired the lock at op %d", s.Process, s.Acquire),
			BackgroundColor: "#e8f0fe",
		})
		if s.End > expiry {
			out = append(out, porcupine.Annotation{
				Tag: tag, Start: expiry, End: s.End,
				Description: "lease expired",
				Details: fmt.Sprintf("process %v still in the section it entered at op %d, %d ms after its %d ms lease expired",
					s.Process, s.Acquire, (s.End-expiry)/1e6, s.LeaseNS/1e6),
				BackgroundColor: "#fbd5d5",
			})
		}
	}
	for _, pa := range Pauses(lr.hist) {
		if !keep(pa.Start, pa.End) {
			continue
		}
		out = append(out, porcupine.Annotation{
			Tag: "nemesis", Start: pa.Start, End: pa.End,
			Description:     fmt.Sprintf("pause p%v", pa.Process),
			Details:         fmt.Sprintf("nemesis op %d: %s of process %v for %d ms", pa.Index, pa.Kind, pa.Process, (pa.End-pa.Start)/1e6),
			BackgroundColor: "#fde2e1",
		})
	}
	for _, o := range lr.hist {
		if o.F == FWrite && o.Type == history.Fail && o.Error == ErrStaleFence && keep(o.Time, o.Time) {
			out = append(out, porcupine.Annotation{
				Tag: "fence", Start: o.Time, End: o.Time,
				Description:     "stale fence rejected",
				Details:         fmt.Sprintf("op %d: process %v's write of %s with fence %v was rejected", o.Index, o.Process, canon(o.Value), o.Get(KeyFence)),
				BackgroundColor: "#fff4ce",
			})
		}
	}
	return out
}

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

// explainLockCounter explains a lock-counter violation in the terms of the
// lock: the writes that collided and the pause that let them.
func explainLockCounter(ops []history.Op, lr *linearRun, v violation) (string, []Field) {
	if v.part < 0 {
		return lr.explain(v, ModelLockCounter), nil
	}
	in := v.op.Input.(lcOp)
	m := v.op.Metadata.(opMeta)
	secs := Sections(ops)
	pauses := Pauses(ops)
	if !in.increment {
		return fmt.Sprintf("%s (process %v) read %d, but the increments before it leave the counter at %s: %s",
			opName(ops, v.completion()), m.process, in.value, orList(toStrings(v.states)), lr.lostHint()), nil
	}
	// Another increment that wrote the same value collided with this one.
	for _, other := range lr.parts[v.part] {
		o, om := other.Input.(lcOp), other.Metadata.(opMeta)
		if !o.increment || o.maybe || o.value != in.value || om.inv == m.inv {
			continue
		}
		first, second := other, v.op
		if writeOf(first.Metadata.(opMeta)) > writeOf(second.Metadata.(opMeta)) {
			first, second = second, first
		}
		fm, sm := first.Metadata.(opMeta), second.Metadata.(opMeta)
		msg := fmt.Sprintf("%s and %s both wrote %d after reading %d",
			opName(ops, writeOf(fm)), opName(ops, writeOf(sm)), in.value, in.value-1)
		// The pause behind the collision, else the lease that ran out.
		cause := ""
		for _, x := range []opMeta{fm, sm} {
			if c := sectionCause(ops, secs, pauses, x, true); c != "" {
				cause = c
				break
			}
		}
		if cause == "" {
			for _, x := range []opMeta{fm, sm} {
				if c := sectionCause(ops, secs, pauses, x, false); c != "" {
					cause = c
					break
				}
			}
		}
		if cause != "" {
			msg += "; " + cause
		}
		return msg, []Field{{"colliding", []any{opID(ops, writeOf(fm)), opID(ops, writeOf(sm))}}}
	}
	msg := fmt.Sprintf("%s (process %v) wrote %d, but the increments before it leave the counter at %s",
		opName(ops, writeOf(m)), m.process, in.value, orList(toStrings(v.states)))
	if c := sectionCause(ops, secs, pauses, m, true); c != "" {
		msg += "; " + c
	} else if c := sectionCause(ops, secs, pauses, m, false); c != "" {
		msg += "; " + c
	}
	return msg, nil
}

// sectionCause says what let the increment m's section lose the lock: with
// paused, the pause that stopped its process while it held the lock;
// otherwise, a write sent after its lease had expired. "" if neither.
func sectionCause(ops []history.Op, secs []Section, pauses []Pause, m opMeta, paused bool) string {
	s, ok := sectionOf(secs, ops, m)
	if !ok {
		return ""
	}
	if pa, ok := pauseDuring(s, pauses); ok && paused {
		return fmt.Sprintf("process %v (%s) was stopped by nemesis op %d (%s) for %d ms while holding a %d ms lease",
			m.process, opName(ops, writeOf(m)), pa.Index, pa.Kind, (pa.End-pa.Start)/1e6, s.LeaseNS/1e6)
	}
	if !paused && s.LeaseNS > 0 && s.WriteInv > s.Start+s.LeaseNS {
		return fmt.Sprintf("process %v sent %s %d ms after its acquire, past its %d ms lease",
			m.process, opName(ops, writeOf(m)), (s.WriteInv-s.Start)/1e6, s.LeaseNS/1e6)
	}
	return ""
}

// lostHint says what a read that no order of increments explains means.
func (lr *linearRun) lostHint() string {
	n := 0
	for _, p := range lr.parts {
		for _, op := range p {
			if in := op.Input.(lcOp); in.increment && !in.maybe {
				n++
			}
		}
	}
	return fmt.Sprintf("%d increments were acknowledged, so some were lost or made twice", n)
}

// writeOf is the position of an increment's write: its completion, or for
// one that never completed its invocation's read.
func writeOf(m opMeta) int {
	if m.done >= 0 {
		return m.done
	}
	return m.inv
}

// sectionOf finds the critical section an increment was made in.
func sectionOf(secs []Section, ops []history.Op, m opMeta) (Section, bool) {
	t := ops[m.inv].Time
	for _, s := range secs {
		if s.Process == m.process && s.Start <= t && t <= s.End {
			return s, true
		}
	}
	return Section{}, false
}

func toStrings(xs []any) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprint(x)
	}
	return out
}
