// Package gen writes synthetic lock-counter histories: seeded, in exactly
// the format `hiatus run` writes, with as many lost updates and writes of
// unknown outcome as asked for. They make the checker's benchmarks
// reproducible and let anyone compare checkers on one input.
package gen

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// A Config describes a history to generate.
type Config struct {
	Sections int   // critical sections, the ones that lose updates included
	Workers  int   // processes contending for the lock
	Lost     int   // lost updates to inject; each takes two sections
	Info     int   // writes of unknown outcome; Seed decides which took effect
	Seed     int64 // the same Config always gives the same history
	// Lease is the lock's lease; DefaultLease when zero.
	Lease time.Duration
	// Work is the time between a section's read and its write; DefaultWork
	// when zero.
	Work time.Duration
	// Lists makes it a list-append history, as a run's with --workload
	// list-append: each section reads the current key's list and appends
	// one element; a key takes PerKey appends (DefaultPerKey when zero).
	Lists  bool
	PerKey int
}

// The defaults of Config, which are those of `hiatus run`.
const (
	DefaultLease = 500 * time.Millisecond
	DefaultWork  = 20 * time.Millisecond
	// DefaultPerKey is a list's appends before the next key, as a run's.
	DefaultPerKey = 32
)

// Stats say what Write generated.
type Stats struct {
	Ops      int   // ops (lines) written
	Writes   int   // acknowledged writes
	Happened int   // writes of unknown outcome that took effect
	Final    int64 // the counter's final value, from 0; the lists' elements
}

// Timing of the simulated run, as a run on one machine sees it.
const (
	retry     = 5 * time.Millisecond // between attempts to acquire
	minRTT    = 100 * time.Microsecond
	maxRTT    = 600 * time.Microsecond
	clockStep = time.Microsecond // the resolution of Redis TIME
)

// Write writes the history cfg describes to w, one op a line, sorted by
// time and indexed from 0 as a run's history.edn is.
//
// It simulates a run: the workers contend for a lease lock (each polls
// every 5 ms, so those waiting have long open acquires that overlap every
// section), and each holder reads the counter, works, writes the value read
// plus one and releases, each step taking a few hundred microseconds. A
// lost update is a holder SIGSTOPped by the nemesis after its read for
// longer than its lease: another worker takes the lock and increments, then
// the first wakes, writes the value it computed before — the same — and
// finds its lease gone at release. A write of unknown outcome times out
// while it holds the lock (:info), and its worker goes on as a new process;
// the seed decides whether it took effect. The counter starts at 0 and a
// final read of a process of its own ends the history, after the workers
// still waiting for the lock have given up (:fail :timeout).
//
// Write keeps a few ops per worker in memory, whatever the size of the
// history.
func Write(w io.Writer, cfg Config) (Stats, error) {
	if err := cfg.Check(); err != nil {
		return Stats{}, err
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Work <= 0 {
		cfg.Work = DefaultWork
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if cfg.PerKey <= 0 {
		cfg.PerKey = DefaultPerKey
	}
	s := &sim{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x68696174)), out: bw}
	s.res = &counter{}
	if cfg.Lists {
		s.res = &lists{perKey: cfg.PerKey, keys: map[int64][]int64{}}
	}
	for i := range cfg.Workers {
		s.workers = append(s.workers, &worker{slot: i, proc: history.Process(i)})
	}
	s.run()
	if err := bw.Flush(); err != nil {
		return s.stats, fmt.Errorf("write history: %w", err)
	}
	return s.stats, s.err
}

// Ops returns the history cfg describes as ops, as reading what Write
// writes gives them: for a history wanted in memory, a test's say.
func Ops(cfg Config) ([]history.Op, Stats, error) {
	var buf bytes.Buffer
	st, err := Write(&buf, cfg)
	if err != nil {
		return nil, st, err
	}
	ops, err := history.ReadAll(&buf, "generated history")
	return ops, st, err
}

