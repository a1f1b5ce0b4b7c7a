package checker

import (
	"bufio"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
)

// This file keeps the records of a long history on disk: the calls in the
// order they were made, and the counter walk's items and the critical
// sections sorted in runs merged as they are read. A Stream holds them in
// memory until they would take more than its budget (callBytes and
// sectionBytes each), then moves them all to disk at once; a history of
// 2,500,000 sections has 5,000,000 calls, which in memory were 360 MB of
// calls and 240 MB of items. The files are unlinked as soon as they are
// made, so that no exit, not even a SIGKILL, leaves them behind.

// What a Stream's records take in memory: a call (72 bytes) and its walk
// item (48); a section (112), its write's end (40) and its place in the
// order of invocations (4).
const (
	callBytes    = 72 + 48
	sectionBytes = 112 + 40 + 4
)

// DefaultMemory is the memory a streamed check (Open) keeps its records in
// before it moves them to disk: about 330,000 critical sections' worth. With
// the parse's buffers and Go's own, the whole check of any history stays
// under 256 MB (docs/performance.md).
const DefaultMemory = 128 << 20

// streamMemory is the budget of NewStream, the Stream a run ends with: a
// run's end holds its timeline and plots beside it.
const streamMemory = 32 << 20

// sortRun is the number of walk items sorted in memory at a time, 12 MB,
// before they are written out as one sorted run.
const sortRun = 1 << 18

// hugeMin is the size from which grow asks for huge pages.
const hugeMin = 8 << 20

