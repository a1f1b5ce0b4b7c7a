package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
)

// TimelineFile is the page a Timeline writes, in every run directory.
const TimelineFile = "timeline.html"

// DefaultMaxSections is the number of critical sections a timeline keeps
// unless told otherwise: the 250,000 the page must stay usable at, and some
// room. A longer history's timeline shows a window of it (From, To).
const DefaultMaxSections = 300_000

// Flags a timeline section carries: what the page colours.
const (
	flagStale   = 1 << iota // an acknowledged write sent after the counter had passed its value
	flagLost                // an acknowledged write whose value a later write wrote again: its update was lost
	flagOverlap             // a section that may have written, overlapping another such
	flagLate                // an acknowledged write sent after the writer's lease had expired
	flagOverran             // a section that went on past its lease
)

// A Timeline gathers, one op at a time, what timeline.html draws: each
// critical section with its lease window, its read and its write, each
// fault, and the ops of unknown outcome outside sections. It keeps about
// 150 bytes a section, and at most MaxSections of them.
type Timeline struct {
	// Workers is the number of worker slots: a process p is drawn in row p
	// mod Workers, as Jepsen's threads, so a worker renumbered after an
	// :info stays in its row. Zero draws a row per process.
	Workers int
	// From and To, in ns on the history's clock, keep only the sections
	// that begin in [From, To); To 0 is the history's end.
	From, To int64
	// MaxSections bounds the sections kept (DefaultMaxSections when 0);
	// those after it are counted, not kept.
	MaxSections int

	secs    []tlSection
	open    map[history.Process]int // process -> its open section, index into secs
	faults  []tlFault
	opened  map[int64]int // paused or killed process -> index into faults
	marks   []tlMark
	procs   map[history.Process]bool
	total   int   // sections in the history
	dropped int   // sections past MaxSections
	first   int64 // :time of the first op
	last    int64 // the latest :time
	n       int
	untimed bool
	// top is the largest value an acknowledged write had written by the
	// time before now; atNow gathers those completed at now, which a write
	// sent at now cannot have seen.
	top, atNow, now int64
}

// A tlSection is one critical section, as the page draws it.
type tlSection struct {
	proc         history.Process
	acq          int64 // index of the acquire's completion
	start, end   int64 // acquire ok; release invoke (or the section's last op)
	lease, fence int64
	readAt, read int64 // read completion time and value; readAt -1 if none
	wInv, wEnd   int64
	wValue, wIdx int64 // wIdx -1 if no write completed
	wType        history.Type
	rel          history.Keyword // the release's outcome: "" ok, or its :error, or "info"
	top          int64           // a stale write: the counter's value when it was sent
	flags        uint8
	closed       bool
}

// A tlFault is a fault window of one process, or of all (process -1).
type tlFault struct {
	Proc       int64           `json:"proc"`
	Kind       history.Keyword `json:"kind"`
	F          history.Keyword `json:"f"`
	Index      int64           `json:"idx"`
	Start, End int64           `json:"-"`
}

// A tlMark is an op drawn on its own: the final read, an op of unknown
// outcome outside a section, a failed acquire's error.
type tlMark struct {
	Proc  int64  `json:"proc"`
	At    int64  `json:"-"`
	Label string `json:"label"`
	Index int64  `json:"idx"`
	Final bool   `json:"final,omitempty"`
}

// Add takes the next op of the history, in history order.
func (t *Timeline) Add(o history.Op) {
	if t.open == nil {
		t.open, t.opened, t.procs = map[history.Process]int{}, map[int64]int{}, map[history.Process]bool{}
		t.top, t.atNow = math.MinInt64, math.MinInt64
	}
	if o.Time == history.Unset {
		t.untimed = true
	}
	if t.n == 0 {
		t.first = o.Time
	}
	t.n++
	t.last = max(t.last, o.Time)
	if o.Time > t.now {
		t.top, t.now = max(t.top, t.atNow), o.Time
	}
	if !o.IsClient() {
		t.event(o)
		return
	}
	t.procs[o.Process] = true
	i, in := t.open[o.Process]
	switch {
	case o.F == history.FAcquire && o.Type == history.Ok:
		t.begin(o)
	case o.F == history.FWrite && o.Type == history.Ok && in:
		t.atNow = max(t.atNow, t.valueOf(o, i))
	}
	if !in {
		t.outside(o)
		return
	}
	if i < 0 {
		// A section not kept: past MaxSections or outside [From, To).
		if o.F == history.FRelease && o.Type != history.Invoke || o.Type == history.Info {
			delete(t.open, o.Process)
		}
		return
	}
	t.inside(&t.secs[i], o)
	if t.secs[i].closed {
		delete(t.open, o.Process)
	}
}

