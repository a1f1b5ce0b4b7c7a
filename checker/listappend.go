package checker

import (
	"fmt"

	"github.com/hiatus-dev/hiatus/history"
)

// A listCheck reads a list-append history op by op, in history order, and
// keeps what its verdict needs: each section read's list, each append, the
// final lists and the sections. Every write of a list-append workload
// writes the whole list it read plus its element, so a write that lands
// over a list it did not read drops what it did not see, and the final
// list of a key is the list its last write wrote. Against it the check
// finds Elle's anomalies for one key at a time:
//
//   - lost: an acknowledged append whose element the final list lacks,
//     named with the write that took its place;
//   - duplicated: an element a list holds twice (a write of unknown
//     outcome applied, then sent again);
//   - a read that is not a prefix of its key's final list: what it saw was
//     dropped later;
//   - a failed append whose element is there, and an element no append
//     wrote.
type listCheck struct {
	open     history.ProcessMap[listOpen]
	section  history.ProcessMap[int] // each process's section read, as an index into reads; -1 for none
	reads    []listRead
	appends  []listAppend
	final    map[int64][]int64 // nil until the final read
	finalOp  int64
	bad      int
	firstBad string
	// blame is the write that took the first lost element's place, for
	// the lock server's record to say which layer let it in.
	blame []blame
}

// A listOpen is an invocation waiting for its completion.
type listOpen struct {
	id     int64
	time   int64
	f      history.Keyword
	append int // index into appends; -1 for another op
}

// A listRead is a section's read of one key's list.
type listRead struct {
	op      int64
	process history.Process
	invTime int64 // its invocation's :time; -1 when the invocation was not seen
	done    int64 // its completion's :time
	key     int64
	elems   []int64
}

// A listAppend is one append, as its invocation said it and as it ended.
type listAppend struct {
	inv, done         int64 // op ids; done is -1 when it never completed
	invTime, doneTime int64 // their :time
	process           history.Process
	key, elem         int64
	typ               history.Type // :info until it completes
	// late: an :ok the run's audit table settled after the fact; its
	// :time is its :info's, not when it landed, which may be later.
	late bool
	read int // the section's read of the key it appends to, as an index into reads; -1 for none
}

// id names the append by its completion, or by its invocation when it
// never completed.
func (a listAppend) id() int64 {
	if a.done >= 0 {
		return a.done
	}
	return a.inv
}

func newListCheck() *listCheck { return &listCheck{finalOp: -1} }

// listOp says whether o, a client op, reads or writes a list: from the
// first, a Stream keeps what the list-append check needs.
func listOp(o history.Op) bool {
	if o.F == history.FAppend {
		return true
	}
	_, vec := o.Value.([]any)
	return o.F == history.FRead && vec
}

// add takes the client op that the history names id (Stream.id). The ops of a
// section begun before the first list op (a Stream's listOp) are taken
// from its read on.
func (c *listCheck) add(id int64, o history.Op) {
	if o.Process.IsRenewer() {
		return
	}
	if o.Type == history.Invoke {
		c.invoke(id, o)
		return
	}
	inv, ok := c.open.Get(o.Process)
	if ok && inv.f == o.F {
		c.open.Delete(o.Process)
	} else {
		inv = listOpen{time: -1, append: -1} // the rules of a history are the history check's
	}
	switch {
	case o.F == history.FAppend && inv.append >= 0:
		a := &c.appends[inv.append]
		a.done, a.doneTime, a.typ, a.late = id, o.Time, o.Type, resolvedLate(o)
	case o.F == history.FRead && o.Type == history.Ok && o.Get(history.KeyFinal) == true:
		c.readFinal(id, o.Value)
	case o.F == history.FRead && o.Type == history.Ok:
		c.read(id, inv.time, o)
	}
}

func (c *listCheck) read(id, invTime int64, o history.Op) {
	k, elems, ok := keyList(o.Value)
	if !ok {
		c.unreadable(id, o, readWant)
		return
	}
	c.section.Set(o.Process, len(c.reads))
	c.reads = append(c.reads, listRead{op: id, process: o.Process, invTime: invTime, done: o.Time, key: k, elems: elems})
}

func (c *listCheck) invoke(id int64, o history.Op) {
	in := listOpen{id: id, time: o.Time, f: o.F, append: -1}
	switch o.F {
	case history.FAcquire:
		c.section.Set(o.Process, -1)
	case history.FAppend:
		k, e, ok := appendOf(o.Value)
		if !ok {
			c.unreadable(id, o, "an append, [:append key element]")
			break
		}
		read, ok := c.section.Get(o.Process)
		if !ok || read >= 0 && c.reads[read].key != k {
			read = -1 // no read of the key it appends to
		}
		in.append = len(c.appends)
		c.appends = append(c.appends, listAppend{inv: id, done: -1, invTime: o.Time, doneTime: -1, process: o.Process,
			key: k, elem: e, typ: history.Info, read: read})
	}
	c.open.Set(o.Process, in)
}

func (c *listCheck) unreadable(id int64, o history.Op, want string) {
	c.bad++
	if c.firstBad == "" {
		c.firstBad = unreadableWords(id, o, want)
	}
}

func unreadableWords(id int64, o history.Op, want string) string {
	return fmt.Sprintf("op %d (process %v, :%s) has :value %s, not %s", id, o.Process, o.F, canon(o.Value), want)
}

// readWant is what a list-append read's :value must be.
const readWant = "a read of one key, [:r key [element …]]"

