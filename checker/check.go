package checker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// DefaultTimeout bounds each linearizability search when Options.Timeout
// is zero.
const DefaultTimeout = 60 * time.Second

// Options say how Check judges a history.
type Options struct {
	// Model is one of Models(); "" detects it from the ops' :f values.
	Model string
	// Initial is the model's starting state as an EDN value; nil means the
	// model's default: 0 for lock-counter and counter, nil for register and
	// cas-register (as Knossos's CLI), every key nil for multi-register,
	// whose Initial is a map. The mutex always starts free.
	Initial any
	// Timeout bounds each porcupine search (DefaultTimeout when zero); a
	// search that runs out of time is :unknown, never valid.
	Timeout time.Duration
	// Truncated says the ops are what came before the history was cut
	// short: they are checked, but a valid verdict becomes :unknown.
	Truncated bool
	// Analyzer decides lock-counter linearizability: AnalyzerCounterWalk
	// (the default, "") or AnalyzerPorcupine, the reference it is tested
	// against, which searches and so is bounded by Timeout. Other models
	// have porcupine only.
	Analyzer string
	// Memory bounds the bytes of records a streamed check (Open) keeps in
	// memory before it moves them to disk: DefaultMemory when 0. It changes
	// no result, only the check's speed and memory.
	Memory int64
	// Record is the lock server's record of the run (lockserver.edn), nil
	// for a history without one: then :availability and :fence-order go
	// by the history alone, and :lock-server is not checked. A Stream
	// takes it before its ops (Stream.SetRecord); Open and Check give it.
	Record *Record
	// ReadWhole, if not nil, is called before Open or File.Check reads
	// every op of a history into memory after a Stream could not check it
	// (another model, ops out of time order): a caller that bounded the
	// process's memory by the Stream's lifts the bound there.
	ReadWhole func()
}

// The analyzers of the :linear check.
const (
	AnalyzerCounterWalk = "counter-walk" // lock-counter only: counterWalk, O(n log n)
	AnalyzerPorcupine   = "porcupine"    // porcupine's search
)

// checkAnalyzer checks that the analyzer can check the model.
func checkAnalyzer(model, analyzer string) error {
	k, ok := modelKindOf(model)
	switch {
	case analyzer == "":
	case !ok:
		return unknownModel(model)
	case analyzer == AnalyzerCounterWalk && !k.walk:
		return fmt.Errorf("the %s analyzer checks only the %s model, not %s", analyzer, strings.Join(walkedModels(), ", "), model)
	case analyzer == AnalyzerPorcupine && k.problem == nil:
		return fmt.Errorf("the %s model is checked by its own means, not by the %s analyzer", model, analyzer)
	case analyzer != AnalyzerCounterWalk && analyzer != AnalyzerPorcupine:
		return fmt.Errorf("unknown analyzer %q (want %s or %s)", analyzer, AnalyzerCounterWalk, AnalyzerPorcupine)
	}
	return nil
}

// ErrUnknownModel is returned for a Model that is not one of Models(), and
// when no model can be detected from a history.
var ErrUnknownModel = errors.New("unknown model")

// unknownModel is the error of a model called name that is not one.
func unknownModel(name string) error {
	return fmt.Errorf("%w %q (want one of %s)", ErrUnknownModel, name, strings.Join(Models(), ", "))
}

// walkedModels names the models the counter walk decides.
func walkedModels() []string {
	var out []string
	for _, k := range modelKinds() {
		if k.walk {
			out = append(out, k.name)
		}
	}
	return out
}

// Check judges ops, a history in its order, against opts.Model: for
// lock-counter, LockCounter's checks and the linearizability of the
// lock-protected increment (by the counter walk, or porcupine); for
// Knossos's models, linearizability with porcupine; for counter, Jepsen's
// bounds on every read. A bad history is never an error but a verdict; the
// error is for bad options (an unknown or undetectable model, an Initial
// the model cannot take, an analyzer that cannot check the model).
//
// A lock-counter history goes through a Stream, as Stream.Check does, so
// that a history checked whole and one checked as it is read get the same
// results.
func Check(ctx context.Context, ops []history.Op, opts Options) (Results, error) {
	p, err := newPlan(ops, opts)
	if err != nil {
		return Results{}, err
	}
	rs, _ := p.run(ctx, false)
	return rs, nil
}

// A plan is a history made ready for the checks of one model.
type plan struct {
	kind      modelKind
	initial   any // the model's Initial, checked and defaulted
	ops       []history.Op
	calls     []call
	problems  []string
	timeout   time.Duration
	truncated bool
	analyzer  string
	stream    *Stream // lock-counter: the history as a Stream keeps it
}

