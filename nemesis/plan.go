package nemesis

import (
	"cmp"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// A Planned fault is one fault of a schedule as it happened: a run writes
// those it injected to schedule.edn, and a replay injects them again.
type Planned struct {
	Kind   history.Keyword
	Worker Slot          // the worker slot it hit; none for a fault of a server
	Node   Slot          // the lock node it hit (clock, restart); none for others
	Nodes  []int         // the lock nodes a link fault acted on; nil for none
	At     time.Duration // when it began, after the run's start on the history's clock
	Length time.Duration // how long it lasted
	// Holder says the worker held the lock when the fault began, or was
	// taking it and got it: a replay waits (Schedule.HolderWait) for it to hold
	// the lock again, since the same instant finds it elsewhere in its
	// loop.
	Holder bool
	// InFlight says the worker's write was sent and not yet answered when
	// the fault began: a replay waits (Schedule.HolderWait) for a write of its
	// in flight again. A link fault that finds one leaves its outcome
	// unknown (:info), where one a moment earlier fails it unsent.
	InFlight bool
	// Call is the lock call (LockCalls) the fault caught in flight: a
	// reply-only delay begins once the worker's call is sent, and a
	// replay waits (Schedule.HolderWait) for a call of that kind in
	// flight again, whose reply it holds. "" for none.
	Call history.Keyword
}

// Waits says whether a replay of f waits (Schedule.HolderWait) for its
// worker to be where the fault found it: holding the lock, writing, or
// calling the lock.
func (f Planned) Waits() bool { return f.Holder || f.InFlight || f.Call != "" }

// Waits counts the faults of p that wait for their worker (Planned.Waits).
func (p Plan) Waits() int {
	n := 0
	for _, f := range p {
		if f.Waits() {
			n++
		}
	}
	return n
}

// A Plan is a schedule of faults, in the order they begin.
type Plan []Planned

// replay injects the plan's faults, each when the history's clock reaches
// its time, until ctx ends. What had ended before a fault began in the run
// ends before it begins in the replay, and faults of one kind take turns;
// faults that overlapped in the run overlap again.
func (s *Schedule) replay(ctx context.Context) error {
	done := make([]chan struct{}, len(s.Plan))
	var wg sync.WaitGroup
	defer wg.Wait()
	for j, p := range s.Plan {
		i := slices.IndexFunc(s.Faults, func(f Fault) bool { return f.Kind() == p.Kind })
		if i < 0 {
			return fmt.Errorf("schedule: a %s fault, but the run has no such nemesis", p.Kind)
		}
		if !sleep(ctx, p.At-time.Duration(s.Clock.Now(ctx))) || !s.awaitBefore(ctx, done[:j], p) {
			return nil
		}
		f := s.Faults[i]
		if !s.aim(ctx, f, p) {
			return nil
		}
		done[j] = make(chan struct{})
		r := rand.New(rand.NewSource(s.Rand.Int63())) // a Rand is not safe for two goroutines
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[j])
			s.injectWith(ctx, f, p.Length, r)
		}()
	}
	return nil
}

