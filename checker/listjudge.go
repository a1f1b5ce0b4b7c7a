package checker

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hiatus-dev/hiatus/history"
)

// A listIndex is what the judging of a list-append history looks up: where
// each element is in the final lists, how often it is there, and which
// append wrote it.
type listIndex struct {
	at     map[int64]listPlace // element -> its first place in the final lists
	count  map[int64]int       // element -> how often the final lists hold it
	byElem map[int64]int       // element -> its first append, as an index into appends
	// appended counts the appends of each element that has more than one
	// (a client that retries with the same element).
	appended map[int64]int
}

// A listPlace is a position in a key's final list.
type listPlace struct{ key, pos int64 }

func (c *listCheck) index(f *listFigures) listIndex {
	ix := listIndex{at: map[int64]listPlace{}, count: map[int64]int{}, byElem: make(map[int64]int, len(c.appends))}
	for _, k := range sortedKeys(c.final) {
		f.keys++
		f.elements += int64(len(c.final[k]))
		for j, e := range c.final[k] {
			if ix.count[e] == 0 {
				ix.at[e] = listPlace{k, int64(j)}
			}
			ix.count[e]++
		}
	}
	ix.appended = map[int64]int{}
	for i, a := range c.appends {
		if _, ok := ix.byElem[a.elem]; !ok {
			ix.byElem[a.elem] = i
		} else {
			ix.appended[a.elem] = max(ix.appended[a.elem], 1) + 1
		}
	}
	return ix
}

// readsBefore says whether one of the appends of e to key k read what
// precedes e in its final list, before; true, too, when none's read is
// known.
func (c *listCheck) readsBefore(ix listIndex, e, k int64, before []int64) bool {
	known := false
	for i := ix.byElem[e]; i < len(c.appends); i++ {
		a := c.appends[i]
		if a.elem != e || a.key != k || a.read < 0 {
			if ix.appended[e] == 0 {
				break // its only append
			}
			continue
		}
		if slices.Equal(c.reads[a.read].elems, before) {
			return true
		}
		known = true
		if ix.appended[e] == 0 {
			break
		}
	}
	return !known
}

// inKey says whether a's element is in its key's final list.
func (ix listIndex) inKey(a listAppend) bool {
	p, ok := ix.at[a.elem]
	return ok && p.key == a.key
}

// listFindings are the anomalies of a list-append history, each counted
// with its first words and evidence.
type listFindings struct {
	lost, dup, bad, stale, misplaced, failed, unknown listFinding
}

// judge holds the appends and reads to the final lists, filling in f; it
// returns the words for what is wrong ("" for nothing) and the evidence.
func (c *listCheck) judge(f *listFigures, fields []Field) (string, []Field) {
	ix := c.index(f)
	var fs listFindings
	c.judgeAppends(ix, f, &fs)
	c.judgeFinal(ix, &fs)
	c.judgeReads(ix, &fs)
	f.lost, f.duplicated, f.badReads, f.stale = fs.lost.n, fs.dup.n, fs.bad.n, fs.stale.n
	f.misplaced, f.failedVisible, f.unknownElements = fs.misplaced.n, fs.failed.n, fs.unknown.n
	var words []string
	for _, w := range []struct {
		l    listFinding
		what string
	}{
		{fs.lost, "appends that took effect are missing from their key's final list (lost)"},
		{fs.dup, "elements appear more than once in the final lists (duplicated)"},
		{fs.bad, "section reads are not a prefix of their key's final list"},
		{fs.stale, "section reads are older than what the history had shown of the list before they began (stale)"},
		{fs.misplaced, "elements follow, in their final list, another list than their append read"},
		{fs.failed, "failed appends are in a final list"},
		{fs.unknown, "elements of a final list were appended to that key by no append"},
	} {
		if w.l.n > 0 {
			words = append(words, fmt.Sprintf("%d %s; first: %s", w.l.n, w.what, w.l.first))
		}
	}
	fields = append(fields, Field{"lost", fs.lost.evidence}, Field{"duplicated", fs.dup.evidence},
		Field{"bad-reads", fs.bad.evidence}, Field{"stale-reads", fs.stale.evidence}, Field{"misplaced", fs.misplaced.evidence},
		Field{"failed-visible", fs.failed.evidence}, Field{"unknown-elements", fs.unknown.evidence})
	return strings.Join(words, "; "), fields
}

