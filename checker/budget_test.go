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
// them all, or the default, which keeps them in memory) nor on how many
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
		for _, memory := range []int64{0, 1} {
			name := fmt.Sprintf("GOMAXPROCS=%d/memory=%d", procs, memory)
			runtime.GOMAXPROCS(procs)
			h, err := Open(context.Background(), path, Options{Memory: memory}, false, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if onDisk := h.Stream.calls.file != nil; onDisk != (memory == 1) {
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
