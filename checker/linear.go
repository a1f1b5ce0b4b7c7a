package checker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/hiatus-dev/hiatus/history"
)

// An opMeta ties a porcupine operation to the history it came from; it is
// the operation's Metadata.
type opMeta struct {
	inv, done int // positions of the invocation (for an increment, its read's) and completion; done -1 if none
	part      int // the partition it is checked in
	process   history.Process
}

// A linearRun is a porcupine search over a history and what it takes to
// explain or draw its outcome.
type linearRun struct {
	model  porcupine.Model
	parts  [][]porcupine.Operation
	hist   []history.Op
	result porcupine.CheckResult
	info   porcupine.LinearizationInfo
	// timed says the times are the ops' :time (the Redis clock), not their
	// positions, so pauses and leases can be drawn beside them.
	timed bool
	// end is the return of every op that never completed: later than any
	// event of the history, which is what "infinitely late" means to a
	// search that only compares times.
	end int64
	// walk is the counter walk's linearization, which windows a large
	// lock-counter history the walk checked; nil otherwise.
	walk *walkView
}

func (lr *linearRun) ops() []porcupine.Operation {
	var all []porcupine.Operation
	for _, p := range lr.parts {
		all = append(all, p...)
	}
	return all
}

// linear checks the plan's history for linearizability against its model.
func (p *plan) linear(ctx context.Context, visual bool) (r Result, lr *linearRun) {
	const name = "linear"
	defer recovered(name, &r)
	r.Name = name
	lr, fails, bad := p.problem()
	maybe := 0
	for _, op := range lr.ops() {
		if op.Metadata.(opMeta).done < 0 || p.ops[op.Metadata.(opMeta).done].Type != history.Ok {
			maybe++
		}
	}
	r.Fields = []Field{
		{"model", history.Keyword(p.kind.name)},
		{"analyzer", history.Keyword("porcupine")},
		{"ops", len(lr.ops())},
		{"maybe", maybe},
		{"failed", fails},
		{"partitions", len(lr.parts)},
	}
	if len(bad) > 0 {
		r.Valid = Unknown
		r.Explanation = fmt.Sprintf("%d ops cannot be read as %s ops; first: %s", len(bad), p.kind.name, bad[0])
		return r, nil
	}

	res, info, err := search(ctx, lr.model, lr.parts, p.timeout)
	lr.result, lr.info = res, info
	switch {
	case err != nil:
		r.Valid = Unknown
		r.Explanation = fmt.Sprintf("the search was stopped before it finished: %v", err)
		return r, nil
	case res == porcupine.Ok:
		r.Valid = Valid
	case res == porcupine.Unknown:
		r.Valid = Unknown
		r.Explanation = fmt.Sprintf("porcupine found no violation in %v but did not finish its search; a longer --timeout may decide", p.timeout)
	default:
		r.Valid = Invalid
		v := lr.violation()
		if v.part < 0 {
			r.Explanation = "porcupine found the history not linearizable, but named no operation that failed"
			break
		}
		r.Fields = append(r.Fields,
			Field{"op", opID(p.ops, v.completion())},
			Field{"process", int64(v.op.Metadata.(opMeta).process)},
			Field{"linearized", len(v.prefix)},
			Field{"states", v.states},
		)
		if p.kind.explain != nil {
			expl, fields := p.kind.explain(p, lr, v)
			r.Explanation = expl
			r.Fields = append(r.Fields, fields...)
		} else {
			r.Explanation = lr.explain(v, p.kind.name)
		}
	}
	if !visual {
		lr = nil
	}
	return r, lr
}

// search runs porcupine over the partitions with the timeout, cut shorter
// by ctx's deadline. Porcupine cannot be cancelled from outside; when ctx
// is done first, search returns at once and leaves it to end at its own
// timeout.
func search(ctx context.Context, model porcupine.Model, parts [][]porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo, error) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	if err := ctx.Err(); err != nil {
		return porcupine.Unknown, porcupine.LinearizationInfo{}, err
	}
	if timeout <= 0 {
		return porcupine.Unknown, porcupine.LinearizationInfo{}, context.DeadlineExceeded
	}
	var all []porcupine.Operation
	for i, p := range parts {
		for _, op := range p {
			m := op.Metadata.(opMeta)
			m.part = i
			op.Metadata = m
			all = append(all, op)
		}
	}
	model.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
		out := make([][]porcupine.Operation, len(parts))
		for _, op := range h {
			i := op.Metadata.(opMeta).part
			out[i] = append(out[i], op)
		}
		return out
	}
	type outcome struct {
		res  porcupine.CheckResult
		info porcupine.LinearizationInfo
	}
	done := make(chan outcome, 1)
	go func() {
		// Verbose: the partial linearizations name the first op that
		// cannot be linearized, and the visualization draws them.
		res, info := porcupine.CheckOperationsVerbose(model, all, timeout)
		done <- outcome{res, info}
	}()
	select {
	case o := <-done:
		return o.res, o.info, nil
	case <-ctx.Done():
		return porcupine.Unknown, porcupine.LinearizationInfo{}, ctx.Err()
	}
}