func newPlan(ops []history.Op, opts Options) (*plan, error) {
	p := &plan{ops: ops, timeout: opts.Timeout, truncated: opts.Truncated, analyzer: opts.Analyzer}
	if p.timeout <= 0 {
		p.timeout = DefaultTimeout
	}
	model := opts.Model
	if model == "" {
		m, err := Detect(ops)
		if err != nil {
			return nil, err
		}
		model = m
	}
	if err := checkAnalyzer(model, p.analyzer); err != nil {
		return nil, err
	}
	var err error
	if p.initial, err = initialFor(model, opts.Initial); err != nil {
		return nil, err
	}
	p.kind, _ = modelKindOf(model) // initialFor knew it
	if p.kind.stream {
		if !sortedByTime(ops) && timesKnown(ops) {
			// A journal holds ops as they arrived, not in time order; the
			// checks need the order of the history a run writes. A history
			// some of whose ops have no :time is checked in file order, by
			// position, as one with none.
			p.ops = append([]history.Op(nil), ops...)
			sort.SliceStable(p.ops, func(i, j int) bool { return p.ops[i].Time < p.ops[j].Time })
		}
		p.stream = newStream(0, 0) // porcupine and the drawing read its calls in memory
		p.stream.SetRecord(opts.Record)
		if len(p.ops) > 0 && &p.ops[0] != &ops[0] {
			// Sorted: its ops' positions are not the file's.
			dups, first := fileDuplicates(ops)
			p.stream.fileDups = &historyNote{dups: dups, firstDups: first}
		}
		p.stream.Grow(len(p.ops))
		for _, o := range p.ops {
			p.stream.Add(o)
		}
		return p, nil // both analyzers read the Stream's counter operations
	}
	p.calls, p.problems = pairCalls(p.ops)
	return p, nil
}

// run runs the plan's checks; with visual, the linearizability check keeps
// what porcupine needs to draw it.
func (p *plan) run(ctx context.Context, visual bool) (Results, *linearRun) {
	var lr *linearRun
	if p.kind.stream {
		var linear func() Result
		if p.analyzer == AnalyzerPorcupine {
			linear = func() (r Result) {
				r, lr = p.linear(ctx, visual)
				return r
			}
		}
		return p.stream.results(p.kind, p.initial, p.truncated, linear), lr
	}
	var rs Results
	r, lr := p.kind.verdict(ctx, p, visual)
	rs.Add(r)
	var st stats
	var missing []string
	for _, o := range p.ops {
		st.add(o)
		if m, ok := opsMissing(o); ok {
			missing = append(missing, m)
		}
	}
	note := historyNote{n: len(p.ops), truncated: p.truncated, problems: len(p.problems), first: p.problems, missing: missing}
	note.dups, note.firstDups = fileDuplicates(p.ops)
	if r, ok := historyResult(note); ok {
		rs.Add(r)
	}
	rs.Add(st.result(nil))
	incomplete(&rs, missing)
	return rs, lr
}

// A historyNote is what the checks found of a history itself, beside
// their verdicts on it.
type historyNote struct {
	n         int // ops
	truncated bool
	problems  int      // ops that break the rules of a history
	first     []string // the first of them
	missing   []string // what the :ops-missing events say
	dups      int      // ops whose :index an earlier op has too
	firstDups []string // the first of them
}

// historyResult reports what makes any verdict on a history uncertain: it
// was cut short, it breaks the rules of a history (one open op per process,
// completions after invocations), or the run that wrote it says ops are
// missing from it. It also warns of ops that share an :index, which leave
// the verdict as it is (the checks go by position) but make the evidence,
// which names ops by :index, ambiguous.
func historyResult(h historyNote) (Result, bool) {
	if !h.truncated && h.problems == 0 && len(h.missing) == 0 && h.dups == 0 {
		return Result{}, false
	}
	r := Result{Name: "history", Valid: Unknown, Fields: []Field{
		{"ops", h.n},
		{"truncated", h.truncated},
		{"problems", h.problems},
	}}
	var why []string
	if h.truncated {
		why = append(why, fmt.Sprintf("the history was cut short after %d ops: those were checked, but what a valid verdict says of part of a history it cannot say of the whole", h.n))
	}
	if h.problems > 0 {
		r.Fields = append(r.Fields, Field{"first-problems", evidence(h.first[:min(len(h.first), evidenceLimit)])})
		why = append(why, fmt.Sprintf("%d ops break the rules of a history, so checks read it leniently; first: %s", h.problems, h.first[0]))
	}
	if len(h.missing) > 0 {
		r.Fields = append(r.Fields, Field{"ops-missing", evidence(h.missing)})
		why = append(why, "the run that wrote the history could not record all its ops ("+strings.Join(h.missing, "; ")+
			"), so the other checks may be wrong either way (a write the history lacks looks like a lost update): the verdict is :unknown whatever they say")
	}
	if h.dups > 0 {
		r.Fields = append(r.Fields, Field{"duplicate-indexes", h.dups}, Field{"first-duplicates", evidence(h.firstDups)})
		why = append(why, fmt.Sprintf("%d ops have an :index an earlier op has too (first: %s), so where the evidence names an op by its :index it may be either; the checks go by position in the file",
			h.dups, h.firstDups[0]))
		if !h.truncated && h.problems == 0 && len(h.missing) == 0 {
			r.Valid = Valid // a warning: nothing the verdicts rest on
		}
	}
	r.Explanation = strings.Join(why, "; ")
	return r, true
}

