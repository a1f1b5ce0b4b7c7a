package checker

import (
	"fmt"
	"hash/fnv"
	"math/big"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/hiatus-dev/hiatus/history"
)

// The models hiatus checks histories against, by the names --model takes.
const (
	ModelLockCounter   = "lock-counter"   // hiatus's own histories
	ModelRegister      = "register"       // Knossos register: :read, :write
	ModelCASRegister   = "cas-register"   // Knossos cas-register: :read, :write, :cas
	ModelMultiRegister = "multi-register" // Knossos multi-register: :txn
	ModelMutex         = "mutex"          // Knossos mutex: :acquire, :release
	ModelCounter       = "counter"        // Jepsen counter: :add, :read
	ModelListAppend    = "list-append"    // hiatus's list-append histories: :read, :append
)

// Models lists the model names Check accepts.
func Models() []string {
	var names []string
	for _, k := range modelKinds() {
		names = append(names, k.name)
	}
	return names
}

// The models below are values around a typed state, as etcd's robustness
// model is. Every one treats an operation marked maybe (an :info, or an
// invocation that never completed) the same way: it takes effect when it
// can, and is a legal no-op when it cannot. That is what Knossos means by
// an op that may or may not have happened: porcupine must linearize every
// op, but a maybe-op never completes (its return is after every other
// event), so the search may always place it last, where doing nothing is
// as good as never having happened; and doing nothing where its effect is
// impossible is no more than that.

// canon returns v in a canonical EDN form, so that values EDN holds equal
// (a list and a vector of the same items, sets in any order, maps in any
// key order) compare equal as strings.
func canon(v any) string { return string(appendCanon(nil, v)) }

func appendCanon(dst []byte, v any) []byte {
	switch x := v.(type) {
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ' ')
			}
			dst = appendCanon(dst, e)
		}
		return append(dst, ']')
	case history.Set:
		return appendSorted(append(dst, '#', '{'), len(x), func(i int) (any, any, bool) { return x[i], nil, false }, '}')
	case map[any]any:
		keys := make([]any, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		return appendSorted(append(dst, '{'), len(keys), func(i int) (any, any, bool) { return keys[i], x[keys[i]], true }, '}')
	case map[history.Keyword]any:
		keys := make([]history.Keyword, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		return appendSorted(append(dst, '{'), len(keys), func(i int) (any, any, bool) { return keys[i], x[keys[i]], true }, '}')
	case int:
		return history.AppendValue(dst, int64(x))
	case *big.Int:
		if x.IsInt64() {
			return history.AppendValue(dst, x.Int64())
		}
	}
	return history.AppendValue(dst, v)
}

// appendSorted appends n entries (keys, with values when pairs) in the order
// of their canonical forms, then end.
func appendSorted(dst []byte, n int, at func(int) (any, any, bool), end byte) []byte {
	items := make([]string, n)
	for i := range items {
		k, v, pair := at(i)
		s := canon(k)
		if pair {
			s += " " + canon(v)
		}
		items[i] = s
	}
	sort.Strings(items)
	for i, s := range items {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(dst, s...)
	}
	return append(dst, end)
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// maybeSuffix marks an op that may or may not have happened in descriptions.
func maybeSuffix(maybe bool) string {
	if maybe {
		return " ?"
	}
	return ""
}

// A regOp is one operation on a Knossos register, values in canonical EDN.
// Knossos completes an invocation with its :ok value, so a read carries the
// value it returned; a nil read (or a read that never returned) is unknown
// and matches any state.
type regOp struct {
	f       history.Keyword // read, write or cas
	value   string          // read: the value read; write: the value; cas: the expected value
	to      string          // cas: the new value
	unknown bool            // a read whose value is unknown
	maybe   bool            // may or may not have happened
}

// registerModel is Knossos's register, and with cas its cas-register, over
// states that are canonical EDN values.
func registerModel(initial string) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return initial },
		Step: func(state, input, _ any) (bool, any) {
			s, op := state.(string), input.(regOp)
			switch op.f {
			case "read":
				return op.unknown || op.maybe || op.value == s, s
			case "write":
				return true, op.value
			case "cas":
				if op.value == s {
					return true, op.to
				}
				return op.maybe, s
			}
			return false, s
		},
		Hash: func(state any) uint64 { return hashString(state.(string)) },
		DescribeOperation: func(input, _ any) string {
			op := input.(regOp)
			switch {
			case op.f == "cas":
				return fmt.Sprintf("cas %s→%s%s", op.value, op.to, maybeSuffix(op.maybe))
			case op.f == "read" && op.unknown:
				return "read ?" + maybeSuffix(op.maybe)
			}
			return fmt.Sprintf("%s %s%s", op.f, op.value, maybeSuffix(op.maybe))
		},
		DescribeState: func(state any) string { return state.(string) },
	}
}

