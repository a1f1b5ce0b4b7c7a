package history

import "fmt"

// A Pair is one client operation: its invocation and, when the history
// records one, its completion.
type Pair struct {
	Invoke   Op
	Complete Op   // the zero Op when Done is false
	Done     bool // the history holds a completion for Invoke
}

// Outcome returns how the operation ended: Ok, Fail or Info. An operation
// that never completed may or may not have happened, so it is Info, as in
// Jepsen.
func (p Pair) Outcome() Type {
	if !p.Done {
		return Info
	}
	return p.Complete.Type
}

// An InconsistentError reports a history that is not a valid sequence of
// invocations and completions. Index is the Index of the op at fault.
type InconsistentError struct {
	Index int64
	Msg   string
}

func (e *InconsistentError) Error() string {
	return fmt.Sprintf("op %d: %s", e.Index, e.Msg)
}

// Pairs pairs each client invocation in ops with the completion that follows
// it on the same process, and returns the pairs in invocation order.
//
// Ops of the nemesis are not client operations and are left out. Those of
// every other process are paired, named ones included: where Jepsen leaves
// out ops whose process is not an integer, a check that counts writes would
// miss theirs and find the counter higher than the writes explain.
//
// Pairs reports an *InconsistentError at the first op that breaks a rule of
// Pairer: a completion with no open invocation on its process, a process
// invoking while its previous invocation is still open, a completion whose
// :f differs from its invocation's, a process invoking again after an :info
// completion. Checkers that must go on past such an op use a Pairer.
func Pairs(ops []Op) ([]Pair, error) {
	var pairs []Pair
	at := map[int]int{} // position of an open invocation -> index in pairs
	var pr Pairer
	for i, op := range ops {
		done, _, problem := pr.Add(i, op)
		if problem != nil {
			return nil, &InconsistentError{op.Index, problem.describe(ops)}
		}
		switch {
		case !op.IsClient():
		case op.Type == Invoke:
			at[i] = len(pairs)
			pairs = append(pairs, Pair{Invoke: op})
		case done >= 0:
			pairs[at[done]].Complete, pairs[at[done]].Done = op, true
			delete(at, done)
		}
	}
	return pairs, nil
}

// A ProblemKind is a way a history breaks the pairing rules.
type ProblemKind uint8

const (
	// DoubleInvoke: a process invokes while its previous invocation is open.
	DoubleInvoke ProblemKind = iota + 1
	// InvokeAfterInfo: a process invokes again after an :info completion; in
	// Jepsen a process whose outcome is unknown is abandoned.
	InvokeAfterInfo
	// Orphan: a completion with no open invocation on its process.
	Orphan
	// Mismatch: a completion whose :f differs from its invocation's.
	Mismatch
	// BadType: an op whose :type is none of invoke, ok, fail, info.
	BadType
)

// A PairProblem is one op that breaks the pairing rules.
type PairProblem struct {
	Kind  ProblemKind
	At    int // position of the op at fault
	Other int // position of the invocation it conflicts with; -1 if none
}

// describe says what went wrong, naming ops by their :index.
func (p *PairProblem) describe(ops []Op) string {
	op := ops[p.At]
	switch p.Kind {
	case DoubleInvoke:
		inv := ops[p.Other]
		return fmt.Sprintf("process %v invokes %s while its %s invoked at op %d is still open",
			op.Process, op.F, inv.F, inv.Index)
	case InvokeAfterInfo:
		return fmt.Sprintf("process %v invokes %s after its op %d completed :info; a crashed process must not invoke again",
			op.Process, op.F, ops[p.Other].Index)
	case Orphan:
		return fmt.Sprintf("%s completion of %s on process %v, which has no open invocation", op.Type, op.F, op.Process)
	case Mismatch:
		inv := ops[p.Other]
		return fmt.Sprintf("completion of %s on process %v, whose open invocation at op %d is %s",
			op.F, op.Process, inv.Index, inv.F)
	}
	return fmt.Sprintf("unknown op type %v", op.Type)
}

// A Pairer applies the pairing rules one op at a time, so that a checker can
// pair a history as it streams in and go on past an op that breaks a rule.
// The zero Pairer is ready to use.
type Pairer struct {
	open    ProcessMap[int] // process -> position of its open invocation
	openF   ProcessMap[Keyword]
	crashed ProcessMap[int] // process -> position of its :info completion
}

// Add takes the op at position i of a history. For a completion it returns
// the position of the invocation it completes (done), else -1. For an
// invocation made while the process's previous one is still open, it
// returns that one's position (abandoned: it will never complete), else -1.
// problem is the rule o breaks, if any; ops of the nemesis are not paired
// and break none.
//
// Past a problem the Pairer goes on as Jepsen's checkers would: a double
// invocation abandons the first, a mismatched completion still completes
// the open invocation, an orphan completion is dropped.
func (p *Pairer) Add(i int, o Op) (done, abandoned int, problem *PairProblem) {
	done, abandoned = -1, -1
	if !o.IsClient() {
		return done, abandoned, nil
	}
	prev, isOpen := p.open.Get(o.Process)
	switch o.Type {
	case Invoke:
		if isOpen {
			abandoned = prev
			problem = &PairProblem{Kind: DoubleInvoke, At: i, Other: prev}
		} else if at, ok := p.crashed.Get(o.Process); ok {
			problem = &PairProblem{Kind: InvokeAfterInfo, At: i, Other: at}
			p.crashed.Delete(o.Process)
		}
		p.open.Set(o.Process, i)
		p.openF.Set(o.Process, o.F)
	case Ok, Fail, Info:
		if !isOpen {
			return done, abandoned, &PairProblem{Kind: Orphan, At: i, Other: -1}
		}
		if f, _ := p.openF.Get(o.Process); f != o.F {
			problem = &PairProblem{Kind: Mismatch, At: i, Other: prev}
		}
		done = prev
		p.open.Delete(o.Process)
		p.openF.Delete(o.Process)
		if o.Type == Info {
			p.crashed.Set(o.Process, i)
		}
	default:
		problem = &PairProblem{Kind: BadType, At: i, Other: -1}
	}
	return done, abandoned, problem
}