// evidence is ss as an EDN vector's elements.
func evidence(ss []string) []any {
	ev := make([]any, len(ss))
	for i, s := range ss {
		ev[i] = s
	}
	return ev
}

// duplicateIndexes counts the ops of a history of n ops whose :index an
// earlier op has too, and describes the first of them; named holds the :index of each op whose :index is not
// its position in the file (the Reader gives an op without one its
// position). A history whose ops are where their indexes say costs
// nothing; any other, a bit an op and a map of the indexes past its end.
func duplicateIndexes(n int, named map[int]int64) (count int, first []string) {
	if len(named) == 0 {
		return 0, nil
	}
	index := func(i int) int64 {
		if id, ok := named[i]; ok {
			return id
		}
		return int64(i)
	}
	seen := make([]uint64, (n+63)/64)
	var past map[int64]bool // indexes at or past n
	var shown []int         // positions of the first ops whose :index an earlier op has
	dup := func(i int) {
		if count++; len(shown) < evidenceLimit {
			shown = append(shown, i)
		}
	}
	for i := range n {
		id := index(i)
		switch {
		case id < 0: // none (Unset), or set by a caller's code
		case id < int64(n):
			if seen[id/64]&(1<<(id%64)) != 0 {
				dup(i)
			}
			seen[id/64] |= 1 << (id % 64)
		case past[id]:
			dup(i)
		default:
			if past == nil {
				past = map[int64]bool{}
			}
			past[id] = true
		}
	}
	// Where each shown one's :index was first, in one more pass.
	holder := map[int64]int{}
	for _, i := range shown {
		holder[index(i)] = -1
	}
	for i := range n {
		if at, ok := holder[index(i)]; ok && at < 0 {
			holder[index(i)] = i
		}
	}
	for _, i := range shown {
		first = append(first, fmt.Sprintf("op %d, the %s op map, as the %s", index(i), ordinal(i+1), ordinal(holder[index(i)]+1)))
	}
	return count, first
}

// fileDuplicates is duplicateIndexes of ops in the order of their file.
func fileDuplicates(ops []history.Op) (int, []string) {
	named := map[int]int64{}
	for i, o := range ops {
		if o.Index != int64(i) {
			named[i] = o.Index
		}
	}
	return duplicateIndexes(len(ops), named)
}

// ordinal writes n as an English ordinal: 1st, 2nd, 3rd, 11th.
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.Itoa(n) + suffix
}

// incomplete makes the verdict of a history that lacks ops unknown, even
// where a check found it invalid: with ops missing, an invalid verdict may
// be the gap they leave. The checks keep their own verdicts, as evidence.
func incomplete(rs *Results, missing []string) {
	if len(missing) > 0 {
		rs.Valid = Unknown
	}
}

// opsMissing returns what an :ops-missing event says, if o is one.
func opsMissing(o history.Op) (string, bool) {
	if o.IsClient() || o.F != history.FOpsMissing {
		return "", false
	}
	if s, ok := o.Value.(string); ok {
		return s, true
	}
	return string(history.AppendValue(nil, o.Value)), true
}

// Detect names the model a history's client ops call for, by their :f
// values: :acquire and :release with :read or :write (hiatus's own, with
// :extend and the lock's :renew) → lock-counter; :cas → cas-register; :txn → multi-register; :acquire and
// :release alone → mutex; :add → counter; :read and :write alone →
// register. The final read is not required: a run cut short has none.
func Detect(ops []history.Op) (string, error) {
	fs := map[history.Keyword]bool{}
	for _, o := range ops {
		if o.IsClient() {
			fs[o.F] = true
		}
	}
	return detect(fs)
}

// An fset is the set of a history's client ops' :f values.
type fset map[history.Keyword]bool