// Check says what is wrong with c, if anything.
func (c Config) Check() error {
	switch {
	case c.Sections < 0 || c.Lost < 0 || c.Info < 0:
		return errors.New("sections, lost and info must not be negative")
	case c.Workers < 1:
		return fmt.Errorf("workers must be at least 1, not %d", c.Workers)
	case c.Lost > 0 && c.Workers < 2:
		return errors.New("a lost update takes two workers")
	case 2*c.Lost+c.Info > c.Sections:
		return fmt.Errorf("%d lost updates (two sections each) and %d writes of unknown outcome need more than %d sections",
			c.Lost, c.Info, c.Sections)
	}
	return nil
}

// The kinds of section the simulation runs.
const (
	plain byte = iota
	info       // the write's outcome is unknown
	lost       // the holder is paused past its lease: two sections
)

type worker struct {
	slot     int
	proc     history.Process
	ready    int64 // when it invoked its next acquire
	sections int64 // its sections so far, for the write's :section
}

// A sim is a simulated run writing its history.
type sim struct {
	cfg     Config
	rng     *rand.Rand
	workers []*worker
	free    int64 // when the lock is next free
	res     resource
	pending events // ops not yet written, by time
	seq     int64
	out     *bufio.Writer
	buf     []byte
	stats   Stats
	err     error
}

func (s *sim) run() {
	// The order of the kinds of section is a seeded shuffle of as many of
	// each as asked for.
	kinds := make([]byte, 0, s.cfg.Sections-s.cfg.Lost)
	for range s.cfg.Lost {
		kinds = append(kinds, lost)
	}
	for range s.cfg.Info {
		kinds = append(kinds, info)
	}
	for len(kinds) < cap(kinds) {
		kinds = append(kinds, plain)
	}
	s.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })

	start := int64(time.Millisecond)
	for _, w := range s.workers {
		w.ready = s.tick(start, 0, time.Millisecond)
		s.invoke(w.ready, w.proc, "acquire", nil, nil)
	}
	s.free = start
	for _, k := range kinds {
		if s.err != nil {
			return
		}
		w, g := s.next(nil)
		s.flush(g)
		switch k {
		case lost:
			s.lostUpdate(w, g)
		default:
			end := s.section(w, g, k == info, nil)
			s.free = end
		}
	}
	// The run ends: the workers still waiting for the lock give up.
	end := s.tick(s.free, retry, 2*retry)
	for _, w := range s.workers {
		s.complete(s.tick(end, 0, time.Millisecond), w.proc, history.Fail, "acquire", nil, history.Keyword("timeout"), nil)
	}
	s.flush(1<<63 - 1)
	s.finalRead(end + int64(time.Millisecond))
}

// next picks the worker that gets the lock once it is free, other than
// not, and when it gets it: a waiting worker's poll comes within 5 ms.
func (s *sim) next(not *worker) (*worker, int64) {
	g := s.tick(s.free, 0, retry)
	for range 8 {
		w := s.workers[s.rng.IntN(len(s.workers))]
		if w != not && w.ready < g {
			return w, g
		}
	}
	var first *worker
	for _, w := range s.workers {
		if w != not && (first == nil || w.ready < first.ready) {
			first = w
		}
	}
	return first, max(g, s.tick(first.ready, minRTT, retry))
}