// judgeAppends finds the appends lost (acknowledged, or of unknown outcome
// that a read saw, and not in their key's final list) and the failed ones
// that are there.
func (c *listCheck) judgeAppends(ix listIndex, f *listFigures, fs *listFindings) {
	seen := c.infoSeen()
	for _, a := range c.appends {
		switch {
		case a.typ == history.Fail:
			if _, there := ix.at[a.elem]; there && c.onlyFailed(ix, a.elem) {
				fs.failed.note(func() string {
					return fmt.Sprintf("op %d (process %v) failed, but a final list holds its element %d", a.done, a.process, a.elem)
				}, func() any { return map[history.Keyword]any{"op": a.done, "key": a.key, "element": a.elem} })
			}
		case ix.inKey(a):
			if a.typ == history.Info && ix.appended[a.elem] == 0 {
				f.landedInfo++ // (of an element appended twice, which landed cannot be told)
			}
		case a.typ == history.Info && seen[a.elem] < 0:
			f.maybeLost++ // it may never have landed
		default:
			if a.typ == history.Info {
				f.provenInfo++
			}
			if fs.lost.n == 0 {
				if w, _ := c.overwriter(a, ix); w >= 0 {
					o := c.appends[w]
					c.blame = []blame{{o.process, o.invTime}}
				}
			}
			fs.lost.note(func() string { return c.lostWords(a, ix, seen[a.elem]) },
				func() any { return c.lostEvidence(a, ix) })
		}
	}
}

// onlyFailed says whether every append of e failed: an element a client
// sent again after a refusal, and that landed then, is no failed append's.
func (c *listCheck) onlyFailed(ix listIndex, e int64) bool {
	if ix.appended[e] == 0 {
		return true
	}
	for i := ix.byElem[e]; i < len(c.appends); i++ {
		if a := c.appends[i]; a.elem == e && a.typ != history.Fail {
			return false
		}
	}
	return true
}

// infoSeen returns, for each element of an :info append, the first read
// (as an op id) that holds it: proof that the append landed; -1 for none.
func (c *listCheck) infoSeen() map[int64]int64 {
	seen := map[int64]int64{}
	for _, a := range c.appends {
		if a.typ == history.Info {
			seen[a.elem] = -1
		}
	}
	if len(seen) == 0 {
		return seen
	}
	for _, rd := range c.reads {
		for _, e := range rd.elems {
			if op, ok := seen[e]; ok && op < 0 {
				seen[e] = rd.op
			}
		}
	}
	return seen
}

// judgeFinal finds, in the final lists, the elements there twice, those no
// append wrote to their key, and those that follow another list than the
// one their append read: a write sends the list it read with its element,
// so the elements before one in the final list are what its append read.
func (c *listCheck) judgeFinal(ix listIndex, fs *listFindings) {
	for _, k := range sortedKeys(c.final) {
		final := c.final[k]
		for j, e := range final {
			p := ix.at[e]
			if n := ix.count[e]; n > 1 && p == (listPlace{k, int64(j)}) {
				fs.dup.note(func() string { return c.dupWords(e, n) },
					func() any { return map[history.Keyword]any{"key": k, "element": e, "count": int64(n)} })
			}
			ai, ok := ix.byElem[e]
			if !ok || c.appends[ai].key != k {
				if p == (listPlace{k, int64(j)}) || !ok {
					fs.unknown.note(func() string { return fmt.Sprintf("key %d's final list holds %d, which no append wrote to it", k, e) },
						func() any { return map[history.Keyword]any{"key": k, "element": e} })
				}
				continue
			}
			a := c.appends[ai]
			if ix.count[e] > 1 || c.readsBefore(ix, e, k, final[:j]) {
				continue
			}
			fs.misplaced.note(func() string {
				return fmt.Sprintf("%d is element %d of key %d's final list, after %d others, but its append, op %d (process %v), read %d",
					e, j, k, j, a.id(), a.process, len(c.reads[a.read].elems))
			}, func() any {
				return map[history.Keyword]any{"key": k, "element": e, "op": a.id(), "read": ints(c.reads[a.read].elems), "before": ints(final[:j])}
			})
		}
	}
}