// tempFile makes an unlinked temporary file.
func tempFile() (*os.File, error) {
	f, err := os.CreateTemp("", "hiatus-check-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// A spillError is an I/O error of the records on disk, raised as a panic
// where a caller cannot return it and turned into an unknown verdict.
type spillError struct{ err error }

func (e spillError) Error() string { return "counter records on disk: " + e.err.Error() }

// A callStore holds a Stream's calls: in memory, then, once the Stream
// spills, in a file of fixed-size records read back by index.
type callStore struct {
	mem     []lcCall
	runSize int // walk items a sorted run holds on disk; sortRun when 0
	file    *os.File
	w       *bufio.Writer
	n       int
	err     error // the first write error
	rec     [callSize]byte
}

// callSize is the size of a call's record on disk: fixed, so that get
// reads call i where it is.
const callSize = 8 * 9

func (cs *callStore) len() int { return cs.n }

// add appends c and returns its index.
func (cs *callStore) add(c lcCall) int {
	i := cs.n
	cs.n++
	if cs.file == nil {
		cs.mem = append(cs.mem, c)
		return i
	}
	cs.write(c)
	return i
}

// spill moves the calls in memory to disk, and those added after. It
// reports false when there is nowhere to put them: the calls stay in
// memory, where they are, and the check goes on without its bound on
// memory.
func (cs *callStore) spill() bool {
	if cs.file != nil {
		return true
	}
	f, err := tempFile()
	if err != nil {
		return false
	}
	cs.file, cs.w = f, bufio.NewWriterSize(f, spillBuffer)
	for _, c := range cs.mem {
		cs.write(c)
	}
	cs.mem = nil
	return true
}

func (cs *callStore) write(c lcCall) {
	putCall(cs.rec[:], c)
	if _, err := cs.w.Write(cs.rec[:]); err != nil && cs.err == nil {
		cs.err = err
	}
}

// putCall writes a call's record: its nine words, the flags last.
func putCall(b []byte, c lcCall) {
	var flags int64
	for bit, on := range [...]bool{c.write, c.maybe, c.read, c.late} {
		if on {
			flags |= 1 << bit
		}
	}
	putWords(b, int64(c.inv), int64(c.done), c.call, c.ret, c.value, c.from, c.fence, int64(c.process), flags)
}

// getCall reads a call's record.
func getCall(b []byte) lcCall {
	flags := word(b, 8)
	return lcCall{inv: int(word(b, 0)), done: int(word(b, 1)), call: word(b, 2), ret: word(b, 3), value: word(b, 4),
		from: word(b, 5), fence: word(b, 6), process: history.Process(word(b, 7)),
		write: flags&1 != 0, maybe: flags&2 != 0, read: flags&4 != 0, late: flags&8 != 0}
}

// flush makes what was written readable; it returns the first error.
// Once nothing is left to write it only reads, so that the checks may read
// the calls from goroutines at once.
func (cs *callStore) flush() error {
	if cs.w != nil && cs.err == nil && cs.w.Buffered() > 0 {
		cs.err = cs.w.Flush()
	}
	return cs.err
}

// get returns call i. An I/O error panics with a spillError.
func (cs *callStore) get(i int) lcCall {
	if cs.file == nil {
		return cs.mem[i]
	}
	if err := cs.flush(); err != nil {
		panic(spillError{err})
	}
	var b [callSize]byte
	if _, err := cs.file.ReadAt(b[:], int64(i)*callSize); err != nil {
		panic(spillError{err})
	}
	return getCall(b[:])
}

// each calls f with every call, in order.
func (cs *callStore) each(f func(i int, c lcCall)) {
	if cs.file == nil {
		for i, c := range cs.mem {
			f(i, c)
		}
		return
	}
	if err := cs.flush(); err != nil {
		panic(spillError{err})
	}
	r := bufio.NewReaderSize(io.NewSectionReader(cs.file, 0, int64(cs.n)*callSize), spillBuffer)
	var b [callSize]byte
	for i := range cs.n {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			panic(spillError{err})
		}
		f(i, getCall(b[:]))
	}
}

// slice returns the calls of a store that never spilled: porcupine and its
// drawing need them all in memory, and only a history held in memory is
// given to them.
func (cs *callStore) slice() []lcCall {
	if cs.file != nil {
		panic("checker: the counter operations are on disk")
	}
	return cs.mem
}

func (cs *callStore) close() {
	if cs.file != nil {
		cs.file.Close()
	}
}

// A codec turns records of one type into a fixed number of words and
// back. On disk, a sorted run writes each word as the varint of its
// difference from the same word of the record before (records.go): sorted
// neighbours differ little, and the runs take a third to a quarter of the
// words' bytes, which the kernel copies in and out.
type codec[T any] struct {
	words int
	put   func(w []int64, x T)
	get   func(w []int64) T
}

// A sortedList is a list of records sorted by an order: in memory, or, once
// it outgrows a run, on disk as sorted runs that every reading merges.
type sortedList[T any] struct {
	codec[T]
	less   func(a, b T) int
	run    int  // records a run holds
	mem    []T  // the records, or the run being gathered
	onDisk bool // it may go to disk
	file   *os.File
	w      *bufio.Writer
	size   int64   // bytes written to file
	runs   []int64 // the start of each run in file; one more for the end
	counts []int   // the records of each run
	err    error
}

func newSortedList[T any](c codec[T], less func(a, b T) int, spill bool, run int) *sortedList[T] {
	return &sortedList[T]{codec: c, less: less, onDisk: spill, run: run}
}

func (l *sortedList[T]) add(x T) {
	if l.err != nil {
		return // the list is lost: done says so
	}
	if l.mem == nil && l.file != nil {
		// A list that spilled gathers its next runs in one slice, not in
		// one grown from nothing again.
		l.mem = make([]T, 0, l.run)
	}
	l.mem = append(l.mem, x)
	if l.onDisk && len(l.mem) >= l.run {
		l.writeRun()
	}
}

// spill moves the list to disk: what it holds as one sorted run, and what
// is added after in runs of l.run.
func (l *sortedList[T]) spill() {
	if l.onDisk {
		return
	}
	l.onDisk = true
	if len(l.mem) > 0 {
		l.writeRun()
	}
	if l.onDisk && cap(l.mem) > l.run {
		l.mem = nil // the memory the list held goes back
	}
}

// writeRun sorts the records gathered and writes them out as a run.
func (l *sortedList[T]) writeRun() {
	if l.err != nil {
		return
	}
	if l.file == nil {
		f, err := tempFile()
		if err != nil {
			// Nowhere to put it: the list stays in memory, where it is,
			// and the check goes on without its bound on memory.
			l.onDisk = false
			return
		}
		l.file = f
		l.w = bufio.NewWriterSize(l.file, spillBuffer)
		l.runs = []int64{0}
	}
	slices.SortFunc(l.mem, l.less)
	enc := newRecordEncoder(l.words)
	for _, x := range l.mem {
		l.put(enc.cur, x)
		b := enc.append(l.w.AvailableBuffer())
		l.size += int64(len(b))
		if _, err := l.w.Write(b); err != nil {
			l.err, l.mem = err, nil
			return
		}
	}
	l.runs = append(l.runs, l.size)
	l.counts = append(l.counts, len(l.mem))
	l.mem = l.mem[:0]
}

// done ends the adding: the list is sorted and can be read.
func (l *sortedList[T]) done() error {
	if l.err != nil {
		return spillError{l.err}
	}
	if l.file == nil {
		// Small enough to stay in memory.
		l.onDisk = false
		slices.SortFunc(l.mem, l.less)
		return nil
	}
	if len(l.mem) > 0 {
		l.writeRun()
	}
	l.mem = nil
	if l.err == nil && l.w != nil {
		// Its 1 MiB buffer goes with it: the list is only read from now.
		l.err, l.w = l.w.Flush(), nil
	}
	if l.err != nil {
		return spillError{l.err}
	}
	return nil
}

// first returns the list's first record.
func (l *sortedList[T]) first() (T, bool) {
	it := l.iter()
	return it.next()
}

func (l *sortedList[T]) close() {
	if l.file != nil {
		l.file.Close()
	}
}

// A listIter reads a list in order.
type listIter[T any] struct {
	mem   []T
	merge *runMerge[T]
}

func (l *sortedList[T]) iter() listIter[T] {
	if l.file == nil {
		return listIter[T]{mem: l.mem}
	}
	m := &runMerge[T]{less: l.less}
	for k := range len(l.runs) - 1 {
		r := &runReader[T]{codec: l.codec, w: make([]int64, l.words), left: l.counts[k],
			dec: newRecordDecoder(io.NewSectionReader(l.file, l.runs[k], l.runs[k+1]-l.runs[k]), l.words, runBuffer)}
		if r.advance() {
			m.heads = append(m.heads, r)
		}
	}
	heap.Init(m)
	return listIter[T]{merge: m}
}

// next returns the next record. An I/O error panics with a spillError.
func (it *listIter[T]) next() (T, bool) {
	var zero T
	if it.merge == nil {
		if len(it.mem) == 0 {
			return zero, false
		}
		x := it.mem[0]
		it.mem = it.mem[1:]
		return x, true
	}
	m := it.merge
	if len(m.heads) == 0 {
		return zero, false
	}
	r := m.heads[0]
	x := r.head
	if r.advance() {
		heap.Fix(m, 0)
	} else {
		heap.Pop(m)
	}
	return x, true
}

// A runReader reads one sorted run.
type runReader[T any] struct {
	codec[T]
	dec  *recordDecoder
	head T
	w    []int64
	left int // the records still to read: a run that ends sooner lost some
}

// advance reads the run's next record into head; false at its end. An I/O
// error, or a run that ends at a record's boundary short of the records
// written to it, panics with a spillError: a list missing records could
// make a verdict valid that is not.
func (r *runReader[T]) advance() bool {
	ok, err := r.dec.next(r.w)
	switch {
	case err != nil:
		panic(spillError{err})
	case ok && r.left == 0:
		panic(spillError{errors.New("a sorted run holds more records than were written to it")})
	case !ok && r.left != 0:
		panic(spillError{fmt.Errorf("a sorted run ends %d records short of what was written to it", r.left)})
	}
	if ok {
		r.head = r.get(r.w)
		r.left--
	}
	return ok
}

// A runMerge is a heap of runs by their next record. The orders used are
// total, so which run wins a tie never arises.
type runMerge[T any] struct {
	less  func(a, b T) int
	heads []*runReader[T]
}

func (m *runMerge[T]) Len() int           { return len(m.heads) }
func (m *runMerge[T]) Less(i, j int) bool { return m.less(m.heads[i].head, m.heads[j].head) < 0 }
func (m *runMerge[T]) Swap(i, j int)      { m.heads[i], m.heads[j] = m.heads[j], m.heads[i] }
func (m *runMerge[T]) Push(x any)         { m.heads = append(m.heads, x.(*runReader[T])) }
func (m *runMerge[T]) Pop() any {
	x := m.heads[len(m.heads)-1]
	m.heads = m.heads[:len(m.heads)-1]
	return x
}

// grow returns s with room for n more elements, as slices.Grow does, but
// an empty s gets a new array from make rather than from append, which
// clears what it adds: a fresh array of pointer-free records comes from
// pages the kernel zeroed, and clearing them again was 5 % of the CPU of
// a check of 250,000 sections (docs/performance.md).
func grow[T any](s []T, n int) []T {
	if len(s) == 0 && cap(s) < n {
		s = make([]T, 0, n)
		hugePages(s)
		return s
	}
	return slices.Grow(s, n)
}

// reserve makes room for n records more: all of them for a list in
// memory, a run's at most for one that goes to disk.
func (l *sortedList[T]) reserve(n int) {
	if l.onDisk {
		n = min(n, l.run)
	}
	l.mem = grow(l.mem, n)
}

// words puts int64s into b, 8 bytes each, and reads them back.
func putWords(b []byte, vs ...int64) {
	for k, v := range vs {
		binary.LittleEndian.PutUint64(b[8*k:], uint64(v))
	}
}

func word(b []byte, k int) int64 { return int64(binary.LittleEndian.Uint64(b[8*k:])) }

// An itemList is the counter walk's items, sorted.
type itemList = sortedList[walkItem]

var itemCodec = codec[walkItem]{
	words: 6,
	put: func(w []int64, it walkItem) {
		w[0], w[1], w[2], w[3], w[4], w[5] = int64(it.i), it.value, it.c, it.r, it.fence, int64(it.pos)
	},
	get: func(w []int64) walkItem {
		return walkItem{i: int(w[0]), value: w[1], c: w[2], r: w[3], fence: w[4], pos: int(w[5])}
	},
}

func newItemList(less func(a, b walkItem) int, spill bool, run int) *itemList {
	return newSortedList(itemCodec, less, spill, cmp.Or(run, sortRun))
}

// byValue orders acknowledged writes and reads: by value, then position.
func byValue(a, b walkItem) int {
	return cmp.Or(cmp.Compare(a.value, b.value), cmp.Compare(a.pos, b.pos))
}

// byValueCall orders writes of unknown outcome: by value, then call, then
// position.
func byValueCall(a, b walkItem) int {
	return cmp.Or(cmp.Compare(a.value, b.value), cmp.Compare(a.c, b.c), cmp.Compare(a.pos, b.pos))
}
