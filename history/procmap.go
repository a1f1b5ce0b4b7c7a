package history

import "iter"

// A ProcessMap maps processes to values, as a map[Process]V does, for the
// checkers that look a process up at every op: the small non-negative
// processes a history mostly has are kept by number in a slice, the rest in
// a map. Pairing a generated history spent a third of its time in the
// lookups, inserts and deletes of Go maps. The zero ProcessMap is empty and
// ready to use.
type ProcessMap[V any] struct {
	dense  []slot[V]
	sparse map[Process]V
	n      int
}

type slot[V any] struct {
	v  V
	ok bool
}

// denseProcesses bounds the processes kept by number; any above go to the
// map, so that a history of a few huge process numbers costs no more.
const denseProcesses = 1 << 12

// Get returns the value of p, and whether it has one.
func (m *ProcessMap[V]) Get(p Process) (V, bool) {
	if p >= 0 && p < Process(len(m.dense)) {
		s := &m.dense[p]
		return s.v, s.ok
	}
	v, ok := m.sparse[p]
	return v, ok
}

// Set makes v the value of p.
func (m *ProcessMap[V]) Set(p Process, v V) {
	if p >= 0 && p < denseProcesses {
		if p >= Process(len(m.dense)) {
			m.dense = append(m.dense, make([]slot[V], int(p)+1-len(m.dense))...)
		}
		s := &m.dense[p]
		if !s.ok {
			m.n++
		}
		s.v, s.ok = v, true
		return
	}
	if m.sparse == nil {
		m.sparse = map[Process]V{}
	}
	if _, ok := m.sparse[p]; !ok {
		m.n++
	}
	m.sparse[p] = v
}

// Delete removes the value of p, if it has one.
func (m *ProcessMap[V]) Delete(p Process) {
	if p >= 0 && p < Process(len(m.dense)) {
		s := &m.dense[p]
		if s.ok {
			m.n--
			*s = slot[V]{}
		}
		return
	}
	if _, ok := m.sparse[p]; ok {
		m.n--
		delete(m.sparse, p)
	}
}

// Len returns the number of processes with a value.
func (m *ProcessMap[V]) Len() int { return m.n }

// All yields each process with a value and its value, in no set order.
func (m *ProcessMap[V]) All() iter.Seq2[Process, V] {
	return func(yield func(Process, V) bool) {
		for p := range m.dense {
			if s := &m.dense[p]; s.ok && !yield(Process(p), s.v) {
				return
			}
		}
		for p, v := range m.sparse {
			if !yield(p, v) {
				return
			}
		}
	}
}

// Clear removes every value.
func (m *ProcessMap[V]) Clear() {
	clear(m.dense)
	clear(m.sparse)
	m.n = 0
}