// valueOf is the value an acknowledged write of the section i wrote: the
// one asked, as the check reads it, or for a section not kept its
// completion's.
func (t *Timeline) valueOf(o history.Op, i int) int64 {
	if i >= 0 {
		return t.secs[i].wValue
	}
	if v, ok := history.Int(o.Value); ok {
		return v
	}
	return math.MinInt64
}

// begin opens a section at its acquire's completion.
func (t *Timeline) begin(o history.Op) {
	t.total++
	if o.Time < t.From || t.To > 0 && o.Time >= t.To {
		t.open[o.Process] = -1
		return
	}
	if len(t.secs) >= cmp.Or(t.MaxSections, DefaultMaxSections) {
		t.dropped++
		t.open[o.Process] = -1
		return
	}
	s := tlSection{proc: o.Process, acq: o.Index, start: o.Time, end: o.Time, readAt: -1, wIdx: -1}
	if ms, ok := history.Int(o.Get(history.KeyLeaseMS)); ok {
		s.lease = ms * 1e6
	}
	s.fence, _ = history.Int(o.Get(history.KeyFence))
	t.secs = append(t.secs, s)
	t.open[o.Process] = len(t.secs) - 1
}

// inside adds a section's op to it.
func (t *Timeline) inside(s *tlSection, o history.Op) {
	if o.F == history.FAcquire && o.Type == history.Ok {
		return
	}
	if o.F != history.FRelease || o.Type == history.Invoke {
		s.end = max(s.end, o.Time) // as the check's sections end
	}
	switch {
	case o.F == history.FRead && o.Type == history.Ok:
		s.readAt = o.Time
		s.read, _ = history.Int(o.Value)
	case o.F == history.FWrite && o.Type == history.Invoke:
		s.wInv = o.Time
		s.wValue, _ = history.Int(o.Value)
		if s.wValue <= t.top {
			s.top = t.top // stale if it is acknowledged
		} else {
			s.top = math.MinInt64
		}
	case o.F == history.FWrite:
		s.wEnd, s.wIdx, s.wType = o.Time, o.Index, o.Type
		if o.Type == history.Ok && s.top != math.MinInt64 {
			s.flags |= flagStale
		}
	case o.F == history.FRelease && o.Type != history.Invoke:
		s.closed = true
		if o.Type != history.Ok {
			s.rel = history.Keyword(o.Type.String())
			if e, ok := o.Error.(history.Keyword); ok {
				s.rel = e
			}
		}
	}
	if o.Type == history.Info {
		s.closed = true // an :info retires the process
		if o.F != history.FWrite {
			s.rel = "info"
		}
	}
}

// outside notes an op outside any section that the page marks.
func (t *Timeline) outside(o history.Op) {
	final := o.Get(history.KeyFinal) == true
	if !(final && o.Type == history.Ok || o.Type == history.Info) || !t.inWindow(o.Time) {
		return
	}
	label := fmt.Sprintf("%s %s", o.F, o.Type)
	if final {
		label = fmt.Sprintf("final read: %s", history.AppendValue(nil, o.Value))
	}
	t.marks = append(t.marks, tlMark{Proc: int64(o.Process), At: o.Time, Label: label, Index: o.Index, Final: final})
}

func (t *Timeline) inWindow(at int64) bool { return at >= t.From && (t.To == 0 || at < t.To) }

// event takes a nemesis event: a pause or kill opens a fault of the process
// it names, a resume or restart closes it.
func (t *Timeline) event(o history.Op) {
	v, _ := o.Value.(map[history.Keyword]any)
	p, ok := history.Int(v["process"])
	if !ok {
		p = -1 // a fault of no one process: every row
	}
	switch o.F {
	case history.FPause, history.FKill:
		kind, _ := v["kind"].(history.Keyword)
		if kind == "" {
			kind = o.F
		}
		t.faults = append(t.faults, tlFault{Proc: p, Kind: kind, F: o.F, Index: o.Index, Start: o.Time, End: -1})
		t.opened[p] = len(t.faults) - 1
	case history.FResume, history.FRestart:
		if i, ok := t.opened[p]; ok {
			t.faults[i].End = o.Time
			delete(t.opened, p)
		}
	}
}

