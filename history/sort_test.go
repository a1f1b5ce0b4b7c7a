package history

import (
	"cmp"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSortJournal: whatever the chunk size and the runs merged at once
// (several passes when they are few), the history is the journal
// sorted by :time, ops of equal time in the order they arrived, with dense
// indexes; the sort leaves no file behind.
func TestSortJournal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var journal []Op
	for i := range 1000 {
		// Few distinct times, so that ties are many; :value keeps the
		// arrival order to check against.
		journal = append(journal, Op{Index: Unset, Time: r.Int64N(50), Type: Invoke,
			Process: Process(i % 7), F: FRead, Value: int64(i)})
	}
	dir := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the sort's scratch directory goes
	path := filepath.Join(dir, "journal.edn")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f)
	for _, o := range journal {
		if err := w.Write(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := slices.Clone(journal)
	slices.SortStableFunc(want, func(a, b Op) int { return cmp.Compare(a.Time, b.Time) })

	for _, tc := range []struct{ chunk, fanIn int }{
		{1, 2}, {1, 64}, {7, 3}, {7, 1000}, {999, 2}, {1000, 64}, {1001, 64}, {100_000, 64},
	} {
		chunk := tc.chunk
		var got []Op
		err := SortFile(context.Background(), path, SortOptions{Chunk: chunk, FanIn: tc.fanIn}, func(o Op) error {
			got = append(got, o)
			return nil
		})
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if len(got) != len(want) {
			t.Fatalf("chunk %d: %d ops, want %d", chunk, len(got), len(want))
		}
		for i, o := range got {
			if o.Index != int64(i) || o.Time != want[i].Time || o.Value != want[i].Value {
				t.Fatalf("chunk %d: op %d is %v, want :index %d of %v", chunk, i, o, i, want[i])
			}
		}
		left, _ := os.ReadDir(dir)
		if len(left) != 1 {
			t.Errorf("chunk %d: %d files in the run directory after the sort, want only the journal", chunk, len(left))
		}
		if scratch, _ := os.ReadDir(tmp); len(scratch) != 0 {
			t.Errorf("chunk %d: %d scratch directories left after the sort", chunk, len(scratch))
		}
	}
}
