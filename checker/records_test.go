package checker

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"slices"
	"strings"
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

// TestSortedListLostRecords: a list on disk whose file lost the end of a
// run, cut at a record's boundary, makes the check that reads it unknown,
// never reads as a shorter list (which could make a verdict valid).
func TestSortedListLostRecords(t *testing.T) {
	ints := codec[int64]{words: 1, put: func(w []int64, x int64) { w[0] = x }, get: func(w []int64) int64 { return w[0] }}
	for _, tc := range []struct {
		name string
		cut  func(runs []int64) int64 // the file's new size; -1 to keep it
		want int                      // records read whole, when not lost
	}{
		{"whole", func([]int64) int64 { return -1 }, 10},
		{"the last run lost", func(runs []int64) int64 { return runs[2] }, -1},
		{"a middle run lost", func(runs []int64) int64 { return runs[1] }, -1},
		{"all lost", func([]int64) int64 { return 0 }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newSortedList(ints, func(a, b int64) int { return cmp.Compare(a, b) }, true, 4)
			defer l.close()
			for i := range 10 {
				l.add(int64(9 - i))
			}
			if err := l.done(); err != nil || l.file == nil || len(l.runs) != 4 {
				t.Fatalf("done: %v, on disk %v, runs %v; want three runs on disk", err, l.file != nil, l.runs)
			}
			if n := tc.cut(l.runs); n >= 0 {
				if err := l.file.Truncate(n); err != nil {
					t.Fatal(err)
				}
			}
			// Read as a check reads it: a spill panic is the check's
			// unknown result, which says why.
			var got []int64
			var r Result
			func() {
				defer recovered("list", &r)
				it := l.iter()
				for x, ok := it.next(); ok; x, ok = it.next() {
					got = append(got, x)
				}
			}()
			switch lost := strings.HasPrefix(r.Explanation, "counter records on disk: "); {
			case tc.want < 0 && (!lost || r.Valid != Unknown):
				t.Fatalf("read %d records of 10: %v; want the check unknown, its records on disk lost", len(got), r)
			case tc.want >= 0 && (r.Explanation != "" || len(got) != tc.want || !slices.IsSorted(got)):
				t.Fatalf("read %v, %v; want %d records in order", got, r, tc.want)
			}
		})
	}
}