// problem builds the porcupine model and operations for the plan's
// history. It returns how many :fail ops it dropped (they did not happen)
// and the ops it could not read as the model's.
func (p *plan) problem() (lr *linearRun, fails int, bad []string) {
	lr = &linearRun{hist: p.ops, end: int64(len(p.ops))}
	at := func(i int) int64 { return int64(i) }
	if p.kind.stream && timesKnown(p.ops) {
		lr.timed = true
		lr.end = p.ops[len(p.ops)-1].Time + 1
		at = func(i int) int64 { return p.ops[i].Time }
	}
	lr.model, lr.parts, fails, bad = p.kind.problem(p, p.operations(lr.end, at))
	return lr, fails, bad
}

// An opFunc makes the porcupine operation of the call invoked at position
// inv and completed at done (-1: never) by proc, with input in.
type opFunc func(inv, done int, proc history.Process, in any) porcupine.Operation

// operations returns the opFunc of the plan's history: calls stamped by
// at, those of unknown outcome returning at end.
func (p *plan) operations(end int64, at func(int) int64) opFunc {
	// A client's id is its process number, so that the visualization's rows
	// are named as the history's processes and line up with the annotation
	// rows (lease p1 …); processes that are not numbers come after them.
	// A process numbered past maxClientRow (porcupine's page has a row for
	// every id up to the largest) comes after them too.
	const maxClientRow = 1 << 16
	clients := map[history.Process]int{}
	next := 0
	for _, o := range p.ops {
		if o.Process >= 0 && o.Process < maxClientRow && int(o.Process) >= next {
			next = int(o.Process) + 1
		}
	}
	return func(inv, done int, proc history.Process, in any) porcupine.Operation {
		id, ok := clients[proc]
		if !ok {
			if proc >= 0 && proc < maxClientRow {
				id = int(proc)
			} else {
				id, next = next, next+1
			}
			clients[proc] = id
		}
		ret := end
		if done >= 0 && p.ops[done].Type == history.Ok && !resolvedLate(p.ops[done]) {
			ret = at(done)
		}
		return porcupine.Operation{ClientId: id, Input: in, Call: at(inv), Return: ret,
			Metadata: opMeta{inv: inv, done: done, process: proc}}
	}
}

// callOps makes the porcupine operations of the plan's calls, each input
// read by input; it drops the :fail calls (they did not happen), and
// names the calls input cannot read.
func (p *plan) callOps(op opFunc, input func(call) (any, error)) (ops []porcupine.Operation, fails int, bad []string) {
	for _, c := range p.calls {
		if c.typ == history.Fail {
			fails++
			continue
		}
		in, err := input(c)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", opName(p.ops, c.inv), err))
			continue
		}
		ops = append(ops, op(c.inv, c.done, c.process, in))
	}
	return ops, fails, bad
}

// initialKeys is a multi-register's initial state, key by key, in the
// model's canonical form.
func initialKeys(initial any) map[string]string {
	start := map[string]string{}
	switch m := initial.(type) {
	case map[any]any:
		for k, v := range m {
			start[canon(k)] = canon(v)
		}
	case map[history.Keyword]any:
		for k, v := range m {
			start[canon(k)] = canon(v)
		}
	}
	return start
}