// newRegOp turns a call into a register op; cas is allowed for the
// cas-register only.
func newRegOp(c call, cas bool) (regOp, error) {
	op := regOp{f: c.f, maybe: c.typ != history.Ok}
	switch {
	case c.f == "read":
		op.unknown = c.value == nil
		op.value = canon(c.value)
	case c.f == "write":
		op.value = canon(c.value)
	case c.f == "cas" && cas:
		pair, ok := c.value.([]any)
		if !ok || len(pair) != 2 {
			return op, fmt.Errorf(":cas value %s is not [old new]", canon(c.value))
		}
		op.value, op.to = canon(pair[0]), canon(pair[1])
	default:
		return op, fmt.Errorf("the %s model has no :%s", map[bool]string{false: ModelRegister, true: ModelCASRegister}[cas], c.f)
	}
	return op, nil
}

// A mutexOp is Knossos's :acquire or :release.
type mutexOp struct {
	acquire bool
	maybe   bool
}

// mutexModel is Knossos's mutex: acquire is legal when it is free, release
// when it is held, whoever holds it.
func mutexModel() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return false },
		Step: func(state, input, _ any) (bool, any) {
			locked, op := state.(bool), input.(mutexOp)
			if op.acquire != locked {
				return true, op.acquire
			}
			return op.maybe, locked
		},
		DescribeOperation: func(input, _ any) string {
			op := input.(mutexOp)
			if op.acquire {
				return "acquire" + maybeSuffix(op.maybe)
			}
			return "release" + maybeSuffix(op.maybe)
		},
		DescribeState: func(state any) string {
			if state.(bool) {
				return "held"
			}
			return "free"
		},
	}
}

func newMutexOp(c call) (mutexOp, error) {
	switch c.f {
	case "acquire":
		return mutexOp{acquire: true, maybe: c.typ != history.Ok}, nil
	case "release":
		return mutexOp{maybe: c.typ != history.Ok}, nil
	}
	return mutexOp{}, fmt.Errorf("the %s model has no :%s", ModelMutex, c.f)
}

// A micro is one [f k v] of a multi-register transaction, its key as a slot.
type micro struct {
	write   bool
	slot    int
	value   string
	unknown bool // a read of an unknown value
}

// A txnOp is a multi-register :txn.
type txnOp struct {
	micros []micro
	maybe  bool
}

// A txnState is the values of the keys that differ from their initial
// ones, by slot: keeping initial values out makes equal states equal maps.
// It is never changed once made.
type txnState map[int]string

// multiRegisterModel is Knossos's multi-register: a map of registers that
// transactions read and write atomically. keys names the slots; initial
// holds each slot's starting value.
func multiRegisterModel(keys []string, initial []string) porcupine.Model {
	get := func(s txnState, slot int) string {
		if v, ok := s[slot]; ok {
			return v
		}
		return initial[slot]
	}
	return porcupine.Model{
		Init: func() any { return txnState{} },
		Step: func(state, input, _ any) (bool, any) {
			s, op := state.(txnState), input.(txnOp)
			next, copied := s, false
			for _, m := range op.micros {
				switch {
				case m.write && get(next, m.slot) != m.value:
					if !copied {
						next, copied = copyState(s), true
					}
					if m.value == initial[m.slot] {
						delete(next, m.slot)
					} else {
						next[m.slot] = m.value
					}
				case !m.write && !m.unknown && get(next, m.slot) != m.value:
					return op.maybe, s
				}
			}
			return true, next
		},
		Equal: func(a, b any) bool {
			x, y := a.(txnState), b.(txnState)
			if len(x) != len(y) {
				return false
			}
			for k, v := range x {
				if w, ok := y[k]; !ok || w != v {
					return false
				}
			}
			return true
		},
		Hash: func(state any) uint64 {
			var h uint64
			for k, v := range state.(txnState) {
				h ^= hashString(fmt.Sprint(k, "=", v))
			}
			return h
		},
		DescribeOperation: func(input, _ any) string {
			op := input.(txnOp)
			parts := make([]string, len(op.micros))
			for i, m := range op.micros {
				switch {
				case m.write:
					parts[i] = fmt.Sprintf("w %s %s", keys[m.slot], m.value)
				case m.unknown:
					parts[i] = fmt.Sprintf("r %s ?", keys[m.slot])
				default:
					parts[i] = fmt.Sprintf("r %s %s", keys[m.slot], m.value)
				}
			}
			return "[" + strings.Join(parts, ", ") + "]" + maybeSuffix(op.maybe)
		},
		DescribeState: func(state any) string {
			s := state.(txnState)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = k + " " + get(s, i)
			}
			return "{" + strings.Join(parts, ", ") + "}"
		},
	}
}

func copyState(s txnState) txnState {
	c := make(txnState, len(s)+1)
	for k, v := range s {
		c[k] = v
	}
	return c
}

