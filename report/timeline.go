package report

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
)

// TimelineFile is the page a Timeline writes, in every run directory.
const TimelineFile = "timeline.html"

// DefaultMaxSections is the number of critical sections a timeline keeps
// unless told otherwise: the 250,000 the page must stay usable at, and some
// room. A longer history's timeline shows a window of it (From, To).
const DefaultMaxSections = 300_000

// Flags a timeline section carries: what the page colours. All but
// flagOverran are the lock-counter check's (checker.SectionFlags), so that
// the page shows what the check counted and named.
const (
	flagStale   = 1 << iota // an acknowledged write sent after the counter had passed its value
	flagLost                // an acknowledged write whose value a stale write wrote again: its update was lost
	flagOverlap             // a section that may have written, overlapping another such
	flagLate                // an acknowledged write sent after the writer's lease had expired
	flagOverran             // a section that went on past its lease
)

// ErrUnsorted is returned for a history whose ops are out of time order,
// as a journal's are: the timeline, like the streaming check, reads a
// sorted history.
var ErrUnsorted = errors.New("its ops are out of time order, as in a journal; the timeline draws a sorted history.edn")

// A Timeline gathers, one op at a time, what timeline.html draws: each
// critical section with its lease window, its read and its write, each
// fault, and the ops outside sections. It keeps about 150 bytes a section,
// and at most MaxSections of them. What the lock-counter check found of
// each section comes from a checker.Stream that read the same ops:
// Stream.FlagSections(Kept()) before its Check, then SetFlags(Stream.Flagged()).
type Timeline struct {
	// Workers is the number of worker slots: a process p is drawn in row p
	// mod Workers, as Jepsen's threads, so a worker renumbered after an
	// :info stays in its row. Zero takes them to be the processes seen
	// before the first :info, or draws a row a process when none came.
	Workers int
	// From and To, in ns after the first op, keep only the sections that
	// begin in [From, To); To 0 is the history's end.
	From, To int64
	// MaxSections bounds the sections kept (DefaultMaxSections when 0);
	// those after it are counted, not kept.
	MaxSections int

	secs     []tlSection
	open     map[history.Process]int // process -> its open section, index into secs
	faults   faultLog
	marks    []tlMark
	procs    map[history.Process]bool
	total    int   // sections in the history
	dropped  int   // sections past MaxSections
	firstSeq int   // the number of the first section kept
	first    int64 // :time of the first op
	last     int64 // the latest :time
	n        int
	untimed  bool
	unsorted bool
	// Processes seen before the first :info of a client, and whether one
	// came: the worker slots of a history that does not say them.
	early   map[history.Process]bool
	retired bool
	server  serverRows // the lock server's record, a row a node (AddServer)
}

// A tlSection is one critical section, as the page draws it.
type tlSection struct {
	proc         history.Process
	acq          int64 // index of the acquire's completion
	start, end   int64 // acquire ok; release invoke (or the section's last op)
	lease, fence int64
	readAt, read int64 // read completion time and value; readAt -1 if none
	wInv         int64
	wValue, wIdx int64 // wIdx -1 if no write completed
	wType        history.Type
	rel          history.Keyword // the release's outcome: "" ok, or its :error, or "info"
	ext          history.Keyword // an :extend's outcome: "" none, "ok", or its :error, or its type
	top          int64           // a stale write: the counter's value when it was sent
	seq          int             // its number in the history, as the check numbers sections
	flags        uint8
	sent         bool // a write was invoked
	closed       bool
}

// A tlMark is an op drawn on its own: the final read, an op of unknown
// outcome outside a section, a read or write no lock held.
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
		t.open, t.procs = map[history.Process]int{}, map[history.Process]bool{}
		t.early = map[history.Process]bool{}
	}
	if o.Time == history.Unset {
		t.untimed = true
	}
	if t.n == 0 {
		t.first = o.Time
	}
	if t.n > 0 && o.Time < t.last {
		t.unsorted = true
	}
	t.n++
	t.last = max(t.last, o.Time)
	if !o.IsClient() {
		t.faults.add(o)
		return
	}
	if o.Process.IsRenewer() {
		return // a lock's own renewal: no worker's row
	}
	t.procs[o.Process] = true
	if !t.retired {
		t.early[o.Process] = true
		t.retired = o.Type == history.Info
	}
	if o.F == history.FAcquire && o.Type == history.Ok {
		if _, in := t.open[o.Process]; in {
			delete(t.open, o.Process) // an acquire in a section: the section is over
		}
		t.begin(o)
		return
	}
	i, in := t.open[o.Process]
	switch {
	case !in:
		t.outside(o)
	case i < 0:
		// A section not kept: past MaxSections or outside [From, To).
		if o.F == history.FRelease && o.Type != history.Invoke || o.Type == history.Info {
			delete(t.open, o.Process)
		}
	default:
		t.inside(&t.secs[i], o)
		if t.secs[i].closed {
			delete(t.open, o.Process)
		}
	}
}