// only reports whether every value of s is among allowed.
func (s fset) only(allowed ...history.Keyword) bool {
	n := 0
	for _, f := range allowed {
		if s[f] {
			n++
		}
	}
	return n == len(s)
}

// detect is Detect on the set of the client ops' :f values.
func detect(fs fset) (string, error) {
	if len(fs) == 0 {
		return "", fmt.Errorf("%w: the history has no client ops to tell a model by; pass --model", ErrUnknownModel)
	}
	for _, k := range modelKinds() {
		if k.tells(fs) {
			return k.name, nil
		}
	}
	var names []string
	for f := range fs {
		names = append(names, ":"+string(f))
	}
	sort.Strings(names)
	return "", fmt.Errorf("%w: no model has exactly the ops %s; pass --model (one of %s)",
		ErrUnknownModel, strings.Join(names, " "), strings.Join(Models(), ", "))
}

// initialFor checks v as the initial state of model and fills in the
// model's default.
func initialFor(model string, v any) (any, error) {
	k, ok := modelKindOf(model)
	if !ok {
		return nil, unknownModel(model)
	}
	return k.initial(model, v)
}

func sortedByTime(ops []history.Op) bool {
	for i := 1; i < len(ops); i++ {
		if ops[i].Time < ops[i-1].Time {
			return false
		}
	}
	return true
}

// A call is one client operation: its invocation and how it completed.
type call struct {
	inv, done int // positions in the history; done is -1 if it never completed
	typ       history.Type
	process   history.Process
	f         history.Keyword
	// value is the completion's value when ok, else the invocation's, as
	// Knossos completes a history: an ok read carries what it read, a
	// crashed one what was asked.
	value any
}

// pairCalls pairs each client invocation with its completion, in the order
// of invocations. A completion that is :info, or none at all, makes the
// call :info. The problems are the breaches of the rules of a history,
// named by op; the pairing goes on past each as leniently as it can.
func pairCalls(ops []history.Op) ([]call, []string) {
	var calls []call
	var problems []string
	var pr history.Pairer
	at := map[int]int{} // position of an open invocation -> index into calls
	name := func(i int) string { return opName(ops, i) }
	for i, o := range ops {
		done, _, problem := pr.Add(i, o)
		if msg := pairProblem(problem, o, func(j int) history.Keyword { return ops[j].F }, name); msg != "" {
			problems = append(problems, msg)
		}
		switch {
		case !o.IsClient():
			// the nemesis: not a client
		case o.Type == history.Invoke:
			at[i] = len(calls)
			calls = append(calls, call{inv: i, done: -1, typ: history.Info, process: o.Process, f: o.F, value: o.Value})
		case done >= 0:
			c := &calls[at[done]]
			delete(at, done)
			c.done, c.typ = i, o.Type
			if o.Type == history.Ok {
				c.value = o.Value
			}
		}
	}
	return calls, problems
}

// pairProblem says in words what problem the pairing found at o, naming ops
// with name; "" for none, and for a lone :info completion, which Knossos
// lets stand. invF looks up the :f of the invocation at a position.
func pairProblem(p *history.PairProblem, o history.Op, invF func(int) history.Keyword, name func(int) string) string {
	if p == nil {
		return ""
	}
	switch p.Kind {
	case history.DoubleInvoke:
		return fmt.Sprintf("%s: process %v invoked :%s while its %s was still open", name(p.At), o.Process, o.F, name(p.Other))
	case history.InvokeAfterInfo:
		return fmt.Sprintf("%s: process %v invoked :%s after its %s completed :info; a crashed process must not invoke again",
			name(p.At), o.Process, o.F, name(p.Other))
	case history.Orphan:
		if o.Type == history.Info {
			return ""
		}
		return fmt.Sprintf("%s: process %v completed :%s that it never invoked", name(p.At), o.Process, o.F)
	case history.Mismatch:
		return fmt.Sprintf("%s: process %v completed :%s, but invoked :%s at %s", name(p.At), o.Process, o.F, invF(p.Other), name(p.Other))
	}
	return fmt.Sprintf("%s: process %v: unknown op type %v", name(p.At), o.Process, o.Type)
}

// opName names the op at position i so that grep finds it: by its :index,
// or, in a history without them, by its position from 0 as "#i".
func opName(ops []history.Op, i int) string {
	if i < 0 || i >= len(ops) {
		return "no op"
	}
	if ops[i].Index != history.Unset {
		return fmt.Sprintf("op %d", ops[i].Index)
	}
	return fmt.Sprintf("op #%d", i)
}

