package checker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/hiatus-dev/hiatus/history"
)

// This file holds porcupine's drawing of a linearizability search; the
// words that explain a violation are in explain.go.

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
//
// A lock-counter history checked by the counter walk is drawn by porcupine
// all the same: whole when it is small, else the window the walk points
// to, searched again from the state the walk reached before it.
func CheckHTML(ctx context.Context, w io.Writer, ops []history.Op, opts Options) (Results, Visualization, error) {
	p, err := newPlan(ops, opts)
	if err != nil {
		return Results{}, Visualization{}, err
	}
	rs, lr := p.run(ctx, true)
	if p.kind.walk && p.analyzer != AnalyzerPorcupine && p.stream.bad == 0 {
		if lr, err = p.walkRun(ctx); err != nil {
			return rs, Visualization{}, err
		}
	}
	if lr == nil {
		why := "the " + p.kind.name + " model has no linearizability search"
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
		window := lr.window
		if lr.walk != nil {
			window = lr.walkWindow
		}
		win, err := window(ctx, timeout)
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
	return lr.searchWindow(ctx, w, head, rest, lr.result == porcupine.Illegal, timeout)
}

// searchWindow searches the ops of rest, from the state the ops of head
// leave, so that porcupine can draw them; violated says the whole history
// is not linearizable, so that a window that is gets a word of warning.
func (lr *linearRun) searchWindow(ctx context.Context, w window, head, rest []porcupine.Operation,
	violated bool, timeout time.Duration) (window, error) {
	start := lr.replay(head)
	w.model = lr.model
	w.model.Init = func() any { return start }
	w.ops = rest
	res, info, err := search(ctx, w.model, [][]porcupine.Operation{rest}, timeout)
	if err != nil {
		return w, fmt.Errorf("check the window to draw: %w", err)
	}
	if violated && res != porcupine.Illegal {
		w.note += "; on its own this window is linearizable: the violation needs ops outside it, so read it with the results"
	}
	w.info = info
	return w, nil
}

// walkRun prepares porcupine's drawing of a lock-counter history the
// counter walk checked: a history small enough to draw whole is searched
// whole; a larger one keeps the walk's linearization, from which
// walkWindow picks the ops to search and draw.
func (p *plan) walkRun(ctx context.Context) (*linearRun, error) {
	lr, _, bad := p.problem()
	if len(bad) > 0 {
		return nil, nil
	}
	if len(lr.ops()) <= HTMLLimit {
		res, info, err := search(ctx, lr.model, lr.parts, p.timeout)
		if err != nil {
			return nil, fmt.Errorf("search the history to draw: %w", err)
		}
		lr.result, lr.info = res, info
		return lr, nil
	}
	s := p.stream
	w, err := newCounterWalk(&s.calls, p.initial.(int64), s.end(), s.timed)
	if err != nil {
		return nil, err
	}
	defer w.close()
	v, ok, order := w.run(true)
	byInv := map[int]porcupine.Operation{}
	for _, op := range lr.ops() {
		byInv[op.Metadata.(opMeta).inv] = op
	}
	lin := make([]porcupine.Operation, len(order))
	for i, c := range order {
		lin[i] = byInv[s.calls.get(c).inv]
	}
	lr.walk = &walkView{lin: lin, ok: ok}
	if !ok {
		lr.walk.at = s.name(s.calls.get(v.op).pos())
	}
	return lr, nil
}

// A walkView is what the counter walk found, for drawing.
type walkView struct {
	// lin is the walk's linearization, or when it found a violation the
	// part of one it made before the violation.
	lin []porcupine.Operation
	ok  bool
	at  string // the op blamed for the violation, named
}

// walkWindow is window for a history the counter walk checked: the ops
// around the first violation, searched from the state the walk's
// linearization before them leaves, or the start of its linearization.
func (lr *linearRun) walkWindow(ctx context.Context, timeout time.Duration) (window, error) {
	total := len(lr.ops())
	key := func(op porcupine.Operation) int { return op.Metadata.(opMeta).inv }
	var w window
	var head, rest []porcupine.Operation
	if lr.walk.ok {
		rest = lr.walk.lin[:min(len(lr.walk.lin), HTMLLimit)]
		w.note = fmt.Sprintf("the history has %d ops, more than the %d a browser draws well; drawn: the first %d of them", total, HTMLLimit, len(rest))
	} else {
		head = lr.walk.lin[:max(0, len(lr.walk.lin)-HTMLLimit/2)]
		start := lr.replay(head).(lcState)
		done := map[int]bool{}
		for _, op := range head {
			done[key(op)] = true
		}
		for _, op := range lr.parts[0] {
			// An increment of unknown outcome at or below the start can
			// no longer take effect: it adds nothing to the window.
			if in := op.Input.(lcOp); !done[key(op)] && !(in.maybe && in.value <= start.value) {
				rest = append(rest, op)
			}
		}
		sort.SliceStable(rest, func(i, j int) bool { return rest[i].Call < rest[j].Call })
		rest = rest[:min(len(rest), HTMLLimit)]
		w.note = fmt.Sprintf("the history has %d ops, more than the %d a browser draws well; drawn: the %d ops around the first violation (%s)",
			total, HTMLLimit, len(rest), lr.walk.at)
		if len(head) > 0 {
			w.note += fmt.Sprintf(", starting from the state %s that the %d ops linearized before them leave", lr.model.DescribeState(start), len(head))
		}
	}
	return lr.searchWindow(ctx, w, head, rest, !lr.walk.ok, timeout)
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
		if o.F == history.FWrite && o.Type == history.Fail && o.Error == history.ErrStaleFence && keep(o.Time, o.Time) {
			out = append(out, porcupine.Annotation{
				Tag: "fence", Start: o.Time, End: o.Time,
				Description:     "stale fence rejected",
				Details:         fmt.Sprintf("op %d: process %v's write of %s with fence %v was rejected", o.Index, o.Process, canon(o.Value), o.Get(history.KeyFence)),
				BackgroundColor: "#fff4ce",
			})
		}
	}
	return out
}
