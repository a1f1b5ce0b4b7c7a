package history_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// generatedHistory is a history `hiatus gen` writes in the format of a
// run: 100,000 sections of 64 workers, 800,130 ops.
func generatedHistory(b *testing.B) []byte {
	var buf bytes.Buffer
	if _, err := gen.Write(&buf, gen.Config{Sections: 100000, Workers: 64, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkReadGenerated reads generatedHistory one op at a time (Next).
func BenchmarkReadGenerated(b *testing.B) {
	data := generatedHistory(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := history.NewReader(bytes.NewReader(data), "history.edn")
		for {
			if _, err := r.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkEachGenerated reads the same history with Each, as hiatus check
// does: chunks parsed by GOMAXPROCS goroutines, four at the most (-cpu
// sets how many); keeping every extra key, and only those a check reads
// (Reader.KeepExtra).
func BenchmarkEachGenerated(b *testing.B) {
	data := generatedHistory(b)
	for _, keep := range []struct {
		name string
		keys []history.Keyword
	}{{"all", nil}, {"check", []history.Keyword{history.KeyLeaseMS, history.KeyFence, history.KeyFinal, history.KeyResolved}}} {
		b.Run("keep="+keep.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				r := history.NewReader(bytes.NewReader(data), "history.edn")
				if keep.keys != nil {
					r.KeepExtra(keep.keys...)
				}
				if err := r.Each(context.Background(), func(history.Op) { n++ }); err != nil {
					b.Fatal(err)
				}
				if n != 800130 {
					b.Fatalf("%d ops, want 800130", n)
				}
			}
		})
	}
}
