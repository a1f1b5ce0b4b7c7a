package checker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpen: a lock-counter history in a file is streamed unless asked for
// whole, and checks the same either way; a journal's ops out of time order
// are read again and sorted; bad input is an InputError naming what is
// wrong. Options.ReadWhole is called before every whole read that follows
// a Stream, and only then.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	edge, err := os.ReadFile(filepath.Join("testdata", "edge", "fenceorder.edn"))
	if err != nil {
		t.Fatal(err)
	}
	lc := write("lc.edn", string(edge))
	ctx := context.Background()
	wholeReads := 0
	counted := Options{ReadWhole: func() { wholeReads++ }}
	var verdicts []string
	for _, whole := range []bool{false, true} {
		h, err := Open(ctx, lc, counted, whole, nil)
		if err != nil {
			t.Fatal(err)
		}
		if (h.Stream == nil) != whole || h.Model != ModelLockCounter || !h.Detected || h.N == 0 {
			t.Errorf("whole %v: stream %v, model %s, detected %v, %d ops", whole, h.Stream != nil, h.Model, h.Detected, h.N)
		}
		rs, err := h.Check(ctx, counted)
		if err != nil {
			t.Fatal(err)
		}
		verdicts = append(verdicts, string(rs.AppendEDN(nil)))
	}
	if wholeReads != 0 {
		t.Errorf("ReadWhole called %d times for a streamed history and one asked for whole", wholeReads)
	}
	if _, err := Open(ctx, lc, Options{Analyzer: AnalyzerPorcupine, ReadWhole: counted.ReadWhole}, false, nil); err != nil || wholeReads != 1 {
		t.Errorf("porcupine: %v, ReadWhole called %d times, want once", err, wholeReads)
	}
	if verdicts[0] != verdicts[1] {
		t.Errorf("streamed and whole checks differ:\n%s\n%s", verdicts[0], verdicts[1])
	}

	// The same ops, the last two swapped: out of time order.
	lines := strings.Split(strings.TrimSpace(string(edge)), "\n")
	n := len(lines)
	lines[n-1], lines[n-2] = lines[n-2], lines[n-1]
	h, err := Open(ctx, write("journal.edn", strings.Join(lines, "\n")+"\n"), Options{}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := h.Check(ctx, counted); err != nil || h.Stream != nil || len(rs.Checks) == 0 || wholeReads != 2 {
		t.Errorf("journal: %v, streamed %v, %d checks, ReadWhole called %d times in all; want it read again whole and checked, ReadWhole called first",
			err, h.Stream != nil, len(rs.Checks), wholeReads)
	}

	for _, tc := range []struct {
		name, text string
		opts       Options
		want       string
	}{
		{"malformed", "{:type :invoke, :process 0\n", Options{}, "malformed.edn"},
		{"model", string(edge), Options{Model: "nope"}, "--model"},
		{"initial", string(edge), Options{Initial: "x"}, "--initial"},
		{"missing", "", Options{}, "no such file"},
	} {
		path := filepath.Join(dir, tc.name+".edn")
		if tc.name != "missing" {
			path = write(tc.name+".edn", tc.text)
		}
		_, err := Open(ctx, path, tc.opts, false, nil)
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an InputError naming %q", tc.name, err, tc.want)
		}
	}
}
