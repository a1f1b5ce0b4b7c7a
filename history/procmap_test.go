package history

import (
	"maps"
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestProcessMap: a ProcessMap holds what a map[Process]V holds after any
// sequence of sets and deletes, for processes by number, huge or negative.
func TestProcessMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var m ProcessMap[int]
		want := map[Process]int{}
		proc := rapid.SampledFrom([]Process{0, 1, 2, 63, 64, denseProcesses - 1, denseProcesses, 1 << 40, -1, -2, Nemesis, math.MaxInt64})
		for i := range rapid.IntRange(0, 60).Draw(t, "ops") {
			p := proc.Draw(t, "process")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				m.Set(p, i)
				want[p] = i
			case 2:
				m.Delete(p)
				delete(want, p)
			case 3:
				if rapid.Bool().Draw(t, "clear") {
					m.Clear()
					clear(want)
				}
			}
			for _, q := range []Process{p, 0, denseProcesses, Nemesis} {
				v, ok := m.Get(q)
				w, wok := want[q]
				if v != w || ok != wok {
					t.Fatalf("Get(%v) = %v, %v; want %v, %v", q, v, ok, w, wok)
				}
			}
			if m.Len() != len(want) {
				t.Fatalf("Len %d, want %d", m.Len(), len(want))
			}
		}
		if got := maps.Collect(m.All()); !maps.Equal(got, want) {
			t.Fatalf("All yields %v, want %v", got, want)
		}
	})
}