// awaitBefore waits until the faults of the plan begun so far (done holds
// theirs) that ended before p began in the run, or are of its kind, have
// ended; false when ctx ends first.
func (s *Schedule) awaitBefore(ctx context.Context, done []chan struct{}, p Planned) bool {
	for i, ch := range done {
		q := s.Plan[i]
		if q.At+q.Length > p.At && q.Kind != p.Kind {
			continue // they overlapped
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// aim aims f at p's targets; a fault that hit the lock's holder waits
// (HolderWait) for its worker to hold the lock again (see awaitHolder).
// False when ctx ends first.
func (s *Schedule) aim(ctx context.Context, f Fault, p Planned) bool {
	if a, ok := f.(nodeAimer); ok {
		a.aimAtNode(p.Node)
	}
	if a, ok := f.(nodesAimer); ok {
		a.aimAtNodes(p.Nodes)
	}
	if a, ok := f.(aimer); ok {
		// Before the fault's event is stamped: the wait is no part of it.
		worker, wait := p.Worker, cmp.Or(s.HolderWait, holderWait)
		slot, ok := p.Worker.Index()
		if p.Waits() && ok {
			if slot, ok = awaitHolder(ctx, a.targets, slot, aimedAt(f, p), wait); !ok {
				return false
			}
			worker = On(slot)
		}
		a.aimAt(worker) // none: one drawn, as the run did
	}
	if a, ok := f.(callAimer); ok {
		a.aimAtCall(p.Call)
	}
	return true
}

// aimedAt says where p's worker must be for f to begin: holding the lock
// before its write, or with its write in flight. A fault of the links the
// write goes by, aimed at a write in flight, waits besides for them to have
// a request unanswered, in the same look: the write's invocation is
// recorded before its bytes are sent, and a wait for the links after the
// write was seen took the next request, the next section's read, when the
// write had been answered meanwhile (as it is when sent before a delay
// began).
func aimedAt(f Fault, p Planned) func(Target) bool {
	if p.Call != "" {
		return func(t Target) bool { call, ok := t.Calling(); return ok && call == p.Call }
	}
	if !p.InFlight {
		return holdsUnwritten
	}
	if l, ok := f.(flightAimer); ok {
		return func(t Target) bool { return t.Writing && l.awaiting(t.Worker) }
	}
	return inFlight
}

// Kinds are the kinds of fault the plan holds, each once, in order.
func (p Plan) Kinds() []string {
	var ks []string
	for _, f := range p {
		if !slices.Contains(ks, string(f.Kind)) {
			ks = append(ks, string(f.Kind))
		}
	}
	return ks
}

// AppendEDN appends the plan as schedule.edn holds it: a map with one
// :faults vector, each fault a map of :kind, :worker (absent for a server
// fault), :at-ms and :ms, both on the history's clock.
func (p Plan) AppendEDN(b []byte) []byte {
	fs := make([]any, len(p))
	for i, f := range p {
		m := map[history.Keyword]any{"kind": f.Kind, "at-ms": f.At.Milliseconds(), "ms": f.Length.Milliseconds()}
		if w, ok := f.Worker.Index(); ok {
			m["worker"] = int64(w)
		}
		if n, ok := f.Node.Index(); ok {
			m["node"] = int64(n)
		}
		if f.Nodes != nil {
			m["nodes"] = nodeList(f.Nodes)
		}
		if f.Holder {
			m["holder?"] = true
		}
		if f.InFlight {
			m["in-flight?"] = true
		}
		if f.Call != "" {
			m["call"] = f.Call
		}
		fs[i] = m
	}
	b = history.AppendValue(b, map[history.Keyword]any{"faults": fs})
	return append(b, '\n')
}

// ParsePlan reads a plan written by AppendEDN.
func ParsePlan(edn string) (Plan, error) {
	v, err := history.ParseValue(edn)
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	m, _ := v.(map[history.Keyword]any)
	fs, ok := m["faults"].([]any)
	if !ok {
		return nil, fmt.Errorf("schedule: want a map with a :faults vector")
	}
	p := Plan{} // not nil: an empty schedule replays no fault, where nil draws them
	for i, x := range fs {
		f, _ := x.(map[history.Keyword]any)
		kind, _ := f["kind"].(history.Keyword)
		at, okAt := history.Int(f["at-ms"])
		ms, okMS := history.Int(f["ms"])
		if kind == "" || !okAt || !okMS || at < 0 || ms <= 0 {
			return nil, fmt.Errorf("schedule: fault %d: want :kind, :at-ms ≥ 0 and :ms > 0, not %s", i, history.AppendValue(nil, x))
		}
		nodes, err := readNodes(f["nodes"])
		if err != nil {
			return nil, fmt.Errorf("schedule: fault %d: %w", i, err)
		}
		call, err := readCall(f["call"])
		if err != nil {
			return nil, fmt.Errorf("schedule: fault %d: %w", i, err)
		}
		p = append(p, Planned{Kind: kind, Worker: slotOf(f["worker"]), Node: slotOf(f["node"]), Nodes: nodes, At: time.Duration(at) * time.Millisecond,
			Length: time.Duration(ms) * time.Millisecond, Holder: f["holder?"] == true, InFlight: f["in-flight?"] == true, Call: call})
	}
	slices.SortStableFunc(p, func(a, b Planned) int { return cmp.Compare(a.At, b.At) })
	return p, nil
}

// A PlanRecorder reads a history's nemesis events, one op at a time, into
// the plan that was executed: each fault that began, from its first event
// to its second.
type PlanRecorder struct {
	plan      Plan
	pairs     history.FaultPairer      // the faults under way, by index into plan
	holding   map[history.Process]bool // processes that hold the lock
	writing   map[history.Process]bool // processes whose write is in flight
	acquiring map[history.Process]int  // processes whose acquire is in flight -> the fault that froze it, or -1
}

// Add takes the next op of the history.
func (r *PlanRecorder) Add(o history.Op) {
	if r.holding == nil {
		r.holding, r.writing, r.acquiring = map[history.Process]bool{}, map[history.Process]bool{}, map[history.Process]int{}
	}
	switch {
	case o.IsClient() && o.F == history.FAcquire && o.Type == history.Invoke:
		r.acquiring[o.Process] = -1
	case o.IsClient() && o.F == history.FAcquire:
		// A worker frozen while it took the lock, whose acquire then
		// succeeded, held the lock in the freeze (its grant aged in it):
		// the fault hit a holder.
		if i, ok := r.acquiring[o.Process]; ok && i >= 0 && o.Type == history.Ok {
			r.plan[i].Holder = true
		}
		delete(r.acquiring, o.Process)
		if o.Type == history.Ok {
			r.holding[o.Process] = true
		}
	case o.IsClient() && o.F == history.FRelease && o.Type != history.Invoke:
		delete(r.holding, o.Process)
	case o.IsClient() && history.IsWrite(o.F):
		r.writing[o.Process] = o.Type == history.Invoke
	}
	e, ok := history.ReadFaultEvent(o)
	if !ok || e.Kind == KindSleep || e.Kind == KindStop || e.Kind == KindStopWaiters || e.Failed {
		// In-section pauses come of the configuration, not the schedule;
		// a fault that failed to begin froze no one: nothing to replay.
		return
	}
	if i := r.pairs.Add(len(r.plan), e); i >= 0 && !e.Begin {
		// The length is the one the nemesis held it for (:ms), not the
		// span of its events, which adds what beginning and ending it took
		// (a restart): replayed, that would grow with every generation. A
		// fault the run's end cut short lasted its span.
		r.plan[i].Length = min(r.plan[i].Length, time.Duration(o.Time)-r.plan[i].At)
	}
	if e.Begin {
		r.begin(o, e)
	}
}

// begin records the fault e begins.
func (r *PlanRecorder) begin(o history.Op, e history.FaultEvent) {
	v := e.Value
	w := slotOf(v["worker"])
	ms, _ := history.Int(v["ms"])
	proc := history.Process(e.Process)
	node := slotOf(v["node"])
	if e.Kind == KindFailover { // a failover isolates whichever is primary then
		node = Slot{}
	}
	nodes, _ := readNodes(v["nodes"]) // one the nemesis wrote reads
	call, _ := readCall(v["call"])    // as the nemesis caught it
	r.plan = append(r.plan, Planned{Kind: e.Kind, Worker: w, Node: node, Nodes: nodes, At: time.Duration(o.Time),
		Length: time.Duration(ms) * time.Millisecond, Holder: !w.IsNone() && r.holding[proc], InFlight: !w.IsNone() && r.writing[proc], Call: call})
	if _, ok := r.acquiring[proc]; ok && !w.IsNone() {
		r.acquiring[proc] = len(r.plan) - 1
	}
}

// Plan returns the faults read, each whole millisecond; one never ended
// lasts as its events said it would (:ms).
func (r *PlanRecorder) Plan() Plan {
	p := make(Plan, 0, len(r.plan))
	for _, f := range r.plan {
		f.At = f.At.Truncate(time.Millisecond)
		f.Length = max(f.Length.Round(time.Millisecond), time.Millisecond)
		p = append(p, f)
	}
	return p
}

// slotOf reads an event's or a schedule's :worker or :node: none when it
// has none.
func slotOf(v any) Slot {
	if n, ok := history.Int(v); ok && n >= 0 {
		return On(int(n))
	}
	return Slot{}
}

// GoString is the fault as Go, for a reproducer, every target written
// out: nemesis.Planned{Kind: "clock", Worker: nemesis.Slot{}, Node: nemesis.On(2), …}.
func (f Planned) GoString() string {
	s := fmt.Sprintf("nemesis.Planned{Kind: %q, Worker: %#v, Node: %#v, ", f.Kind, f.Worker, f.Node)
	if f.Nodes != nil {
		s += fmt.Sprintf("Nodes: %#v, ", f.Nodes)
	}
	s += fmt.Sprintf("At: %s, Length: %s", goDuration(f.At), goDuration(f.Length))
	if f.Holder {
		s += ", Holder: true"
	}
	if f.InFlight {
		s += ", InFlight: true"
	}
	if f.Call != "" {
		s += fmt.Sprintf(", Call: %q", f.Call)
	}
	return s + "}"
}

// goDuration writes d as Go.
func goDuration(d time.Duration) string {
	if d%time.Millisecond == 0 {
		return fmt.Sprintf("%d * time.Millisecond", d.Milliseconds())
	}
	return fmt.Sprintf("time.Duration(%d)", int64(d))
}

// nodeList is nodes as EDN holds them.
func nodeList(nodes []int) []any {
	out := make([]any, len(nodes))
	for i, n := range nodes {
		out[i] = int64(n)
	}
	return out
}

// readCall reads a :call, one of LockCalls; "" for none.
func readCall(v any) (history.Keyword, error) {
	if v == nil {
		return "", nil
	}
	k, ok := v.(history.Keyword)
	if !ok || !slices.Contains(LockCalls(), k) {
		return "", fmt.Errorf(":call %s: want one of the lock calls %v", history.AppendValue(nil, v), LockCalls())
	}
	return k, nil
}

// readNodes reads a :nodes vector of node indexes; nil for none.
func readNodes(v any) ([]int, error) {
	if v == nil {
		return nil, nil
	}
	xs, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf(":nodes %s: want a vector of node indexes", history.AppendValue(nil, v))
	}
	nodes := make([]int, len(xs))
	for i, x := range xs {
		n, ok := history.Int(x)
		if !ok || n < 0 {
			return nil, fmt.Errorf(":nodes %s: want a vector of node indexes", history.AppendValue(nil, v))
		}
		nodes[i] = int(n)
	}
	return nodes, nil
}
