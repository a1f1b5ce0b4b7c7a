package checker

import (
	"fmt"
	"slices"
	"strings"

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
	f      history.Keyword
	append int // index into appends; -1 for another op
}

// A listRead is a section's read of one key's list.
type listRead struct {
	op      int64
	process history.Process
	key     int64
	elems   []int64
}

// A listAppend is one append, as its invocation said it and as it ended.
type listAppend struct {
	inv, done int64 // op ids; done is -1 when it never completed
	invTime   int64 // its invocation's :time
	process   history.Process
	key, elem int64
	typ       history.Type // :info until it completes
	read      int          // the section's read, as an index into reads; -1 for none
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

// add takes the client op at position pos of the history. The ops of a
// section begun before the first list op (a Stream's listOp) are taken
// from its read on.
func (c *listCheck) add(pos int, o history.Op) {
	if o.Process.IsRenewer() {
		return
	}
	id := int64(pos)
	if o.Index != history.Unset {
		id = o.Index
	}
	if o.Type == history.Invoke {
		c.invoke(id, o)
		return
	}
	inv, ok := c.open.Get(o.Process)
	if ok && inv.f == o.F {
		c.open.Delete(o.Process)
	} else {
		inv = listOpen{append: -1} // the rules of a history are the history check's
	}
	switch {
	case o.F == history.FAppend && inv.append >= 0:
		a := &c.appends[inv.append]
		a.done, a.typ = id, o.Type
	case o.F == history.FRead && o.Type == history.Ok && o.Get(history.KeyFinal) == true:
		c.readFinal(id, o.Value)
	case o.F == history.FRead && o.Type == history.Ok:
		k, elems, ok := keyList(o.Value)
		if !ok {
			c.unreadable(id, o, "a read of one key, [:r key [element …]]")
			return
		}
		c.section.Set(o.Process, len(c.reads))
		c.reads = append(c.reads, listRead{op: id, process: o.Process, key: k, elems: elems})
	}
}

func (c *listCheck) invoke(id int64, o history.Op) {
	in := listOpen{id: id, f: o.F, append: -1}
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
		if !ok {
			read = -1
		}
		in.append = len(c.appends)
		c.appends = append(c.appends, listAppend{inv: id, done: -1, invTime: o.Time, process: o.Process, key: k, elem: e, typ: history.Info, read: read})
	}
	c.open.Set(o.Process, in)
}

func (c *listCheck) unreadable(id int64, o history.Op, want string) {
	c.bad++
	if c.firstBad == "" {
		c.firstBad = fmt.Sprintf("op %d (process %v, :%s) has :value %s, not %s", id, o.Process, o.F, canon(o.Value), want)
	}
}

