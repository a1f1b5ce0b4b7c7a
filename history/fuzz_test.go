package history

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
)

// FuzzReader feeds the Reader arbitrary bytes. Whatever it reads must not
// panic, must decode alike on both paths and whether the input comes at once
// or a byte at a time, must re-encode with AppendOp, and must read back as
// the same ops.
func FuzzReader(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.edn"))
	if refs, err := referenceList(); err == nil {
		for _, p := range refs {
			if fi, err := os.Stat(filepath.Join(refDir, p)); err == nil && fi.Size() < 4096 {
				seeds = append(seeds, filepath.Join(refDir, p))
			}
		}
	}
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "[", "{", "{:type :ok, :process 0, :f :r, :value [1 2}", "(", "#{", `"`, `\`, "#_",
		"{:type :ok, :process :x, :f :r, :value #inst \"2020-01-01T00:00:00Z\"}",
		"{:type :ok, :process 0, :f :r, :value 99999999999999999999999N}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ferr := readWith(string(data), false)
		slow, serr := readWith(string(data), true)
		if (ferr == nil) != (serr == nil) || ferr != nil && ferr.Error() != serr.Error() {
			t.Fatalf("paths disagree:\nfast:    %v\nlibrary: %v", ferr, serr)
		}
		var se *SyntaxError
		if ferr != nil && !errors.As(ferr, &se) {
			t.Fatalf("error %v is not a *SyntaxError", ferr)
		}
		// One byte a read puts a buffer refill at every place in the input.
		chunked, cerr := ReadAll(iotest.OneByteReader(bytes.NewReader(data)), "h.edn")
		if (cerr == nil) != (ferr == nil) || cerr != nil && cerr.Error() != ferr.Error() || len(chunked) != len(fast) {
			t.Fatalf("read in one-byte chunks: %d ops, %v; at once: %d ops, %v", len(chunked), cerr, len(fast), ferr)
		}
		if len(fast) != len(slow) {
			t.Fatalf("fast path read %d ops, library path %d", len(fast), len(slow))
		}
		var buf []byte
		for i := range fast {
			if !equalOp(fast[i], chunked[i]) {
				t.Fatalf("op %d read in one-byte chunks: %s, at once: %s", i, AppendOp(nil, chunked[i]), AppendOp(nil, fast[i]))
			}
			if !equalOp(fast[i], slow[i]) {
				t.Fatalf("op %d: paths disagree:\nfast:    %s\nlibrary: %s", i, AppendOp(nil, fast[i]), AppendOp(nil, slow[i]))
			}
			buf = AppendOp(buf, fast[i])
			buf = append(buf, '\n')
		}
		again, err := readWith(string(buf), false)
		if err != nil {
			t.Fatalf("re-encoded ops do not read back: %v\n%s", err, buf)
		}
		for i := range again {
			if !equalOp(again[i], fast[i]) {
				t.Fatalf("op %d does not round-trip:\nread    %s\nreread  %s", i, AppendOp(nil, fast[i]), AppendOp(nil, again[i]))
			}
		}
		Pairs(fast)
	})
}
