package history_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// BenchmarkSortJournal sorts the journal of 100,000 sections (800,000 ops,
// 8 chunks) into the history's order, as a run ends; B/op is what the sort
// allocates, which the chunk bounds.
func BenchmarkSortJournal(b *testing.B) {
	ops, _, err := gen.Ops(gen.Config{Sections: 100_000, Workers: 8, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	path := filepath.Join(dir, "journal.edn")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := history.NewWriter(f)
	// A journal holds ops as they arrived: each worker's in order, the
	// workers' interleaved a little out of time order.
	for i := 0; i < len(ops); i += 2 {
		if i+1 < len(ops) {
			ops[i], ops[i+1] = ops[i+1], ops[i]
		}
	}
	for _, o := range ops {
		o.Index = history.Unset
		if err := w.Write(o); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for range b.N {
		n := 0
		if err := history.SortFile(context.Background(), path, history.SortOptions{}, func(history.Op) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n != len(ops) {
			b.Fatalf("%d ops sorted, want %d", n, len(ops))
		}
	}
}