// readFinal takes the final read's :value, [[:r key [element …]] …],
// each key once. A second final read makes the history one the check
// cannot judge: which of them is final?
func (c *listCheck) readFinal(id int64, v any) {
	txn, ok := v.([]any)
	final := map[int64][]int64{}
	for _, m := range txn {
		k, elems, okm := keyList(m)
		_, twice := final[k]
		if !okm || twice {
			ok = false
			break
		}
		final[k] = elems
	}
	switch {
	case !ok:
		c.badFinal(fmt.Sprintf("the final read, op %d, has :value %s, not [[:r key [element …]] …] with each key once", id, canon(v)))
	case c.finalOp >= 0:
		c.badFinal(fmt.Sprintf("op %d is a second final read (the first is op %d)", id, c.finalOp))
	default:
		c.final, c.finalOp = final, id
	}
}

func (c *listCheck) badFinal(why string) {
	c.bad++
	if c.firstBad == "" {
		c.firstBad = why
	}
}

// keyList reads [:r key [element …]]; a nil list is an empty one.
func keyList(v any) (int64, []int64, bool) {
	k, rest, ok := microOp(v, history.MicroR)
	if !ok {
		return 0, nil, false
	}
	if rest == nil {
		return k, nil, true
	}
	xs, ok := rest.([]any)
	if !ok {
		return 0, nil, false
	}
	elems := make([]int64, len(xs))
	for i, x := range xs {
		if elems[i], ok = history.Int(x); !ok {
			return 0, nil, false
		}
	}
	return k, elems, true
}

// appendOf reads [:append key element].
func appendOf(v any) (int64, int64, bool) {
	k, rest, ok := microOp(v, history.FAppend)
	if !ok {
		return 0, 0, false
	}
	e, ok := history.Int(rest)
	return k, e, ok
}

// microOp reads [:f key x], Jepsen's micro-op, with its :f f.
func microOp(v any, f history.Keyword) (int64, any, bool) {
	m, ok := v.([]any)
	if !ok || len(m) != 3 || m[0] != f {
		return 0, nil, false
	}
	k, ok := history.Int(m[1])
	return k, m[2], ok
}

// listFigures are what the list-append check counts. Those a lock's
// sections share with the counter's (lost, elements) are
// said as LockFigures, by Stream.listAppend; fields has the rest.
type listFigures struct {
	counted                        bool // the lists were judged: a final read, every op readable
	failedAppends, landedInfo      int64
	lost, maybeLost, provenInfo    int64 // lost: acknowledged, or :info that reads saw; maybeLost: :info that may have landed
	duplicated, badReads, stale    int64
	failedVisible, unknownElements int64
	misplaced, keys, elements      int64
}

func (f listFigures) fields() []Field {
	return []Field{
		{"failed-appends", f.failedAppends}, {"info-appends-landed", f.landedInfo}, {"keys", f.keys},
		{"duplicated-count", f.duplicated}, {"bad-read-count", f.badReads}, {"stale-read-count", f.stale},
		{"misplaced-count", f.misplaced}, {"failed-visible-count", f.failedVisible}, {"unknown-element-count", f.unknownElements},
	}
}

// A listFinding is one kind of anomaly: its count, the words for its
// first, and evidence.
type listFinding struct {
	n        int64
	first    string
	evidence []any
}

func (l *listFinding) note(words func() string, ev func() any) {
	if l.n == 0 {
		l.first = words()
	}
	if len(l.evidence) < evidenceLimit {
		l.evidence = append(l.evidence, ev())
	}
	l.n++
}

// listAppend is the :list-append verdict on what the Stream kept. Its
// figures begin with those of a lock's sections that a lock-counter
// result has (Result.LockCounter, under the same names), for the tables
// that compare runs of either: writes are the acknowledged appends, final
// the elements the final lists hold, and the lost updates the lost
// appends.
func (s *Stream) listAppend() Result {
	c := s.lists
	if c == nil {
		c = newListCheck()
	}
	if err := s.secs.done(); err != nil {
		return Result{Name: ModelListAppend, Valid: Unknown, Explanation: err.Error()}
	}
	f, pairs := s.sectionFigures(c.unfinished(), s.flagger())
	r, lf := c.result(pairs)
	f.Counted, f.Final, f.LostMin, f.LostMax, f.ProvenWrites = lf.counted, lf.elements, lf.lost, lf.lost+lf.maybeLost, lf.provenInfo
	r.lockFigures = &f
	r.Fields = append(f.fields(), r.Fields...)
	return r
}

// unfinished counts the appends that never completed.
func (c *listCheck) unfinished() int {
	n := 0
	for _, a := range c.appends {
		if a.done < 0 {
			n++
		}
	}
	return n
}

// result is the :list-append verdict, with overlaps the first pairs of its
// overlapping sections, and its figures.
func (c *listCheck) result(overlaps []any) (r Result, f listFigures) {
	const name = ModelListAppend
	defer recovered(name, &r)
	r.Name, r.Valid = name, Valid
	r.Fields = []Field{{"overlaps", overlaps}}
	for _, a := range c.appends {
		if a.typ == history.Fail {
			f.failedAppends++
		}
	}
	switch {
	case c.bad > 0:
		r.Valid = Unknown
		r.Explanation = fmt.Sprintf("%d ops cannot be read as %s ops, so the lists cannot be checked; first: %s", c.bad, ModelListAppend, c.firstBad)
	case c.final == nil:
		r.Valid = Unknown
		r.Explanation = "the history has no final read of the lists, so lost appends cannot be told"
	default:
		f.counted = true
		r.Explanation, r.Fields = c.judge(&f, r.Fields)
		if r.Explanation != "" {
			r.Valid, r.blame = Invalid, c.blame
		}
	}
	r.Fields = append(f.fields(), r.Fields...)
	return r, f
}

// emptyInitial: the lists start empty; the model takes no initial value.
func emptyInitial(name string, v any) (any, error) {
	if v != nil {
		return nil, fmt.Errorf("the %s model starts with every list empty; it takes no initial value", name)
	}
	return nil, nil
}