// partitionByKeys splits multi-register ops into one partition per
// component of keys, in the order components first appear.
func partitionByKeys(ops []porcupine.Operation, ks *keySpace) [][]porcupine.Operation {
	index := map[int]int{} // component root -> partition
	var parts [][]porcupine.Operation
	for _, op := range ops {
		root := -1 // an empty transaction touches no key
		if ms := op.Input.(txnOp).micros; len(ms) > 0 {
			root = ks.find(ms[0].slot)
		}
		i, ok := index[root]
		if !ok {
			i = len(parts)
			index[root] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func timesKnown(ops []history.Op) bool {
	for _, o := range ops {
		if o.Time == history.Unset {
			return false
		}
	}
	return len(ops) > 0
}

// lockCounterOps gives porcupine the counter operations the Stream made of
// the history — the very ones the counter walk decides — so that the two
// analyzers differ only in how they decide. It returns how many writes
// failed (they did not happen) and, for each op that cannot be read as a
// counter op, the words for the first.
func (p *plan) lockCounterOps(op opFunc) (ops []porcupine.Operation, fails int, bad []string) {
	s := p.stream
	s.finish()
	if s.bad > 0 {
		bad = make([]string, s.bad)
		bad[0] = s.firstBad
	}
	calls := s.calls.slice()
	ops = make([]porcupine.Operation, 0, len(calls))
	for _, c := range calls {
		ops = append(ops, op(c.inv, c.done, c.process, lcOp{write: c.write, value: c.value, from: c.from, fence: c.fence, maybe: c.maybe}))
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	return ops, s.fails, bad
}

// A violation is where porcupine's search got furthest in a partition it
// could not linearize: op is the first operation, in the order of calls,
// that no partial linearization reached past.
type violation struct {
	part   int
	op     porcupine.Operation
	prefix []porcupine.Operation // the longest partial linearization that got there
	states []any                 // the states those that got there end in, described
	state  any                   // the state prefix ends in
}

func (v violation) completion() int {
	m := v.op.Metadata.(opMeta)
	if m.done >= 0 {
		return m.done
	}
	return m.inv
}

// violation finds the first operation that cannot be linearized. Porcupine
// gives the longest linearizable prefix containing each op; of these, the
// one whose first missing op (by call) comes latest says where the search
// got furthest. Ties go to the longer prefix, then to the earlier ops, so
// that the answer does not depend on the order porcupine returns them in.
func (lr *linearRun) violation() violation {
	partials := lr.info.PartialLinearizationsOperations()
	key := func(op porcupine.Operation) int { return op.Metadata.(opMeta).inv }
	for pi, part := range lr.parts {
		if pi >= len(partials) {
			break
		}
		byCall := append([]porcupine.Operation(nil), part...)
		sort.SliceStable(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
		order := map[int]int{}
		for i, op := range byCall {
			order[key(op)] = i
		}
		// The empty linearization stands for a search stuck at the start.
		lins := append([][]porcupine.Operation{{}}, partials[pi]...)
		best, bestStuck := -1, -1
		stuck := make([]int, len(lins))
		complete := false
		for i, lin := range lins {
			in := map[int]bool{}
			for _, op := range lin {
				in[key(op)] = true
			}
			stuck[i] = len(byCall)
			for j, op := range byCall {
				if !in[key(op)] {
					stuck[i] = j
					break
				}
			}
			if stuck[i] == len(byCall) {
				complete = true // a whole linearization: this partition is fine
				break
			}
			if best < 0 || stuck[i] > bestStuck || stuck[i] == bestStuck && lessLin(lin, lins[best], key) {
				best, bestStuck = i, stuck[i]
			}
		}
		if complete || len(byCall) == 0 {
			continue
		}
		v := violation{part: pi, op: byCall[bestStuck], prefix: lins[best]}
		v.state = lr.replay(v.prefix)
		seen := map[string]bool{}
		var descs []string
		for i, lin := range lins {
			if stuck[i] != bestStuck {
				continue
			}
			d := lr.model.DescribeState(lr.replay(lin))
			if !seen[d] {
				seen[d] = true
				descs = append(descs, d)
			}
		}
		sort.Strings(descs)
		for _, d := range descs[:min(len(descs), evidenceLimit)] {
			v.states = append(v.states, d)
		}
		return v
	}
	return violation{part: -1}
}

// lessLin orders linearizations: longer first, then by their ops.
func lessLin(a, b []porcupine.Operation, key func(porcupine.Operation) int) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	for i := range a {
		if key(a[i]) != key(b[i]) {
			return key(a[i]) < key(b[i])
		}
	}
	return false
}

// replay returns the state the model reaches through lin.
func (lr *linearRun) replay(lin []porcupine.Operation) any {
	s := lr.model.Init()
	for _, op := range lin {
		_, s = lr.model.Step(s, op.Input, op.Output)
	}
	return s
}
