package checker

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// flaggedOf checks ops with a Stream asked for the flags of sections lo to
// hi-1, its records in memory or, in runs of two, on disk.
func flaggedOf(t *testing.T, ops []history.Op, lo, hi int, disk bool) (Results, []SectionFlags) {
	t.Helper()
	s := newStream(0, 0)
	if disk {
		s = newStream(1, 2)
	}
	for _, o := range ops {
		s.Add(o)
	}
	s.FlagSections(lo, hi)
	rs, err := s.Check(Options{Model: ModelLockCounter})
	if err != nil {
		t.Fatal(err)
	}
	return rs, s.Flagged()
}

// TestFlagged: the sections the check flags for a picture are the ones its
// figures count and its evidence names, wherever its records are, and a
// range asked for keeps the flags of its sections as the whole has them.
func TestFlagged(t *testing.T) {
	for _, cfg := range []gen.Config{
		{Sections: 300, Workers: 3, Seed: 1},
		{Sections: 500, Workers: 4, Lost: 3, Seed: 2},
		{Sections: 1000, Workers: 16, Lost: 5, Info: 40, Seed: 4},
		{Sections: 2000, Workers: 64, Lost: 12, Info: 10, Seed: 6},
	} {
		ops, _, err := gen.Ops(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := len(Sections(ops))
		rs, flags := flaggedOf(t, ops, 0, n, false)
		fig, _ := rs.LockFigures()
		var overlap, late int64
		stale := map[int64]bool{} // write index of each stale write
		lost := map[int64]bool{}
		secs := Sections(ops)
		for _, f := range flags {
			if f.Overlap {
				overlap++
			}
			if f.Late {
				late++
			}
			if f.Stale {
				stale[secs[f.Seq].Write] = true
			}
			if f.Lost {
				lost[secs[f.Seq].Write] = true
			}
		}
		if overlap != fig.Overlapping || late != fig.LateWrites {
			t.Errorf("%+v: %d overlapping and %d late flagged, the figures say %d and %d", cfg, overlap, late, fig.Overlapping, fig.LateWrites)
		}
		r, _ := rs.Check("lock-counter")
		evidence, _ := r.Get("stale-writes").([]any)
		for _, e := range evidence {
			m := e.(map[history.Keyword]any)
			if !stale[m["write"].(int64)] {
				t.Errorf("%+v: stale write op %d is not flagged", cfg, m["write"])
			}
			if other, ok := m["same-value-as"].(int64); ok && !lost[other] {
				t.Errorf("%+v: op %d, whose update stale op %d lost, is not flagged", cfg, other, m["write"])
			}
		}
		if (len(evidence) > 0) != (len(stale) > 0) || cfg.Lost > 0 && len(lost) == 0 {
			t.Errorf("%+v: %d stale and %d lost flagged, %d stale writes in the evidence", cfg, len(stale), len(lost), len(evidence))
		}
		if _, onDisk := flaggedOf(t, ops, 0, n, true); !reflect.DeepEqual(onDisk, flags) {
			t.Errorf("%+v: the flags with the records on disk differ", cfg)
		}
		lo, hi := n/3, 2*n/3
		_, part := flaggedOf(t, ops, lo, hi, false)
		var want []SectionFlags
		for _, f := range flags {
			if f.Seq >= lo && f.Seq < hi {
				want = append(want, f)
			}
		}
		if !reflect.DeepEqual(part, append([]SectionFlags{}, want...)) {
			t.Errorf("%+v: the flags of sections %d to %d differ from the whole's", cfg, lo, hi)
		}
	}
	if _, flags := flaggedOf(t, nil, 0, 0, false); len(flags) != 0 {
		t.Errorf("no range asked for, yet %d flags", len(flags))
	}
}

// TestNowhereToSpill: with no directory to put its records in, a check
// keeps them in memory and says what it would have said.
func TestNowhereToSpill(t *testing.T) {
	ops, _, err := gen.Ops(gen.Config{Sections: 500, Workers: 4, Lost: 3, Info: 5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := flaggedOf(t, ops, 0, 0, false)
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "gone"))
	got, _ := flaggedOf(t, ops, 0, 0, true)
	if g, w := got.AppendEDN(nil), want.AppendEDN(nil); !bytes.Equal(g, w) {
		t.Errorf("with nowhere to spill:\n got %s\nwant %s", g, w)
	}
}
