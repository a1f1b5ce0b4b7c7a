package checker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// TestBudgetAndCores: hiatus check's verdict and figures do not depend on
// where its records are (a budget too small for one record, which spills
// them all; one for about half the history's, which spills them midway;
// or the default, which keeps them in memory) nor on how many
// goroutines parse the history. The history loses updates and has writes
// of unknown outcome, so that every figure is at work.
func TestBudgetAndCores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.edn")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Write(f, gen.Config{Sections: 4000, Workers: 16, Lost: 4, Info: 40, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var want []byte
	for _, procs := range []int{1, 2, 4} {
		// 4,000 sections take about 1.6 MB (callBytes, sectionBytes).
		for _, memory := range []int64{0, 1, 800 << 10} {
			name := fmt.Sprintf("GOMAXPROCS=%d/memory=%d", procs, memory)
			runtime.GOMAXPROCS(procs)
			h, err := Open(context.Background(), path, Options{Memory: memory}, false, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if onDisk := h.Stream.calls.file != nil; onDisk != (memory != 0) {
				t.Fatalf("%s: records on disk %v", name, onDisk)
			}
			rs, err := h.Check(context.Background(), Options{})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got := rs.AppendEDN(nil)
			if want == nil {
				want = got
				lc, _ := rs.Check("lock-counter")
				if lc.Valid != Invalid || !bytes.Contains(got, []byte(":info-writes 40")) {
					t.Fatalf("the history does not lose updates among :info writes: %s", got)
				}
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: results differ:\n got %s\nwant %s", name, got, want)
			}
		}
	}
	// The ops themselves, in memory, give the same results.
	ops, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Check(context.Background(), ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rs.AppendEDN(nil); !bytes.Equal(got, want) {
		t.Errorf("Check in memory: results differ:\n got %s\nwant %s", got, want)
	}
}

// TestSpillAtRoom: a Stream that Grow made room for its memory's worth of
// records moves them to disk when that room is used up, not after a list
// grew by append past it (which took a quarter more memory and left the
// old list to the collector, with the heap at its limit). The history's
// calls run ahead of its sections, so the calls' room is used up first.
func TestSpillAtRoom(t *testing.T) {
	ops, _, err := gen.Ops(gen.Config{Sections: 4000, Workers: 16, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := NewStreamMemory(400 << 10) // about 1,000 sections
	defer s.Close()
	s.Grow(len(ops))
	calls, secs := cap(s.calls.mem), cap(s.secs.byStart.mem)
	if calls == 0 || calls >= len(ops)/4 {
		t.Fatalf("room for %d calls: Grow made room for the history, not the budget", calls)
	}
	for i, o := range ops {
		s.Add(o)
		if s.calls.file != nil {
			t.Logf("on disk after op %d, at %d calls and %d sections", i, s.calls.len(), s.secs.n)
			return
		}
		if cap(s.calls.mem) != calls || cap(s.secs.byStart.mem) != secs {
			t.Fatalf("op %d: the room grew from %d calls and %d sections to %d and %d", i, calls, secs, cap(s.calls.mem), cap(s.secs.byStart.mem))
		}
	}
	t.Fatal("the records never went to disk")
}