// section runs one critical section of w granted at g: acquire ok, read,
// work, write, release. With unknown, the write times out. With pause, the
// holder is paused after its read and pause runs the other section in the
// meantime, returning when the pause ends. It returns when the section
// ended.
func (s *sim) section(w *worker, g int64, unknown bool, pause func(at int64) int64) (end int64) {
	w.sections++
	var b [8]byte
	for i := range b {
		b[i] = byte(s.rng.Uint32())
	}
	s.complete(g, w.proc, history.Ok, "acquire", nil, nil, map[history.Keyword]any{
		"token": hex.EncodeToString(b[:]), "lease-ms": s.cfg.Lease.Milliseconds()})
	t := s.tick(g, minRTT, maxRTT)
	s.invoke(t, w.proc, "read", nil, nil)
	read := s.res.read()
	t = s.tick(t, 2*minRTT, 2*maxRTT)
	s.complete(t, w.proc, history.Ok, "read", read, nil, nil)

	t = s.tick(t, s.cfg.Work*9/10, s.cfg.Work*11/10)
	if pause != nil {
		t = pause(t)
	}
	extra := map[history.Keyword]any{"section": w.sections}
	f, value := s.res.next(read, history.ListElement(w.proc, w.sections))
	s.invoke(t, w.proc, f, value, extra)
	switch {
	case unknown:
		if s.rng.IntN(2) == 0 {
			s.res.apply(read, value)
			s.stats.Happened++
		}
		t = s.tick(t, s.cfg.Lease/5, s.cfg.Lease/4)
		s.complete(t, w.proc, history.Info, f, value, "context deadline exceeded", extra)
		w.proc += history.Process(len(s.workers))
	default:
		s.res.apply(read, value)
		s.stats.Writes++
		t = s.tick(t, 2*minRTT, 2*maxRTT)
		s.complete(t, w.proc, history.Ok, f, value, nil, extra)
	}

	t = s.tick(t, minRTT, maxRTT)
	s.invoke(t, w.proc, "release", nil, nil)
	t = s.tick(t, minRTT, maxRTT)
	if g+s.cfg.Lease.Nanoseconds() < t {
		s.complete(t, w.proc, history.Fail, "release", nil, history.Keyword("expired"), nil)
	} else {
		s.complete(t, w.proc, history.Ok, "release", nil, nil, nil)
	}
	w.ready = s.tick(t, minRTT, maxRTT)
	s.invoke(w.ready, w.proc, "acquire", nil, nil)
	return t
}

// lostUpdate runs a section of w granted at g whose holder is SIGSTOPped
// after its read until its lease has expired and another worker has taken
// the lock and written: w's write then writes what it made of its read,
// over the other's (the same value again, or its list without the
// other's element).
func (s *sim) lostUpdate(w *worker, g int64) {
	var otherEnd int64
	end := s.section(w, g, false, func(at int64) int64 {
		s.free = g + s.cfg.Lease.Nanoseconds()
		other, og := s.next(w)
		// No flush here: the pause, pushed after the other section, is
		// earlier than all of it.
		otherEnd = s.section(other, og, false, nil)
		resume := s.tick(otherEnd, time.Millisecond, 5*time.Millisecond)
		v := map[history.Keyword]any{"kind": nemesis.KindSigStop, "worker": int64(w.slot),
			"pid": int64(40000 + w.slot), "process": int64(w.proc), "ms": (resume - at) / 1e6}
		s.nemesis(at, "pause", v)
		s.nemesis(resume, "resume", v)
		return s.tick(resume, minRTT, maxRTT)
	})
	s.free = max(end, otherEnd)
}

// finalRead records the read of the counter after every worker stopped, by
// a process of its own, as a run does.
func (s *sim) finalRead(after int64) {
	p := history.Process(len(s.workers))
	for _, w := range s.workers {
		p = max(p, w.proc+1)
	}
	final := map[history.Keyword]any{"final?": true}
	t := s.tick(after, 10*time.Millisecond, 20*time.Millisecond)
	s.write(history.Op{Time: t, Type: history.Invoke, Process: p, F: "read", Extra: final})
	t = s.tick(t, 2*minRTT, 2*maxRTT)
	v, n := s.res.final()
	s.write(history.Op{Time: t, Type: history.Ok, Process: p, F: "read", Value: v, Extra: final})
	s.stats.Final = n
}

