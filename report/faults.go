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
// plots and the timeline alike, as history.FaultPairer pairs them.
type faultLog struct {
	faults []fault
	pairs  history.FaultPairer
}

// add takes a nemesis event: a pause, kill or start begins a fault (of the
// process it names, if any), a resume, restart or stop ends it.
func (l *faultLog) add(o history.Op) {
	e, ok := history.ReadFaultEvent(o)
	if !ok {
		return
	}
	if i := l.pairs.Add(len(l.faults), e); i >= 0 {
		l.faults[i].End = o.Time
	}
	if !e.Begin {
		return
	}
	f := fault{Proc: e.Process, Kind: e.Kind, F: e.F, Index: o.Index, Start: o.Time, End: -1}
	if e.Failed {
		f.End, f.Failed = o.Time, true
	}
	l.faults = append(l.faults, f)
}

// finish ends the faults still open at the history's end, at end.
func (l *faultLog) finish(end int64) {
	for _, i := range l.pairs.Open() {
		l.faults[i].End = end
	}
}
