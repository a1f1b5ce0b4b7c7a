package checker

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from what the checks say now")

// TestGolden pins results.edn, byte for byte, for generated histories of
// every shape gen makes — lost updates, writes of unknown outcome, few and
// many workers — and the edge histories: the figures, the evidence and
// every explanation. A change to the checker that means to change what it
// says rewrites them (go test ./checker -run TestGolden -update) and shows
// the difference in review; one that means only to change how it works
// (streaming the check, packing its records) must leave them as they are.
func TestGolden(t *testing.T) {
	type input struct {
		name string
		ops  func(t *testing.T) []byte
	}
	var inputs []input
	for _, c := range []gen.Config{
		{Sections: 200, Workers: 2, Seed: 1},
		{Sections: 500, Workers: 4, Lost: 1, Seed: 2},
		{Sections: 500, Workers: 4, Lost: 3, Info: 5, Seed: 3},
		{Sections: 1000, Workers: 16, Info: 40, Seed: 4},
		{Sections: 1000, Workers: 16, Lost: 5, Info: 40, Seed: 5},
		{Sections: 2000, Workers: 64, Lost: 2, Info: 10, Seed: 6},
		{Sections: 300, Workers: 3, Info: 100, Seed: 7},
		{Sections: 300, Workers: 8, Lost: 10, Seed: 8},
	} {
		c := c
		inputs = append(inputs, input{
			name: fmt.Sprintf("gen-s%d-w%d-l%d-i%d-seed%d", c.Sections, c.Workers, c.Lost, c.Info, c.Seed),
			ops:  func(t *testing.T) []byte { b, _ := generated(t, c); return b },
		})
	}
	edges, err := filepath.Glob(filepath.Join("testdata", "edge", "*.edn"))
	if err != nil || len(edges) == 0 {
		t.Fatalf("no edge histories: %v", err)
	}
	for _, p := range edges {
		p := p
		inputs = append(inputs, input{name: "edge-" + filepath.Base(p[:len(p)-4]), ops: func(t *testing.T) []byte {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}})
	}
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			path := filepath.Join("testdata", "golden", in.name+".edn")
			f, err := writeTemp(t, in.ops(t))
			if err != nil {
				t.Fatal(err)
			}
			h, err := Open(context.Background(), f, Options{}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := h.Check(context.Background(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := rs.AppendEDN(nil)
			// The same check with every counter record on disk, sorted in
			// runs of two: the records' place must not change a word.
			ops, err := history.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			s := newStream(1, 2)
			for _, o := range ops {
				s.Add(o)
			}
			if s.calls.len() > 0 && s.calls.file == nil {
				t.Fatal("the records did not go to disk")
			}
			if disk, err := s.Check(Options{}); err != nil {
				t.Errorf("on disk: %v", err)
			} else if d := disk.AppendEDN(nil); !bytes.Equal(d, got) {
				t.Errorf("results.edn with the records on disk differs:\n got %s\nwant %s", d, got)
			}
			if strings.HasPrefix(in.name, "edge-") {
				spillAtEveryOp(t, ops, got)
			}
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./checker -run TestGolden -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("results.edn differs from %s:\n got %s\nwant %s", path, got, want)
			}
		})
	}
}

// spillAtEveryOp checks ops with the records moved to disk after each op
// in turn, those in memory then (sections, calls, the order of writes by
// invocation) and those after each taking their own way, against want.
func spillAtEveryOp(t *testing.T, ops []history.Op, want []byte) {
	t.Helper()
	for k := range len(ops) + 1 {
		s := newStream(1<<40, 2)
		for i, o := range ops {
			if i == k {
				s.memory = 1 // the next Add spills
			}
			s.Add(o)
		}
		if k == len(ops) {
			s.memory = 1 // Check's finish spills
		}
		rs, err := s.Check(Options{})
		if err != nil {
			t.Fatalf("spilled after op %d: %v", k, err)
		}
		if got := rs.AppendEDN(nil); !bytes.Equal(got, want) {
			t.Fatalf("spilled after op %d: results.edn differs:\n got %s\nwant %s", k, got, want)
		}
	}
}

func writeTemp(t *testing.T, b []byte) (string, error) {
	p := filepath.Join(t.TempDir(), "history.edn")
	return p, os.WriteFile(p, b, 0o644)
}