// begin opens a section at its acquire's completion.
func (t *Timeline) begin(o history.Op) {
	seq := t.total
	t.total++
	if !t.inWindow(o.Time) {
		t.open[o.Process] = -1
		return
	}
	if len(t.secs) >= cmp.Or(t.MaxSections, DefaultMaxSections) {
		t.dropped++
		t.open[o.Process] = -1
		return
	}
	if len(t.secs) == 0 {
		t.firstSeq = seq
	}
	s := tlSection{proc: o.Process, acq: o.Index, start: o.Time, end: o.Time, readAt: -1, wIdx: -1, seq: seq}
	if ms, ok := history.Int(o.Get(history.KeyLeaseMS)); ok {
		s.lease = ms * 1e6
	}
	s.fence, _ = history.Int(o.Get(history.KeyFence))
	t.secs = append(t.secs, s)
	t.open[o.Process] = len(t.secs) - 1
}

// Kept returns the numbers of the sections kept, lo to hi-1, as
// checker.Stream.FlagSections takes them.
func (t *Timeline) Kept() (lo, hi int) { return t.firstSeq, t.firstSeq + len(t.secs) }

// SetFlags colours the sections kept by what the check found of them.
func (t *Timeline) SetFlags(flags []checker.SectionFlags) {
	for _, f := range flags {
		i := f.Seq - t.firstSeq
		if i < 0 || i >= len(t.secs) {
			continue
		}
		s := &t.secs[i]
		for _, b := range []struct {
			on   bool
			flag uint8
		}{{f.Stale, flagStale}, {f.Lost, flagLost}, {f.Overlap, flagOverlap}, {f.Late, flagLate}} {
			if b.on {
				s.flags |= b.flag
			}
		}
		if f.Stale {
			s.top = f.CounterWas
		}
	}
}

// inside adds a section's op to it.
func (t *Timeline) inside(s *tlSection, o history.Op) {
	if o.F != history.FRelease || o.Type == history.Invoke {
		s.end = max(s.end, o.Time) // as the check's sections end
	}
	switch {
	case o.F == history.FRead && o.Type == history.Ok:
		s.readAt = o.Time
		s.read, _ = history.Int(o.Value)
	case history.IsWrite(o.F) && o.Type == history.Invoke:
		s.wInv, s.sent = o.Time, true
		s.wValue, _ = history.Int(o.Value)
	case history.IsWrite(o.F):
		s.wIdx, s.wType = o.Index, o.Type
	case o.F == history.FExtend && o.Type != history.Invoke:
		s.ext = history.Keyword(o.Type.String())
		if e, ok := o.Error.(history.Keyword); ok {
			s.ext = e
		}
	case o.F == history.FRelease && o.Type != history.Invoke:
		s.closed = true
		if o.Type != history.Ok {
			s.rel = history.Keyword(o.Type.String())
			if e, ok := o.Error.(history.Keyword); ok {
				s.rel = e
			}
		}
		return
	}
	if o.Type == history.Info {
		s.closed = true // an :info retires the process
		if !history.IsWrite(o.F) {
			s.rel = "info"
		}
	}
}

// outside notes an op outside any section that the page marks: the final
// read, an op of unknown outcome, and a read or write no lock held, the
// plainest failure of a lock.
func (t *Timeline) outside(o history.Op) {
	final := o.Get(history.KeyFinal) == true
	unguarded := (history.IsWrite(o.F) || o.F == history.FRead) && o.Type == history.Ok && !final
	if !(final && o.Type == history.Ok || o.Type == history.Info || unguarded) || !t.inWindow(o.Time) {
		return
	}
	label := fmt.Sprintf("%s %s", o.F, o.Type)
	switch {
	case final:
		label = fmt.Sprintf("final read: %s", history.AppendValue(nil, o.Value))
	case unguarded:
		label = fmt.Sprintf("%s %s outside any section", o.F, history.AppendValue(nil, o.Value))
	}
	t.marks = append(t.marks, tlMark{Proc: int64(o.Process), At: o.Time, Label: label, Index: o.Index, Final: final})
}

// inWindow reports whether a section that begins at the time at is one to
// keep.
func (t *Timeline) inWindow(at int64) bool {
	at -= t.first
	return at >= t.From && (t.To == 0 || at < t.To)
}

// finish closes what the history left open.
func (t *Timeline) finish() {
	t.faults.finish(t.last)
	for i := range t.secs {
		if s := &t.secs[i]; s.lease > 0 && s.end > s.start+s.lease {
			s.flags |= flagOverran
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
	workers := t.Workers
	if workers == 0 && t.retired {
		// A history that does not say its workers: those that began before
		// the first :info, whose processes came back renumbered.
		workers = len(t.early)
	}
	row := map[history.Process]int{}
	var rows []tlRow
	add := func(label string) int {
		rows = append(rows, tlRow{Label: label})
		return len(rows) - 1
	}
	for w := range workers {
		add(fmt.Sprintf("worker %d", w))
	}
	final := -1
	for _, p := range procs {
		switch {
		case finals[p]:
			if final < 0 {
				final = add("final read")
			}
			row[p] = final
		case workers > 0 && p >= 0:
			row[p] = int(p) % workers
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
