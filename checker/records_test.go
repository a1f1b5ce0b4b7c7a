package checker

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"
	"testing/iotest"

	"pgregory.net/rapid"
)

// TestRecordsRoundTrip: any run of records, the extremes of int64 among
// them, comes back word for word from its encoding, read a byte at a time
// through the smallest buffer; a run cut inside a record is an error, never
// a shorter run.
func TestRecordsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		words := rapid.IntRange(1, 14).Draw(t, "words")
		word := rapid.OneOf(rapid.Int64(), rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, 0, -1, 1, math.MinInt64 + 1}))
		run := rapid.SliceOf(rapid.SliceOfN(word, words, words)).Draw(t, "run")
		enc := newRecordEncoder(words)
		var b []byte
		ends := []int{0}
		for _, rec := range run {
			copy(enc.cur, rec)
			b = enc.append(b)
			ends = append(ends, len(b))
		}
		dec := newRecordDecoder(iotest.OneByteReader(bytes.NewReader(b)), words, 0)
		w := make([]int64, words)
		for i, want := range run {
			if ok, err := dec.next(w); !ok || err != nil {
				t.Fatalf("record %d of %d: %v, %v", i, len(run), ok, err)
			}
			if !slices.Equal(w, want) {
				t.Fatalf("record %d: %d, want %d", i, w, want)
			}
		}
		if ok, err := dec.next(w); ok || err != nil {
			t.Fatalf("after the run: %v, %v; want its end", ok, err)
		}
		if len(b) == 0 {
			return
		}
		cut := rapid.IntRange(0, len(b)-1).Draw(t, "cut")
		dec = newRecordDecoder(bytes.NewReader(b[:cut]), words, runBuffer)
		var err error
		for ok := true; ok && err == nil; {
			ok, err = dec.next(w)
		}
		if inside := !slices.Contains(ends, cut); inside != errors.Is(err, errShortRun) {
			t.Fatalf("a run cut at byte %d of %d (inside a record: %v) read to its end with %v", cut, len(b), inside, err)
		}
	})
}