// A resource is what the simulated sections read and write: the counter,
// or the lists.
type resource interface {
	read() any                                        // a section read's :value
	next(read any, elem int64) (history.Keyword, any) // the write's :f and :value; elem is unique
	apply(read, value any)                            // the write lands
	final() (value any, n int64)                      // the final read's :value, and Stats.Final
}

type counter struct{ n int64 }

func (c *counter) read() any { return c.n }
func (c *counter) next(read any, _ int64) (history.Keyword, any) {
	return history.FWrite, read.(int64) + 1
}
func (c *counter) apply(_, value any)  { c.n = value.(int64) }
func (c *counter) final() (any, int64) { return c.n, c.n }

// lists are a list-append run's lists: each write writes the list it read
// with its element appended; a key that fills moves the head on.
type lists struct {
	perKey int
	key    int64
	keys   map[int64][]int64
}

func (l *lists) read() any {
	return history.ListRead(l.key, l.keys[l.key])
}

func (l *lists) next(read any, elem int64) (history.Keyword, any) {
	return history.FAppend, history.ListAppend(read.([]any)[1].(int64), elem)
}

func (l *lists) apply(read, value any) {
	r, v := read.([]any), value.([]any)
	k := r[1].(int64)
	list := []int64{}
	for _, e := range r[2].([]any) {
		list = append(list, e.(int64))
	}
	list = append(list, v[2].(int64))
	l.keys[k], l.key = list, k
	if len(list) >= l.perKey {
		l.key = k + 1
	}
}

func (l *lists) final() (any, int64) {
	ks := make([]int64, 0, len(l.keys))
	for k := range l.keys {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	txn := make([]any, len(ks))
	var n int64
	for i, k := range ks {
		txn[i] = history.ListRead(k, l.keys[k])
		n += int64(len(l.keys[k]))
	}
	return txn, n
}

// tick returns a time between lo and hi after t, on the clock's resolution.
func (s *sim) tick(t int64, lo, hi time.Duration) int64 {
	d := int64(lo)
	if hi > lo {
		d += s.rng.Int64N(int64(hi - lo))
	}
	return (t + d) / int64(clockStep) * int64(clockStep)
}

func (s *sim) invoke(t int64, p history.Process, f history.Keyword, v any, extra map[history.Keyword]any) {
	s.push(history.Op{Time: t, Type: history.Invoke, Process: p, F: f, Value: v, Extra: extra})
}

func (s *sim) complete(t int64, p history.Process, typ history.Type, f history.Keyword, v, err any, extra map[history.Keyword]any) {
	s.push(history.Op{Time: t, Type: typ, Process: p, F: f, Value: v, Error: err, Extra: extra})
}

func (s *sim) nemesis(t int64, f history.Keyword, v map[history.Keyword]any) {
	s.push(history.Op{Time: t, Type: history.Info, Process: history.Nemesis, F: f, Value: v})
}

// push holds op until flush writes it; equal times keep the order of
// pushes, as a run's sort keeps the order ops arrived in.
func (s *sim) push(op history.Op) {
	s.seq++
	heap.Push(&s.pending, event{op, s.seq})
}

// flush writes the ops before t: nothing pushed later is earlier than the
// grant of the section being simulated.
func (s *sim) flush(t int64) {
	for len(s.pending) > 0 && s.pending[0].op.Time < t {
		s.write(heap.Pop(&s.pending).(event).op)
	}
}

func (s *sim) write(op history.Op) {
	if s.err != nil {
		return
	}
	op.Index = int64(s.stats.Ops)
	s.stats.Ops++
	s.buf = history.AppendOp(s.buf[:0], op)
	s.buf = append(s.buf, '\n')
	if _, err := s.out.Write(s.buf); err != nil {
		s.err = fmt.Errorf("write history: %w", err)
	}
}

type event struct {
	op  history.Op
	seq int64
}

// events is a heap of ops by time, then by the order they were pushed.
type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].op.Time != e[j].op.Time {
		return e[i].op.Time < e[j].op.Time
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}