// readFinal takes the final read's :value, [[:r key [element …]] …].
func (c *listCheck) readFinal(id int64, v any) {
	txn, ok := v.([]any)
	final := map[int64][]int64{}
	for _, m := range txn {
		k, elems, okm := keyList(m)
		if !okm {
			ok = false
			break
		}
		final[k] = elems
	}
	if !ok {
		c.bad++
		if c.firstBad == "" {
			c.firstBad = fmt.Sprintf("the final read, op %d, has :value %s, not [[:r key [element …]] …]", id, canon(v))
		}
		return
	}
	c.final, c.finalOp = final, id
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
// sections share with the counter's (lost, elements, overlapping) are
// said as LockCounterFigures, by Stream.listAppend; fields has the rest.
type listFigures struct {
	failedAppends, landedInfo                    int64
	lost, duplicated, badReads, failedVisible    int64
	unknownElements, keys, elements, overlapping int64
}

func (f listFigures) fields() []Field {
	return []Field{
		{"failed-appends", f.failedAppends}, {"info-appends-landed", f.landedInfo}, {"keys", f.keys},
		{"duplicated-count", f.duplicated}, {"bad-read-count", f.badReads},
		{"failed-visible-count", f.failedVisible}, {"unknown-element-count", f.unknownElements},
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
	r, lf := c.result(&s.secs)
	lockOverlapping := overlapSweep{keep: anySection}
	s.secs.eachByStart(lockOverlapping.add)
	lo, _ := lockOverlapping.end()
	k, secs := s.counts, &s.secs
	f := LockCounterFigures{
		Sections: int64(secs.n), LeasedSections: int64(secs.leased), LateWrites: int64(secs.late),
		Writes: int64(k.writes), InfoWrites: int64(k.infoWrites + c.unfinished()),
		Counted: c.final != nil, Final: lf.elements, LostMin: lf.lost, LostMax: lf.lost,
		Overlapping: lf.overlapping, LockOverlapping: int64(lo),
		StaleRejected: int64(k.rejected), ChangeRejected: int64(k.changed),
		Pauses: int64(len(s.pauses.pauses)), Faults: int64(k.faults), InfoOps: int64(k.infoOps),
	}
	r.lockCounter = &f
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

// result is the :list-append verdict, with secs the history's sections,
// and its figures.
func (c *listCheck) result(secs *sectionSet) (r Result, f listFigures) {
	const name = ModelListAppend
	defer recovered(name, &r)
	r.Name, r.Valid = name, Valid
	if err := secs.done(); err != nil {
		return Result{Name: name, Valid: Unknown, Explanation: err.Error()}, f
	}
	sweep := overlapSweep{keep: mayHaveWritten}
	secs.eachByStart(sweep.add)
	n, pairs := sweep.end()
	f.overlapping, r.Fields = int64(n), []Field{{"overlaps", pairs}}
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
		r.Explanation, r.Fields = c.judge(&f, r.Fields)
		if r.Explanation != "" {
			r.Valid, r.blame = Invalid, c.blame
		}
	}
	r.Fields = append(f.fields(), r.Fields...)
	return r, f
}

// judge holds the appends and reads to the final lists, filling in f; it
// returns the words for what is wrong ("" for nothing) and the evidence.
func (c *listCheck) judge(f *listFigures, fields []Field) (string, []Field) {
	pos := make(map[int64]map[int64]int, len(c.final)) // key -> element -> count in its final list
	for k, elems := range c.final {
		f.keys++
		f.elements += int64(len(elems))
		m := make(map[int64]int, len(elems))
		for _, e := range elems {
			m[e]++
		}
		pos[k] = m
	}
	byElem := make(map[int64]int, len(c.appends)) // element -> its first append
	for i, a := range c.appends {
		if _, ok := byElem[a.elem]; !ok {
			byElem[a.elem] = i
		}
	}
	var lost, dup, bad, failed, unknown listFinding
	for _, a := range c.appends {
		present := pos[a.key][a.elem] > 0
		switch {
		case a.typ == history.Ok && !present:
			if lost.n == 0 {
				if w, _ := c.overwriter(a, byElem); w >= 0 {
					o := c.appends[w]
					c.blame = []blame{{o.process, o.invTime}}
				}
			}
			lost.note(func() string { return c.lostWords(a, byElem) },
				func() any { return c.lostEvidence(a, byElem) })
		case a.typ == history.Fail && present:
			failed.note(func() string {
				return fmt.Sprintf("op %d (process %v) failed, but key %d's final list holds its element %d", a.done, a.process, a.key, a.elem)
			}, func() any { return map[history.Keyword]any{"op": a.done, "key": a.key, "element": a.elem} })
		case a.typ == history.Info && present:
			f.landedInfo++
		}
	}
	for _, k := range sortedKeys(c.final) {
		for _, e := range c.final[k] {
			n := pos[k][e]
			if n > 1 {
				pos[k][e] = 0 // one finding an element
				dup.note(func() string { return c.dupWords(k, e, n, byElem) },
					func() any { return map[history.Keyword]any{"key": k, "element": e, "count": int64(n)} })
			}
			if _, ok := byElem[e]; !ok && n > 0 {
				unknown.note(func() string { return fmt.Sprintf("key %d's final list holds %d, which no append wrote", k, e) },
					func() any { return map[history.Keyword]any{"key": k, "element": e} })
			}
		}
	}
	for _, rd := range c.reads {
		if j, ok := notPrefix(rd.elems, c.final[rd.key]); ok {
			bad.note(func() string { return c.badReadWords(rd, j) },
				func() any {
					return map[history.Keyword]any{"op": rd.op, "key": rd.key, "read": ints(rd.elems), "final": ints(c.final[rd.key])}
				})
		}
	}
	f.lost, f.duplicated, f.badReads, f.failedVisible, f.unknownElements = lost.n, dup.n, bad.n, failed.n, unknown.n
	var words []string
	for _, w := range []struct {
		l    listFinding
		what string
	}{
		{lost, "acknowledged appends are missing from their key's final list (lost)"},
		{dup, "elements appear more than once in a final list (duplicated)"},
		{bad, "section reads are not a prefix of their key's final list"},
		{failed, "failed appends are in a final list"},
		{unknown, "elements of a final list were written by no append"},
	} {
		if w.l.n > 0 {
			words = append(words, fmt.Sprintf("%d %s; first: %s", w.l.n, w.what, w.l.first))
		}
	}
	fields = append(fields, Field{"lost", lost.evidence}, Field{"duplicated", dup.evidence},
		Field{"bad-reads", bad.evidence}, Field{"failed-visible", failed.evidence}, Field{"unknown-elements", unknown.evidence})
	return strings.Join(words, "; "), fields
}

// overwriter finds the append whose write took a's place in its key's
// final list: the first element where the final list and the list a wrote
// (its section's read, then its element) part; when the final list is a
// prefix of what a read, the last write, which wrote the shorter list.
// sameRead says the two writes read the same list: a lost update. It
// returns -1 when the final list is empty.
func (c *listCheck) overwriter(a listAppend, byElem map[int64]int) (int, bool) {
	var read []int64
	if a.read >= 0 {
		read = c.reads[a.read].elems
	}
	final := c.final[a.key]
	wrote := append(slices.Clip(read), a.elem)
	j := 0
	for j < len(final) && j < len(wrote) && final[j] == wrote[j] {
		j++
	}
	if j == len(final) {
		j = len(final) - 1
	}
	if j < 0 {
		return -1, false
	}
	w, ok := byElem[final[j]]
	if !ok {
		return -1, false
	}
	return w, j == len(read)
}

func (c *listCheck) lostWords(a listAppend, byElem map[int64]int) string {
	s := fmt.Sprintf("element %d of key %d, appended by op %d (process %v)", a.elem, a.key, a.done, a.process)
	w, same := c.overwriter(a, byElem)
	switch {
	case w < 0:
		return s + fmt.Sprintf("; key %d's final list has no write to blame", a.key)
	case same:
		o := c.appends[w]
		return s + fmt.Sprintf(": op %d (process %v) read the same list, appended %d and landed after it", o.id(), o.process, o.elem)
	}
	o := c.appends[w]
	return s + fmt.Sprintf(": op %d (process %v) wrote key %d's list without it, appending %d to a list of %d it had read", o.id(), o.process, a.key, o.elem, c.readLen(o))
}

func (c *listCheck) readLen(a listAppend) int {
	if a.read < 0 {
		return 0
	}
	return len(c.reads[a.read].elems)
}

func (c *listCheck) lostEvidence(a listAppend, byElem map[int64]int) any {
	m := map[history.Keyword]any{"op": a.done, "process": int64(a.process), "key": a.key, "element": a.elem}
	if w, _ := c.overwriter(a, byElem); w >= 0 {
		m["overwritten-by"] = c.appends[w].id()
	}
	return m
}

func (c *listCheck) dupWords(k, e int64, n int, byElem map[int64]int) string {
	s := fmt.Sprintf("%d is %d times in key %d's final list", e, n, k)
	var ops []string
	for _, a := range c.appends {
		if a.elem == e {
			ops = append(ops, fmt.Sprintf("op %d (process %v, %s)", a.id(), a.process, typeWord(a.typ)))
		}
	}
	if len(ops) == 0 {
		return s + ", and no append wrote it"
	}
	return s + ", appended by " + strings.Join(ops, " and ")
}

func typeWord(t history.Type) string {
	switch t {
	case history.Ok:
		return "ok"
	case history.Fail:
		return "failed"
	}
	return "outcome unknown"
}

func (c *listCheck) badReadWords(rd listRead, j int) string {
	final := c.final[rd.key]
	s := fmt.Sprintf("op %d (process %v) read %d elements of key %d", rd.op, rd.process, len(rd.elems), rd.key)
	if j >= len(final) {
		return s + fmt.Sprintf(", but its final list has %d", len(final))
	}
	return s + fmt.Sprintf(", and its element %d is %d where the final list has %d", j, rd.elems[j], final[j])
}

// notPrefix returns the first position where read is not final's prefix.
func notPrefix(read, final []int64) (int, bool) {
	for j, e := range read {
		if j >= len(final) || final[j] != e {
			return j, true
		}
	}
	return 0, false
}

func sortedKeys(m map[int64][]int64) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func ints(xs []int64) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// emptyInitial: the lists start empty; the model takes no initial value.
func emptyInitial(name string, v any) (any, error) {
	if v != nil {
		return nil, fmt.Errorf("the %s model starts with every list empty; it takes no initial value", name)
	}
	return nil, nil
}
