package nemesis

import "strconv"

// A Slot is the worker slot or lock node a fault is aimed at or hit, or
// none: the zero Slot, which a replay reads as "draw one, as the run did"
// and a schedule writes for a fault of a server. A fault of worker 0 is
// On(0), never the zero value.
type Slot struct{ plus1 int }

// On is the slot or node at index i, from 0.
func On(i int) Slot {
	if i < 0 {
		return Slot{}
	}
	return Slot{i + 1}
}

// Index returns the slot's index, and false for none.
func (s Slot) Index() (int, bool) { return s.plus1 - 1, s.plus1 > 0 }

// IsNone reports whether s is none.
func (s Slot) IsNone() bool { return s.plus1 == 0 }

// String is the index, or "none".
func (s Slot) String() string {
	if i, ok := s.Index(); ok {
		return strconv.Itoa(i)
	}
	return "none"
}

// GoString is s as Go: nemesis.On(2), or nemesis.Slot{} for none.
func (s Slot) GoString() string {
	if i, ok := s.Index(); ok {
		return "nemesis.On(" + strconv.Itoa(i) + ")"
	}
	return "nemesis.Slot{}"
}
