package report

import "github.com/hiatus-dev/hiatus/history"

// A fault is a nemesis fault as the history records it: from the event
// that began it to the one that ended it, or the history's end. One the
// nemesis could not begin (its event carries an :error, and no end
// follows) is an instant that froze no one.
type fault struct {
	Proc       int64           `json:"proc"` // the process it hit; -1 for a fault of no one process
	Kind       history.Keyword `json:"kind"`
	F          history.Keyword `json:"f"`
	Index      int64           `json:"idx"`
	Failed     bool            `json:"failed,omitempty"`
	Start, End int64           `json:"-"` // ns on the history's clock
}

// A faultLog pairs the nemesis's begin and end events into faults, for the
// plots and the timeline alike: one fault of a kind on a process (or on no
// one process) at a time. A process may be in two of different kinds at
// once, as in an in-section stop that the nemesis's SIGSTOP also hits.
type faultLog struct {
	faults []fault
	open   map[faultKey]int // -> index into faults
}

// A faultKey names an open fault.
type faultKey struct {
	proc int64
	kind history.Keyword
}

// add takes a nemesis event: a pause, kill or start begins a fault (of the
// process it names, if any), a resume, restart or stop ends it.
func (l *faultLog) add(o history.Op) {
	v, _ := o.Value.(map[history.Keyword]any)
	p, ok := history.Int(v["process"])
	if !ok || p < 0 {
		p = -1 // no process the timeline draws (those below 0 are numbered by the Reader)
	}
	kind, _ := v["kind"].(history.Keyword)
	key := faultKey{p, kind} // a begin and its end carry the same :kind
	switch o.F {
	case history.FPause, history.FKill, history.FStart:
		l.end(key, o.Time)
		if kind == "" {
			kind = o.F
		}
		f := fault{Proc: p, Kind: kind, F: o.F, Index: o.Index, Start: o.Time, End: -1}
		if _, failed := v["error"]; failed {
			f.End, f.Failed = o.Time, true
		} else {
			if l.open == nil {
				l.open = map[faultKey]int{}
			}
			l.open[key] = len(l.faults)
		}
		l.faults = append(l.faults, f)
	case history.FResume, history.FRestart, history.FStop:
		l.end(key, o.Time)
	}
}

func (l *faultLog) end(k faultKey, at int64) {
	if i, ok := l.open[k]; ok {
		l.faults[i].End = at
		delete(l.open, k)
	}
}

// finish ends the faults still open at the history's end, at end.
func (l *faultLog) finish(end int64) {
	for k := range l.open {
		l.end(k, end)
	}
}
