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
// Ops of the nemesis, and of any other process with a negative number (the
// Reader gives those to named processes), are not client operations and are
// left out, as Jepsen leaves out ops whose process is not an integer.
//
// Pairs reports an *InconsistentError when a completion has no open
// invocation on its process, a process invokes while its previous invocation
// is still open, a completion's :f differs from its invocation's, or a
// process invokes again after an :info completion: in Jepsen a process whose
// outcome is unknown is abandoned, and its worker goes on as a new process.
func Pairs(ops []Op) ([]Pair, error) {
	var pairs []Pair
	open := make(map[Process]int)      // process -> index in pairs of its open invocation
	crashed := make(map[Process]int64) // process -> Index of its :info completion
	for _, op := range ops {
		if op.Process < 0 {
			continue
		}
		p, isOpen := open[op.Process]
		switch op.Type {
		case Invoke:
			if isOpen {
				return nil, &InconsistentError{op.Index, fmt.Sprintf(
					"process %v invokes %s while its %s invoked at op %d is still open",
					op.Process, op.F, pairs[p].Invoke.F, pairs[p].Invoke.Index)}
			}
			if at, ok := crashed[op.Process]; ok {
				return nil, &InconsistentError{op.Index, fmt.Sprintf(
					"process %v invokes %s after its op %d completed :info; a crashed process must not invoke again",
					op.Process, op.F, at)}
			}
			open[op.Process] = len(pairs)
			pairs = append(pairs, Pair{Invoke: op})
		case Ok, Fail, Info:
			if !isOpen {
				return nil, &InconsistentError{op.Index, fmt.Sprintf(
					"%s completion of %s on process %v, which has no open invocation", op.Type, op.F, op.Process)}
			}
			if inv := pairs[p].Invoke; inv.F != op.F {
				return nil, &InconsistentError{op.Index, fmt.Sprintf(
					"completion of %s on process %v, whose open invocation at op %d is %s",
					op.F, op.Process, inv.Index, inv.F)}
			}
			pairs[p].Complete, pairs[p].Done = op, true
			delete(open, op.Process)
			if op.Type == Info {
				crashed[op.Process] = op.Index
			}
		default:
			return nil, &InconsistentError{op.Index, fmt.Sprintf("unknown op type %v", op.Type)}
		}
	}
	return pairs, nil
}