// judgeReads finds the section reads that are not a prefix of their key's
// final list; the stale ones, which lack what the history had shown of the
// list before they began (an element an append acknowledged, or a read
// saw, that the final list holds; a later key that was acknowledged or
// read): the list went back, or the read was of an old state; and those
// that saw an element before its append was sent.
func (c *listCheck) judgeReads(ix listIndex, fs *listFindings) {
	shown, keys := c.shown(ix)
	for _, rd := range c.reads {
		final := c.final[rd.key]
		if j, ok := notPrefix(rd.elems, final); ok {
			fs.bad.note(func() string { return c.badReadWords(rd, j) },
				func() any {
					return map[history.Keyword]any{"op": rd.op, "key": rd.key, "read": ints(rd.elems), "final": ints(final)}
				})
			continue
		}
		if w, ok := shown[rd.key].before(rd.invTime); ok && int64(len(rd.elems)) <= w.pos {
			fs.stale.note(func() string {
				return fmt.Sprintf("op %d (process %v) read %d elements of key %d, but %s, before it began", rd.op, rd.process, len(rd.elems), rd.key, c.shownWords(w))
			}, func() any {
				return map[history.Keyword]any{"op": rd.op, "key": rd.key, "read": ints(rd.elems), "shown-by": c.shownOp(w)}
			})
			continue
		}
		if w, ok := keys.before(rd.invTime); ok && w.pos > rd.key {
			fs.stale.note(func() string {
				return fmt.Sprintf("op %d (process %v) read key %d, but %s of key %d, before it began", rd.op, rd.process, rd.key, c.shownWords(w), w.pos)
			}, func() any {
				return map[history.Keyword]any{"op": rd.op, "key": rd.key, "read": ints(rd.elems), "shown-by": c.shownOp(w)}
			})
			continue
		}
		if a, ok := c.future(rd, ix); ok {
			fs.stale.note(func() string {
				return fmt.Sprintf("op %d (process %v) read %d before op %d (process %v) was sent to append it", rd.op, rd.process, a.elem, a.inv, a.process)
			}, func() any {
				return map[history.Keyword]any{"op": rd.op, "key": rd.key, "read": ints(rd.elems), "append": a.inv}
			})
		}
	}
}

// future returns an append of one of rd's elements that was sent after rd
// had completed.
func (c *listCheck) future(rd listRead, ix listIndex) (listAppend, bool) {
	for _, e := range rd.elems {
		if i, ok := ix.byElem[e]; ok && c.appends[i].invTime > rd.done && rd.done >= 0 {
			return c.appends[i], true
		}
	}
	return listAppend{}, false
}

// An ackList is what the history had shown of a key's list by each time
// (an append acknowledged in real time — :ok, not settled after the fact
// — whose element the final list holds, or a completed read that is a
// prefix of the final list), in time order, each with the furthest
// position of the final list shown by then; or, as a list of keys, the
// latest key shown by then.
type ackList []ackEntry

type ackEntry struct {
	at     int64 // when it was shown: the op's completion :time
	pos    int64 // the furthest position (or key) shown by then
	append int   // what showed it: an append, as an index into appends; -1 for a read
	read   int   // a read, as an index into reads; -1 for an append
}

// before returns the entry of the furthest position shown before t; false
// when none was, or t is unknown.
func (l ackList) before(t int64) (ackEntry, bool) {
	i := sort.Search(len(l), func(i int) bool { return l[i].at >= t })
	if t < 0 || i == 0 {
		return ackEntry{}, false
	}
	return l[i-1], true
}

// furthest sorts l by time and carries each entry's furthest position
// forward.
func (l ackList) furthest() ackList {
	slices.SortStableFunc(l, func(x, y ackEntry) int { return cmp.Compare(x.at, y.at) })
	for i := 1; i < len(l); i++ {
		if l[i].pos < l[i-1].pos {
			l[i] = ackEntry{at: l[i].at, pos: l[i-1].pos, append: l[i-1].append, read: l[i-1].read}
		}
	}
	return l
}

