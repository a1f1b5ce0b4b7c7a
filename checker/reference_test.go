package checker

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// referenceDir holds histories with verdicts published by Knossos and
// Jepsen; it lives beside the repository, not in it.
const referenceDir = "../../shared/reference-histories"

// referenceInitial is the initial state Knossos checks each model from.
func referenceInitial(model string) any {
	switch model {
	case ModelCASRegister:
		return int64(0)
	case ModelMultiRegister:
		return map[history.Keyword]any{"x": int64(0), "y": int64(0)}
	}
	return nil
}

// TestReferenceHistories asserts the verdict the publishing project gives
// each history of the reference corpus.
func TestReferenceHistories(t *testing.T) {
	f, err := os.Open(filepath.Join(referenceDir, "EXPECTED.tsv"))
	if os.IsNotExist(err) {
		t.Skipf("no reference histories at %s", referenceDir)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	n := 0
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 3 {
			continue
		}
		path, model, expected := cols[0], cols[1], cols[2]
		n++
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			ops, err := history.ReadFile(filepath.Join(referenceDir, path))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			rs, err := Check(context.Background(), ops, Options{Model: model, Initial: referenceInitial(model), Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]Validity{"valid": Valid, "invalid": Invalid}[expected]
			if rs.Valid != want {
				t.Errorf("valid? %v, want %v (%s)\n%s", rs.Valid, want, expected, rs.AppendEDN(nil))
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Logf("slow: %v", d)
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("EXPECTED.tsv lists no histories")
	}
}
