package checker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// The benchmarks run on histories `hiatus gen` writes (docs/performance.md
// has the figures and how to reproduce them from the command line). A
// section is eight ops: acquire, read, write and release, each an
// invocation and a completion.

// generated returns the history cfg describes, as EDN and as ops.
func generated(tb testing.TB, cfg gen.Config) ([]byte, []history.Op) {
	tb.Helper()
	var buf bytes.Buffer
	if _, err := gen.Write(&buf, cfg); err != nil {
		tb.Fatal(err)
	}
	ops, err := history.ReadAll(bytes.NewReader(buf.Bytes()), "history.edn")
	if err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), ops
}

// streamOf returns the Stream of ops, finished, its records in memory.
func streamOf(ops []history.Op) *Stream {
	s := newStream(0, 0)
	for _, o := range ops {
		s.Add(o)
	}
	s.finish()
	return s
}

// BenchmarkLinear times the linearizability step alone on the counter
// operations of a history in memory: the counter walk, and porcupine's
// search on the same operations. Porcupine's memory grows with the square
// of the history, so it stops at 100,000 sections.
func BenchmarkLinear(b *testing.B) {
	for _, sections := range []int{1000, 10000, 100000, 1000000} {
		_, ops := generated(b, gen.Config{Sections: sections, Workers: 64, Seed: 1})
		s := streamOf(ops)
		b.Run(fmt.Sprintf("analyzer=counter-walk/sections=%d", sections), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w, err := newCounterWalk(&s.calls, 0, s.end(), s.timed)
				if err != nil {
					b.Fatal(err)
				}
				if _, ok, _ := w.run(false); !ok {
					b.Fatal("not linearizable")
				}
			}
		})
		if sections > 100000 {
			continue
		}
		pops := porcupineOps(s.calls.slice(), s.end())
		b.Run(fmt.Sprintf("analyzer=porcupine/sections=%d", sections), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !porcupine.CheckOperations(lockCounterModel(0), pops) {
					b.Fatal("not linearizable")
				}
			}
		})
	}
}

// BenchmarkCheck times Check on a history in memory, as a run ends with:
// the lock-counter checks and linearizability by each analyzer.
func BenchmarkCheck(b *testing.B) {
	for _, sections := range []int{10000, 100000} {
		_, ops := generated(b, gen.Config{Sections: sections, Workers: 64, Seed: 1})
		for _, analyzer := range []string{AnalyzerCounterWalk, AnalyzerPorcupine} {
			b.Run(fmt.Sprintf("analyzer=%s/sections=%d", analyzer, sections), func(b *testing.B) {
				b.ReportAllocs()
				opts := Options{Model: ModelLockCounter, Analyzer: analyzer, Timeout: time.Hour}
				for b.Loop() {
					rs, err := Check(context.Background(), ops, opts)
					if err != nil || rs.Valid != Valid {
						b.Fatalf("%v: %s", err, rs.AppendEDN(nil))
					}
				}
			})
		}
	}
}

// BenchmarkStream times what hiatus check does with a lock-counter history:
// read it op by op into a Stream and check it (on one goroutine: Next, not
// Each; BenchmarkOpenCheck times the whole).
func BenchmarkStream(b *testing.B) {
	for _, sections := range []int{100000} {
		data, _ := generated(b, gen.Config{Sections: sections, Workers: 64, Seed: 1})
		b.Run(fmt.Sprintf("sections=%d", sections), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				s := NewStreamMemory(0)
				r := history.NewReader(bytes.NewReader(data), "history.edn")
				for {
					o, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					s.Add(o)
				}
				if rs, err := s.Check(Options{}); err != nil || rs.Valid != Valid {
					b.Fatalf("%v: %s", err, rs.AppendEDN(nil))
				}
			}
		})
	}
}

// BenchmarkSections times the lock-counter check alone (its sections and
// figures: lost updates, overlaps, late writes, fencing, pauses) on a
// finished Stream whose records are in memory.
func BenchmarkSections(b *testing.B) {
	_, ops := generated(b, gen.Config{Sections: 100000, Workers: 64, Seed: 1})
	s := streamOf(ops)
	w, err := s.walk(0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := s.lockCounter(0, w); r.Valid != Valid {
			b.Fatalf("%v: %s", r.Valid, r.Explanation)
		}
	}
}

// BenchmarkCheckInfo times Check on a history with 1,000 writes of unknown
// outcome among 64 workers, which no search decides in reasonable time.
func BenchmarkCheckInfo(b *testing.B) {
	_, ops := generated(b, gen.Config{Sections: 10000, Workers: 64, Info: 1000, Seed: 1})
	b.ReportAllocs()
	for b.Loop() {
		rs, err := Check(context.Background(), ops, Options{Model: ModelLockCounter})
		if r, _ := rs.Check("linear"); err != nil || r.Valid != Valid {
			b.Fatalf("%v: %s", err, rs.AppendEDN(nil))
		}
	}
}

// TestCheckManyInfo checks that writes of unknown outcome do not make the
// verdict uncertain: 1,000 of them among 64 workers, with a lost update or
// without, get a definite verdict at once.
func TestCheckManyInfo(t *testing.T) {
	for _, tc := range []struct {
		lost int
		want Validity
	}{{0, Valid}, {1, Invalid}} {
		_, ops := generated(t, gen.Config{Sections: 10000, Workers: 64, Info: 1000, Lost: tc.lost, Seed: 1})
		start := time.Now()
		rs, err := Check(context.Background(), ops, Options{Model: ModelLockCounter})
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := rs.Check("linear"); r.Valid != tc.want {
			t.Errorf("lost %d: linear %v, want %v: %s", tc.lost, r.Valid, tc.want, r.Explanation)
		}
		t.Logf("lost %d: checked %d ops in %v", tc.lost, len(ops), time.Since(start))
	}
}

// BenchmarkResults times the checks after the read (the counter walk, the
// lock-counter figures) of 100,000 sections whose records are all on disk.
func BenchmarkResults(b *testing.B) {
	_, ops := generated(b, gen.Config{Sections: 100000, Workers: 64, Seed: 1})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := newStream(1, 0)
		for _, o := range ops {
			s.Add(o)
		}
		b.StartTimer()
		k, _ := modelKindOf(ModelLockCounter)
		if rs := s.results(k, int64(0), false, nil); rs.Valid != Valid {
			b.Fatalf("%s", rs.AppendEDN(nil))
		}
	}
}