// finish closes what the history left open and computes the flags that
// need every section: overlaps and lost updates.
func (t *Timeline) finish() {
	for i := range t.faults {
		if t.faults[i].End < 0 {
			t.faults[i].End = t.last
		}
	}
	for i := range t.secs {
		s := &t.secs[i]
		if s.lease > 0 && s.end > s.start+s.lease {
			s.flags |= flagOverran
		}
		if s.lease > 0 && s.wType == history.Ok && s.wInv > s.start+s.lease {
			s.flags |= flagLate
		}
	}
	t.overlaps()
	t.lost()
}

// overlaps flags the sections that may have written and whose interval
// strictly intersects another such, as the lock-counter check counts
// them. Sections are in the order of their starts.
func (t *Timeline) overlaps() {
	var active []int
	for i := range t.secs {
		s := &t.secs[i]
		if !wrote(s) {
			continue
		}
		kept := active[:0]
		for _, j := range active {
			if t.secs[j].end > s.start {
				kept = append(kept, j)
			}
		}
		active = kept
		for _, j := range active {
			if o := &t.secs[j]; s.start < o.end && o.start < s.end {
				s.flags |= flagOverlap
				o.flags |= flagOverlap
			}
		}
		active = append(active, i)
	}
}

func wrote(s *tlSection) bool { return s.wType == history.Ok || s.wType == history.Info }

// lost flags, for each stale write, the acknowledged write of the same
// value that completed before it was sent: two increments to one value,
// one of them lost.
func (t *Timeline) lost() {
	want := map[int64]int{} // value of a stale write -> the first write of it to complete; -1 until found
	for i := range t.secs {
		if t.secs[i].flags&flagStale != 0 {
			want[t.secs[i].wValue] = -1
		}
	}
	if len(want) == 0 {
		return
	}
	byEnd := make([]int, 0, len(t.secs))
	for i := range t.secs {
		if t.secs[i].wType == history.Ok {
			byEnd = append(byEnd, i)
		}
	}
	slices.SortStableFunc(byEnd, func(a, b int) int { return cmp.Compare(t.secs[a].wEnd, t.secs[b].wEnd) })
	for _, i := range byEnd {
		if j, ok := want[t.secs[i].wValue]; ok && j < 0 {
			want[t.secs[i].wValue] = i
		}
	}
	for i := range t.secs {
		s := &t.secs[i]
		if j := want[s.wValue]; s.flags&flagStale != 0 && j >= 0 && j != i && t.secs[j].wEnd < s.wInv {
			t.secs[j].flags |= flagLost
		}
	}
}

// rows assigns each process its row, and names the rows.
func (t *Timeline) rows() (map[history.Process]int, []tlRow) {
	procs := make([]history.Process, 0, len(t.procs))
	for p := range t.procs {
		procs = append(procs, p)
	}
	slices.Sort(procs)
	finals := map[history.Process]bool{}
	for _, m := range t.marks {
		if m.Final {
			finals[history.Process(m.Proc)] = true
		}
	}
	row := map[history.Process]int{}
	var rows []tlRow
	add := func(label string) int {
		rows = append(rows, tlRow{Label: label})
		return len(rows) - 1
	}
	if t.Workers > 0 {
		for w := range t.Workers {
			add(fmt.Sprintf("worker %d", w))
		}
	}
	final := -1
	for _, p := range procs {
		switch {
		case finals[p]:
			if final < 0 {
				final = add("final read")
			}
			row[p] = final
		case t.Workers > 0:
			row[p] = int(p) % t.Workers
		default:
			row[p] = add(fmt.Sprintf("process %d", p))
		}
		if r := &rows[row[p]]; !finals[p] {
			r.Procs = append(r.Procs, int64(p))
		}
	}
	return row, rows
}

// A tlRow is a row of the page: a worker slot and the processes it ran.
type tlRow struct {
	Label string  `json:"label"`
	Procs []int64 `json:"procs"`
}
