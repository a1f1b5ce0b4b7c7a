package checker

import (
	"context"
	"fmt"

	"github.com/anishathalye/porcupine"
	"github.com/hiatus-dev/hiatus/history"
)

// A modelKind is a model a history is checked against, declared once: the
// name --model takes, the client ops that tell it, its initial state, and
// how its history is judged. Check, Detect, Open and the drawing read it,
// and no check switches on a model's name. (The streamed checks are the
// lock-counter's own: they take its integer initial state as given.)
type modelKind struct {
	name string
	// tells says whether a history whose client ops' :f values are fs
	// calls for the model. On a set not empty the kinds' tells exclude
	// one another, so the order they are asked in does not matter; on an
	// empty one, register's and mutex's both would, and Detect refuses it
	// first.
	tells func(fs fset) bool
	// initial checks v as the model's starting state and fills in its
	// default.
	initial func(name string, v any) (any, error)
	// stream: the history is checked as a Stream keeps it (in time order,
	// by the lock-counter's checks), which gives every result itself.
	stream bool
	// walk: the counter walk can decide its linearizability (a streamed
	// model's: it walks the Stream's counter operations).
	walk bool
	// streamCheck is a streamed model's own verdict, from what the Stream
	// kept; nil for the lock-counter's checks.
	streamCheck func(s *Stream) Result
	// writes are the :f of its histories' writes, one of which must have
	// completed :ok for the stats to call the history telling.
	writes []history.Keyword
	// problem makes porcupine's model and partitioned operations of p's
	// history, with the :fail ops it dropped and the ops it could not
	// read; nil for a model porcupine does not search.
	problem func(p *plan, op opFunc) (porcupine.Model, [][]porcupine.Operation, int, []string)
	// check is the model's verdict on a plan not streamed; nil for
	// linearizability by porcupine, when problem must be set.
	check func(p *plan) Result
	// explain says why a violation porcupine found is one; nil for the
	// search's own words.
	explain func(p *plan, lr *linearRun, v violation) (string, []Field)
}

// modelKinds are every model, in the order Models lists them.
func modelKinds() []modelKind {
	return []modelKind{
		{name: ModelLockCounter, stream: true, walk: true, initial: integerInitial, writes: []history.Keyword{history.FWrite},
			tells: func(fs fset) bool {
				return fs[history.FAcquire] && (fs[history.FRead] || fs[history.FWrite]) &&
					fs.only(history.FAcquire, history.FRelease, history.FRead, history.FWrite, history.FExtend, history.FRenew)
			},
			problem: func(p *plan, op opFunc) (porcupine.Model, [][]porcupine.Operation, int, []string) {
				ops, fails, bad := p.lockCounterOps(op)
				return lockCounterModel(p.initial.(int64)), [][]porcupine.Operation{ops}, fails, bad
			},
			explain: func(p *plan, lr *linearRun, v violation) (string, []Field) {
				return p.stream.explainLockCounter(lr, v)
			}},
		{name: ModelRegister, initial: anyInitial,
			tells: func(fs fset) bool {
				return fs.only(history.FRead, history.FWrite)
			},
			problem: registerProblem(false)},
		{name: ModelCASRegister, initial: anyInitial,
			tells: func(fs fset) bool {
				return fs["cas"] && fs.only("cas", history.FRead, history.FWrite)
			},
			problem: registerProblem(true)},
		{name: ModelMultiRegister, initial: mapInitial,
			tells: func(fs fset) bool {
				return fs["txn"] && fs.only("txn")
			},
			problem: func(p *plan, op opFunc) (porcupine.Model, [][]porcupine.Operation, int, []string) {
				ks := newKeySpace(initialKeys(p.initial))
				ops, fails, bad := p.callOps(op, func(c call) (any, error) { return newTxnOp(c, ks) })
				return multiRegisterModel(ks.keys, ks.initial), partitionByKeys(ops, ks), fails, bad
			}},
		{name: ModelMutex, initial: freeInitial,
			tells: func(fs fset) bool {
				return fs.only(history.FAcquire, history.FRelease)
			},
			problem: func(p *plan, op opFunc) (porcupine.Model, [][]porcupine.Operation, int, []string) {
				ops, fails, bad := p.callOps(op, func(c call) (any, error) { return newMutexOp(c) })
				return mutexModel(), [][]porcupine.Operation{ops}, fails, bad
			}},
		{name: ModelCounter, initial: integerInitial,
			tells: func(fs fset) bool {
				return fs["add"] && fs.only("add", history.FRead)
			},
			check: func(p *plan) Result { return counterBounds(p.ops, p.calls, p.initial.(int64)) }},
		{name: ModelListAppend, stream: true, initial: emptyInitial, writes: []history.Keyword{history.FAppend},
			tells: func(fs fset) bool {
				return fs[history.FAppend] &&
					fs.only(history.FAcquire, history.FRelease, history.FRead, history.FAppend, history.FExtend, history.FRenew)
			},
			streamCheck: (*Stream).listAppend},
	}
}

// modelKindOf returns the model called name.
func modelKindOf(name string) (modelKind, bool) {
	for _, k := range modelKinds() {
		if k.name == name {
			return k, true
		}
	}
	return modelKind{}, false
}

// streamed reports whether the model called name is checked as a Stream
// keeps its history.
func streamed(name string) bool {
	k, ok := modelKindOf(name)
	return ok && k.stream
}

// registerProblem is the problem of a register, with :cas or without.
func registerProblem(cas bool) func(p *plan, op opFunc) (porcupine.Model, [][]porcupine.Operation, int, []string) {
	return func(p *plan, op opFunc) (porcupine.Model, [][]porcupine.Operation, int, []string) {
		ops, fails, bad := p.callOps(op, func(c call) (any, error) { return newRegOp(c, cas) })
		return registerModel(canon(p.initial)), [][]porcupine.Operation{ops}, fails, bad
	}
}

// integerInitial: the model starts at an integer, 0 by default.
func integerInitial(name string, v any) (any, error) {
	if v == nil {
		return int64(0), nil
	}
	if n, ok := history.Int(v); ok {
		return n, nil
	}
	return nil, fmt.Errorf("the %s model starts at an integer, not %s", name, canon(v))
}

// anyInitial: the model starts at any value, nil by default.
func anyInitial(_ string, v any) (any, error) { return v, nil }

// mapInitial: the model starts from a map of keys to values; every key
// nil by default.
func mapInitial(name string, v any) (any, error) {
	switch v.(type) {
	case nil, map[any]any, map[history.Keyword]any:
		return v, nil
	}
	return nil, fmt.Errorf("the %s model starts from a map of keys to values, not %s", name, canon(v))
}

// freeInitial: the model always starts free.
func freeInitial(name string, v any) (any, error) {
	if v != nil && v != false {
		return nil, fmt.Errorf("the %s model always starts free; it takes no initial value", name)
	}
	return nil, nil
}

// verdict is the model's own check of a plan not streamed: its check, or
// linearizability by porcupine.
func (k modelKind) verdict(ctx context.Context, p *plan, visual bool) (Result, *linearRun) {
	if k.check != nil {
		return k.check(p), nil
	}
	return p.linear(ctx, visual)
}

// Searched reports whether porcupine can search histories of the model
// called name (and so draw them).
func Searched(name string) bool {
	k, ok := modelKindOf(name)
	return ok && k.problem != nil
}

// HasLockFigures reports whether the result of the model called name
// carries the figures of a lock's sections (LockFigures, under the
// names results.edn gives them): a streamed model's does.
func HasLockFigures(name string) bool { return streamed(name) }