// opID is the number opName gives, for evidence in results.edn.
func opID(ops []history.Op, i int) int64 {
	if i >= 0 && i < len(ops) && ops[i].Index != history.Unset {
		return ops[i].Index
	}
	return int64(i)
}

// counterBounds is Jepsen's counter checker: each read must lie between
// the sum of the adds that completed :ok before it was invoked (lower) and
// the sum of the adds invoked, and not failed, before it completed (upper),
// plus initial. :info adds count toward the upper bound only; :info reads
// are not checked.
func counterBounds(ops []history.Op, calls []call, initial int64) (r Result) {
	const name = "counter"
	defer recovered(name, &r)
	r.Name, r.Valid = name, Valid // until the check finds otherwise
	evs, reads, bad := counterEvents(ops, calls)
	lower, upper := readBounds(ops, evs, reads, initial)
	var errs []any
	var first string
	nerr := 0
	for _, rd := range reads {
		v, ok := history.Int(rd.c.value)
		if ok && rd.lower <= v && v <= rd.upper {
			continue
		}
		nerr++
		if first == "" {
			first = fmt.Sprintf("%s (process %v) read %s, but the counter was at least %d (adds acknowledged before the read began) and at most %d (adds attempted before it ended)",
				opName(ops, rd.c.done), rd.c.process, canon(rd.c.value), rd.lower, rd.upper)
		}
		if len(errs) < evidenceLimit {
			errs = append(errs, map[history.Keyword]any{
				"op": opID(ops, rd.c.done), "lower": rd.lower, "value": rd.c.value, "upper": rd.upper})
		}
	}
	r.Fields = []Field{{"reads", len(reads)}, {"errors", nerr}, {"first-errors", errs}, {"final-bounds", []any{lower, upper}}}
	switch {
	case len(bad) > 0: // bounds that leave ops out prove nothing
		r.Valid = Unknown
		r.Explanation = fmt.Sprintf("%d ops are not counter ops; first: %s", len(bad), bad[0])
	case nerr > 0:
		r.Valid = Invalid
		r.Explanation = fmt.Sprintf("%d of %d reads out of bounds; first: %s", nerr, len(reads), first)
	}
	return r
}

// A counterEvent moves a counter's bounds at a position of the history:
// +add to upper at an invocation that did not fail, +add to lower at an ok
// completion.
type counterEvent struct {
	pos   int
	upper bool // an invocation raising upper, else a completion raising lower
	add   int64
}

// A counterRead is an ok read and the bounds of the counter across it:
// lower at its invocation, upper at its completion.
type counterRead struct {
	c            call
	lower, upper int64
}

// counterEvents reads the calls of a counter history as the events that
// move its bounds, in history order, and its ok reads; bad names the ops
// that are neither an :add of a non-negative integer nor a :read.
func counterEvents(ops []history.Op, calls []call) (evs []counterEvent, reads []*counterRead, bad []string) {
	for _, c := range calls {
		switch c.f {
		case "add":
			n, ok := history.Int(c.value)
			if !ok || n < 0 {
				bad = append(bad, fmt.Sprintf("%s adds %s, not a non-negative integer", opName(ops, c.inv), canon(c.value)))
				continue
			}
			if c.typ != history.Fail {
				evs = append(evs, counterEvent{pos: c.inv, upper: true, add: n})
			}
			if c.typ == history.Ok {
				evs = append(evs, counterEvent{pos: c.done, add: n})
			}
		case "read":
			if c.typ == history.Ok {
				reads = append(reads, &counterRead{c: c})
			}
		default:
			bad = append(bad, fmt.Sprintf("%s is :%s; the counter model has :add and :read", opName(ops, c.inv), c.f))
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].pos < evs[j].pos })
	return evs, reads, bad
}

// readBounds walks the history's positions from initial, setting each
// read's bounds, and returns the bounds at its end.
func readBounds(ops []history.Op, evs []counterEvent, reads []*counterRead, initial int64) (lower, upper int64) {
	pendingAt := map[int]*counterRead{} // invocation position -> read
	doneAt := map[int]*counterRead{}    // completion position -> read
	for _, rd := range reads {
		pendingAt[rd.c.inv], doneAt[rd.c.done] = rd, rd
	}
	lower, upper = initial, initial
	k := 0
	for i := range ops {
		for ; k < len(evs) && evs[k].pos == i; k++ {
			if evs[k].upper {
				upper += evs[k].add
			} else {
				lower += evs[k].add
			}
		}
		if rd := pendingAt[i]; rd != nil {
			rd.lower = lower
		}
		if rd := doneAt[i]; rd != nil {
			rd.upper = upper
		}
	}
	return lower, upper
}