// shown makes each key's ackList, and the list of keys.
func (c *listCheck) shown(ix listIndex) (map[int64]ackList, ackList) {
	out, keys := map[int64]ackList{}, ackList{}
	for i, a := range c.appends {
		if a.typ == history.Ok && !a.late && ix.inKey(a) && ix.count[a.elem] == 1 && a.doneTime >= 0 {
			e := ackEntry{at: a.doneTime, pos: ix.at[a.elem].pos, append: i, read: -1}
			out[a.key] = append(out[a.key], e)
			keys = append(keys, ackEntry{at: a.doneTime, pos: a.key, append: i, read: -1})
		}
	}
	for i, rd := range c.reads {
		if _, bad := notPrefix(rd.elems, c.final[rd.key]); bad || rd.done < 0 {
			continue
		}
		if len(rd.elems) > 0 {
			out[rd.key] = append(out[rd.key], ackEntry{at: rd.done, pos: int64(len(rd.elems) - 1), append: -1, read: i})
		}
		keys = append(keys, ackEntry{at: rd.done, pos: rd.key, append: -1, read: i})
	}
	for k, l := range out {
		out[k] = l.furthest()
	}
	return out, keys.furthest()
}

// shownWords says what showed w.
func (c *listCheck) shownWords(w ackEntry) string {
	if w.append >= 0 {
		a := c.appends[w.append]
		return fmt.Sprintf("op %d (process %v) had appended %d, element %d of the final list", a.done, a.process, a.elem, ix0(c, a))
	}
	rd := c.reads[w.read]
	return fmt.Sprintf("op %d (process %v) had read %d elements", rd.op, rd.process, len(rd.elems))
}

// ix0 is a's element's position in its key's final list.
func ix0(c *listCheck, a listAppend) int {
	return slices.Index(c.final[a.key], a.elem)
}

func (c *listCheck) shownOp(w ackEntry) int64 {
	if w.append >= 0 {
		return c.appends[w.append].done
	}
	return c.reads[w.read].op
}

// overwriter finds the append whose write took a's place in its key's
// final list: from the first position where the final list parts from
// the list a wrote (its section's read, then its element), the first
// write of the final list that may have landed after a's (it had not
// completed when a's was sent); failing that, the last write, which
// landed last. sameRead says the two read the same list: a lost update.
// It returns -1 when the final list is empty or its writer unknown.
func (c *listCheck) overwriter(a listAppend, ix listIndex) (w int, sameRead bool) {
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
	for i := j; i < len(final); i++ {
		wi, ok := ix.byElem[final[i]]
		if !ok {
			continue
		}
		if o := c.appends[wi]; o.done < 0 || o.late || o.typ != history.Ok || o.doneTime >= a.invTime {
			return wi, a.read >= 0 && o.read >= 0 && slices.Equal(c.reads[o.read].elems, read)
		}
	}
	if len(final) == 0 {
		return -1, false
	}
	wi, ok := ix.byElem[final[len(final)-1]]
	if !ok {
		return -1, false
	}
	return wi, false
}

func (c *listCheck) lostWords(a listAppend, ix listIndex, seenBy int64) string {
	s := fmt.Sprintf("element %d of key %d, appended by op %d (process %v)", a.elem, a.key, a.id(), a.process)
	if a.typ == history.Info {
		s += fmt.Sprintf(" with an unknown outcome, which op %d read", seenBy)
	}
	w, same := c.overwriter(a, ix)
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

func (c *listCheck) lostEvidence(a listAppend, ix listIndex) any {
	m := map[history.Keyword]any{"op": a.id(), "process": int64(a.process), "key": a.key, "element": a.elem}
	if w, _ := c.overwriter(a, ix); w >= 0 {
		m["overwritten-by"] = c.appends[w].id()
	}
	return m
}

func (c *listCheck) dupWords(e int64, n int) string {
	s := fmt.Sprintf("%d is %d times in the final lists", e, n)
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