// A keySpace gives each key of a multi-register history a slot, and groups
// the slots into components: keys that some transaction touches together.
// Components are independent registers, so porcupine may check each alone
// (linearizability is local); splitting a transaction that spans keys
// would lose its atomicity, so keys it joins stay together.
type keySpace struct {
	slots   map[string]int
	keys    []string // canonical keys by slot
	initial []string // canonical initial values by slot
	parent  []int    // union-find over slots
	start   map[string]string
}

func newKeySpace(initial map[string]string) *keySpace {
	return &keySpace{slots: map[string]int{}, start: initial}
}

func (ks *keySpace) slot(key string) int {
	if i, ok := ks.slots[key]; ok {
		return i
	}
	i := len(ks.keys)
	ks.slots[key] = i
	ks.keys = append(ks.keys, key)
	v, ok := ks.start[key]
	if !ok {
		v = "nil"
	}
	ks.initial = append(ks.initial, v)
	ks.parent = append(ks.parent, i)
	return i
}

func (ks *keySpace) find(i int) int {
	for ks.parent[i] != i {
		ks.parent[i] = ks.parent[ks.parent[i]]
		i = ks.parent[i]
	}
	return i
}

func (ks *keySpace) union(i, j int) { ks.parent[ks.find(i)] = ks.find(j) }

// newTxnOp turns a :txn call into a transaction over ks's slots.
func newTxnOp(c call, ks *keySpace) (txnOp, error) {
	if c.f != "txn" {
		return txnOp{}, fmt.Errorf("the %s model has no :%s", ModelMultiRegister, c.f)
	}
	ms, ok := c.value.([]any)
	if !ok {
		return txnOp{}, fmt.Errorf(":txn value %s is not a list of [f k v]", canon(c.value))
	}
	op := txnOp{maybe: c.typ != history.Ok}
	for _, m := range ms {
		t, ok := m.([]any)
		if !ok || len(t) != 3 {
			return txnOp{}, fmt.Errorf(":txn micro-op %s is not [f k v]", canon(m))
		}
		f, _ := t[0].(history.Keyword)
		mo := micro{slot: ks.slot(canon(t[1])), value: canon(t[2])}
		switch f {
		case "read", "r":
			mo.unknown = t[2] == nil
		case "write", "w":
			mo.write = true
		default:
			return txnOp{}, fmt.Errorf(":txn micro-op %s is neither a :read nor a :write", canon(m))
		}
		if len(op.micros) > 0 {
			ks.union(op.micros[0].slot, mo.slot)
		}
		op.micros = append(op.micros, mo)
	}
	return op, nil
}

// An lcOp is one operation on the counter of the lock-counter model
// (docs/checkers.md): a read, or a section's write, a compare-and-set from
// the value its section read to the value it writes.
type lcOp struct {
	write bool
	value int64 // the value read or written
	from  int64 // a write: the value its section read
	fence int64 // a write's fencing token; 0 if unfenced
	maybe bool  // a write that completed :info or never completed
}

// An lcState is the counter and the highest fence that took effect.
type lcState struct{ value, fence int64 }

// lockCounterModel is the lock-counter model as a state machine: a read is
// legal when it returns the counter; a write takes effect when the counter
// holds what its section read, it writes that plus one, and its fence (if
// any) is above every fence before it. A write of unknown outcome takes
// effect when it can and is a legal no-op when it cannot; it never returns,
// so the search may always place it last instead, where it is the same as
// never having happened.
func lockCounterModel(initial int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return lcState{value: initial} },
		Step: func(state, input, _ any) (bool, any) {
			s, op := state.(lcState), input.(lcOp)
			switch {
			case !op.write:
				return op.value == s.value, s
			case op.value == op.from+1 && s.value == op.from && (op.fence == 0 || op.fence > s.fence):
				next := lcState{value: op.value, fence: s.fence}
				if op.fence > 0 {
					next.fence = op.fence
				}
				return true, next
			}
			return op.maybe, s
		},
		Hash: func(state any) uint64 {
			s := state.(lcState)
			return uint64(s.value)*0x9e3779b97f4a7c15 ^ uint64(s.fence)
		},
		DescribeOperation: func(input, _ any) string {
			op := input.(lcOp)
			if !op.write {
				return fmt.Sprintf("read %d", op.value)
			}
			d := fmt.Sprintf("write %d → %d", op.from, op.value)
			if op.fence > 0 {
				d += fmt.Sprintf(" (fence %d)", op.fence)
			}
			return d + maybeSuffix(op.maybe)
		},
		DescribeState: func(state any) string {
			s := state.(lcState)
			if s.fence > 0 {
				return fmt.Sprintf("%d (fence %d)", s.value, s.fence)
			}
			return fmt.Sprint(s.value)
		},
	}
}
