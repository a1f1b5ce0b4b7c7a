package history

import "slices"

// A FaultEvent is an event of the nemesis that begins or ends a fault, as
// the history records it: every fault is two such events, the second with
// the value of the first.
type FaultEvent struct {
	Begin bool    // it begins a fault (:pause, :kill, :start); else it ends one
	F     Keyword // the event's :f
	Kind  Keyword // the value's :kind; where it has none, the :f that begins such a fault
	// Process is the process the fault hit, the value's :process; -1 for
	// a fault of no one process.
	Process int64
	// Failed says a begin could not begin its fault (its value has an
	// :error): no end follows, and it hit no one.
	Failed bool
	Value  map[Keyword]any
}

// ReadFaultEvent reads o as an event that begins or ends a fault: an op
// of the nemesis whose :f is :pause, :kill or :start, or :resume, :restart
// or :stop. ok is false for any other op.
func ReadFaultEvent(o Op) (e FaultEvent, ok bool) {
	if o.IsClient() {
		return e, false
	}
	begin := o.F // the :f of the event that begins a fault like o's
	switch o.F {
	case FPause, FKill, FStart:
		e.Begin = true
	case FResume:
		begin = FPause
	case FRestart:
		begin = FKill
	case FStop:
		begin = FStart
	default:
		return e, false
	}
	e.F = o.F
	e.Value, _ = o.Value.(map[Keyword]any)
	e.Kind, _ = e.Value["kind"].(Keyword)
	if e.Kind == "" {
		e.Kind = begin // so that a begin and its end, both without one, pair
	}
	e.Process = -1
	if p, ok := Int(e.Value["process"]); ok && p >= 0 {
		e.Process = p
	}
	_, e.Failed = e.Value["error"]
	e.Failed = e.Failed && e.Begin
	return e, true
}

// A FaultPairer pairs the events that begin and end faults, for every
// reader of them alike (the checks, the pictures, the schedule a replay
// injects): an end ends the open fault of its kind on its target (the
// value's :process, :worker and :node, which a begin and its end share).
// Faults of different kinds, or on different targets, may be open at once.
type FaultPairer struct {
	open map[faultTarget]int
}

type faultTarget struct {
	kind                Keyword
	process, worker, nd int64
}

func targetOf(e FaultEvent) faultTarget {
	t := faultTarget{kind: e.Kind, process: e.Process, worker: -1, nd: -1}
	if w, ok := Int(e.Value["worker"]); ok {
		t.worker = w
	}
	if n, ok := Int(e.Value["node"]); ok {
		t.nd = n
	}
	return t
}

// Add takes the fault event e, which the caller calls id. It returns the
// id of the begin it ends, or -1: for an end, the open fault it ends; for
// a begin, a fault of its kind still open on its target, which it ends
// first. A begin that failed opens no fault.
func (p *FaultPairer) Add(id int, e FaultEvent) (ended int) {
	t := targetOf(e)
	ended = -1
	if i, ok := p.open[t]; ok {
		ended = i
		delete(p.open, t)
	}
	if e.Begin && !e.Failed {
		if p.open == nil {
			p.open = map[faultTarget]int{}
		}
		p.open[t] = id
	}
	return ended
}

// Open returns the ids of the faults begun and not ended.
func (p *FaultPairer) Open() []int {
	ids := make([]int, 0, len(p.open))
	for _, id := range p.open {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
