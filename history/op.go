// Package history owns the operation model shared by every part of hiatus:
// Jepsen-style invoke / ok / fail / info events, their EDN encoding, and the
// pairing of invocations with completions. It imports nothing of hiatus
// but internal/files, the one way hiatus opens a file.
package history

import (
	"fmt"
	"math"
)

// A Type says whether an op is an invocation or how it completed.
type Type uint8

const (
	// Invoke begins an operation.
	Invoke Type = iota + 1
	// Ok completes an operation that definitely happened.
	Ok
	// Fail completes an operation that definitely did not happen.
	Fail
	// Info completes an operation whose outcome is unknown; for the nemesis,
	// it marks a fault event.
	Info
)

func (t Type) String() string {
	switch t {
	case Invoke:
		return "invoke"
	case Ok:
		return "ok"
	case Fail:
		return "fail"
	case Info:
		return "info"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// ParseType returns the Type named by s ("invoke", "ok", "fail", "info").
func ParseType(s string) (Type, error) {
	switch s {
	case "invoke":
		return Invoke, nil
	case "ok":
		return Ok, nil
	case "fail":
		return Fail, nil
	case "info":
		return Info, nil
	}
	return 0, fmt.Errorf("unknown op type %q (want invoke, ok, fail or info)", s)
}

// A Process is the logical process that performed an op: a history's
// non-negative integer processes as they are written; Nemesis for Jepsen's
// :nemesis; the renewers of a lock's grants (:renew-3, see Renewer); and
// any other process (a name, a negative number) numbered below -1 by the
// Reader that read it (Reader.Processes says how each is written). Every
// process but Nemesis is a client.
type Process int64

// Nemesis is the process of fault events.
const Nemesis Process = math.MinInt64

// IsClient reports whether p is a client: any process but the nemesis.
func (p Process) IsClient() bool { return p != Nemesis }

func (p Process) String() string {
	if p == Nemesis {
		return ":nemesis"
	}
	if h, g, ok := p.Renews(); ok {
		return ":" + string(appendRenewer(nil, h, g))
	}
	return fmt.Sprint(int64(p))
}

// A Keyword is an EDN keyword, held without its leading colon.
type Keyword string

// Unset marks an Index or Time that a history did not record.
const Unset int64 = -1

// An Op is one event of a history.
//
// Value holds any EDN value: nil, bool, int64, *big.Int, float64, string,
// Keyword, []any (vectors and lists), map[any]any (maps) and Set.
// Error is the op's :error, nil when it has none. Extra holds every other
// key of the op map, by keyword name.
type Op struct {
	Index   int64 // position in the history, from 0; Unset if not recorded
	Time    int64 // nanoseconds since the run's start; Unset if not recorded
	Type    Type
	Process Process
	F       Keyword
	Value   any
	Error   any
	Extra   map[Keyword]any
}

// A Set is an EDN set #{...}.
type Set []any

// Int returns v as an int64 when it is an integer that fits.
func Int(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

// Get returns the extra value under key k, or nil.
func (o Op) Get(k Keyword) any {
	if o.Extra == nil {
		return nil
	}
	return o.Extra[k]
}

// With returns o with the extra key k set to v. It copies Extra, so ops
// shared between goroutines are never mutated.
func (o Op) With(k Keyword, v any) Op {
	m := make(map[Keyword]any, len(o.Extra)+1)
	for key, val := range o.Extra {
		m[key] = val
	}
	m[k] = v
	o.Extra = m
	return o
}

// IsClient reports whether o was performed by a client process: any but
// the nemesis. A process with a name is a client: dropping its ops would
// leave writes out of a count that the counter's value includes.
func (o Op) IsClient() bool { return o.Process.IsClient() }
