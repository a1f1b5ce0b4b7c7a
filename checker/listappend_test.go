package checker

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// listSec writes one list-append section as EDN lines: acquire at t, a
// read of key k giving read, the append of e ending as typ (ok, fail,
// info), the release; each op 1 ms after the one before.
func listSec(p int, t int64, k int64, read string, e int64, typ string) string {
	var b strings.Builder
	line := func(dt int64, ty, f, rest string) {
		fmt.Fprintf(&b, "{:type :%s, :f :%s, :process %d, :time %d%s}\n", ty, f, p, (t+dt)*1e6, rest)
	}
	line(0, "invoke", "acquire", "")
	line(1, "ok", "acquire", "")
	line(2, "invoke", "read", "")
	line(3, "ok", "read", fmt.Sprintf(", :value [:r %d %s]", k, read))
	app := fmt.Sprintf(", :value [:append %d %d]", k, e)
	line(4, "invoke", "append", app)
	line(5, typ, "append", app)
	if typ != "info" {
		line(6, "invoke", "release", "")
		line(7, "ok", "release", "")
	}
	return b.String()
}

func listFinal(t int64, lists string) string {
	return fmt.Sprintf("{:type :invoke, :f :read, :process 9, :time %d, :final? true}\n{:type :ok, :f :read, :process 9, :time %d, :final? true, :value %s}\n", t*1e6, (t+1)*1e6, lists)
}

func TestListAppend(t *testing.T) {
	// The first lost element's :overwritten-by, by case.
	overwriters := map[string]int64{"a lost update: both read the same list": 13, "a delayed write lands last": 5}
	for _, tc := range []struct {
		name    string
		history string
		valid   Validity
		words   []string // in the explanation
		figures map[string]int64
	}{
		{"serial appends, rotated keys",
			listSec(0, 0, 0, "[]", 1, "ok") + listSec(1, 10, 0, "[1]", 2, "ok") + listSec(0, 20, 1, "[]", 3, "ok") +
				listFinal(40, "[[:r 0 [1 2]] [:r 1 [3]]]"),
			Valid, nil, map[string]int64{"writes": 3, "keys": 2, "final": 3, "lost-min": 0, "overlapping-sections": 0}},
		{"a lost update: both read the same list",
			listSec(0, 0, 0, "[]", 1, "ok") + listSec(1, 3, 0, "[]", 2, "ok") + listFinal(40, "[[:r 0 [2]]]"),
			Invalid, []string{"1 appends that took effect are missing", "element 1 of key 0, appended by op 5 (process 0): op 13 (process 1) read the same list, appended 2 and landed after it"},
			map[string]int64{"lost-min": 1, "overlapping-sections": 2}},
		{"a stale writer drops what came after its read",
			listSec(0, 0, 0, "[]", 1, "ok") + listSec(1, 10, 0, "[1]", 2, "ok") + listSec(2, 20, 0, "[1 2]", 3, "ok") +
				listSec(1, 30, 0, "[1]", 4, "ok") + listFinal(40, "[[:r 0 [1 4]]]"),
			Invalid, []string{"2 appends that took effect are missing", "element 2 of key 0, appended by op 13 (process 1): op 29 (process 1) read the same list, appended 4",
				"1 section reads are not a prefix", "op 19 (process 2) read 2 elements of key 0, and its element 1 is 2 where the final list has 4"},
			map[string]int64{"lost-min": 2, "bad-read-count": 1}},
		{"a delayed write lands last",
			listSec(0, 0, 0, "[]", 1, "ok") + listSec(1, 10, 0, "[1]", 2, "ok") + listFinal(40, "[[:r 0 [1]]]"),
			Invalid, []string{"element 2 of key 0, appended by op 13 (process 1): op 5 (process 0) wrote key 0's list without it, appending 1 to a list of 0 it had read"},
			map[string]int64{"lost-min": 1, "bad-read-count": 0}},
		{"an append of unknown outcome may be there or not",
			listSec(0, 0, 0, "[]", 1, "info") + listSec(1, 10, 0, "[1]", 2, "ok") + listSec(2, 20, 0, "[1 2]", 3, "info") +
				listFinal(40, "[[:r 0 [1 2]]]"),
			Valid, nil, map[string]int64{"info-writes": 2, "info-appends-landed": 1}},
		{"a retry applied twice",
			listSec(0, 0, 0, "[]", 1, "info") + listSec(1, 10, 0, "[1]", 1, "ok") + listFinal(40, "[[:r 0 [1 1]]]"),
			Invalid, []string{"1 elements appear more than once", "1 is 2 times in the final lists, appended by op 5 (process 0, outcome unknown) and op 11 (process 1, ok)"},
			map[string]int64{"duplicated-count": 1}},
		{"a failed append is there",
			listSec(0, 0, 0, "[]", 1, "fail") + listFinal(40, "[[:r 0 [1]]]"),
			Invalid, []string{"1 failed appends are in a final list", "op 5 (process 0) failed, but a final list holds its element 1"},
			map[string]int64{"failed-visible-count": 1}},
		{"an element nobody appended",
			listSec(0, 0, 0, "[]", 1, "ok") + listFinal(40, "[[:r 0 [1 7]]]"),
			Invalid, []string{"key 0's final list holds 7, which no append wrote"}, map[string]int64{"unknown-element-count": 1}},
		{"an acknowledged append to a key the final read lacks",
			listSec(0, 0, 3, "[]", 1, "ok") + listFinal(40, "[]"),
			Invalid, []string{"element 1 of key 3", "key 3's final list has no write to blame"}, map[string]int64{"lost-min": 1}},
		{"no final read",
			listSec(0, 0, 0, "[]", 1, "ok"), Unknown, []string{"no final read of the lists"}, nil},
		{"an unreadable append",
			strings.Replace(listSec(0, 0, 0, "[]", 1, "ok"), "[:append 0 1]", "[:append 0 \"x\"]", 2) + listFinal(40, "[[:r 0 []]]"),
			Unknown, []string{"1 ops cannot be read as list-append ops", "op 4 (process 0, :append) has :value [:append 0 \"x\"]"}, nil},
		{"an unreadable final read",
			listSec(0, 0, 0, "[]", 1, "ok") + listFinal(40, "{0 [1]}"),
			Unknown, []string{"the final read, op 9, has :value {0 [1]}"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := history.ReadAll(strings.NewReader(tc.history), tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if m, err := Detect(ops); err != nil || m != ModelListAppend {
				t.Fatalf("Detect = %q, %v; want %s", m, err, ModelListAppend)
			}
			rs, err := Check(context.Background(), ops, Options{})
			if err != nil {
				t.Fatal(err)
			}
			r, ok := rs.Check(ModelListAppend)
			if !ok {
				t.Fatalf("no %s result in %+v", ModelListAppend, rs)
			}
			if r.Valid != tc.valid {
				t.Errorf("valid = %v, want %v: %s", r.Valid, tc.valid, r.Explanation)
			}
			for _, w := range tc.words {
				if !strings.Contains(r.Explanation, w) {
					t.Errorf("explanation %q lacks %q", r.Explanation, w)
				}
			}
			if want, ok := overwriters[tc.name]; ok {
				lost, _ := r.Get("lost").([]any)
				if len(lost) == 0 || lost[0].(map[history.Keyword]any)["overwritten-by"] != want {
					t.Errorf("lost = %v, want the first overwritten by op %d", lost, want)
				}
			}
			for k, want := range tc.figures {
				if got := r.Get(k); got != want {
					t.Errorf("%s = %v, want %d", k, got, want)
				}
			}
		})
	}
}

// TestListAppendCases checks the histories of testdata/listappend, each a
// way a first version of the check went wrong (a review found them): an
// anomaly it called valid, evidence that named the wrong op, or figures
// that said 0 where nothing was counted. Every file there has a case.
func TestListAppendCases(t *testing.T) {
	cases := map[string]struct {
		valid   Validity
		words   []string
		figures map[string]any
	}{
		"A-phantom-other-key":         {Invalid, []string{"5 is 2 times in the final lists"}, nil},
		"B2-failed-elem-in-other-key": {Invalid, []string{"op 5 (process 0) failed, but a final list holds its element 5", "key 1's final list holds 5, which no append wrote to it"}, nil},
		"C-two-finals-first-lost":     {Unknown, []string{"op 19 is a second final read (the first is op 17)"}, map[string]any{"final": nil, "lost-min": nil}},
		"D1-stale-read-both-present": {Invalid, []string{"op 11 (process 1) read 0 elements of key 0, but op 5 (process 0) had appended 1",
			"2 is element 1 of key 0's final list, after 1 others, but its append, op 13 (process 1), read 0"}, nil},
		"D2-stale-read-write-failed": {Invalid, []string{"op 11 (process 1) read 0 elements of key 0, but op 5 (process 0) had appended 1"}, nil},
		"E-overwriter": {Invalid, []string{"element 1 of key 0, appended by op 17 (process 0): op 21 (process 2) wrote key 0's list without it"},
			map[string]any{"lost-min": int64(1)}},
		"K-info-renumber-resolved-ok": {Valid, nil, map[string]any{"lost-min": int64(0)}},
		"K2-resolved-ok-missing":      {Invalid, []string{"element 1 of key 0, appended by op 5 (process 0): op 13 (process 3) read the same list"}, nil},
		"Q2-final-dup-key":            {Unknown, []string{"with each key once"}, nil},
		"R-info-seen-then-lost": {Invalid, []string{"element 1 of key 0, appended by op 5 (process 0) with an unknown outcome, which op 11 read"},
			map[string]any{"lost-min": int64(2), "lost-max": int64(2), "proven-writes": int64(2)}},
		"U-unreadable-append-figures": {Unknown, []string{`has :value [:append 0 "x"]`}, map[string]any{"final": nil, "lost-min": nil}},
		"lazy-first":                  {Unknown, []string{"op 3 (process 0, :read) has :value 5"}, nil},
		// A second review's.
		"F1-retry-reread-misplaced":     {Valid, nil, map[string]any{"info-appends-landed": int64(0), "misplaced-count": int64(0)}},
		"G1-failed-appends-doubled":     {Valid, nil, map[string]any{"failed-appends": int64(1)}},
		"M1-read-then-older-read":       {Invalid, []string{"op 17 (process 2) read 0 elements of key 0, but op 9 (process 1) had read 1 elements, before it began"}, nil},
		"M2-read-from-future":           {Invalid, []string{"op 3 (process 0) read 1 before op 12 (process 1) was sent to append it"}, nil},
		"M3-old-key-after-next-key-ack": {Invalid, []string{"op 25 (process 0) read key 0, but op 19 (process 2) had appended 3, element 0 of the final list of key 1, before it began"}, nil},
		"T1-tie":                        {Valid, nil, nil},
		// A client that sends an element again after the guard refused it.
		"F2-retry-after-refusal": {Valid, nil, map[string]any{"failed-visible-count": int64(0)}},
	}
	files, err := filepath.Glob("testdata/listappend/*.edn")
	if err != nil || len(files) != len(cases) {
		t.Fatalf("%d files in testdata/listappend (%v), %d cases: each file wants a case", len(files), err, len(cases))
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".edn")
		t.Run(name, func(t *testing.T) {
			tc, ok := cases[name]
			if !ok {
				t.Fatalf("no case for %s", path)
			}
			h, err := Open(context.Background(), path, Options{}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := h.Check(context.Background(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			r, _ := rs.Check(ModelListAppend)
			if r.Valid != tc.valid {
				t.Errorf("valid = %v, want %v: %s", r.Valid, tc.valid, r.Explanation)
			}
			for _, w := range tc.words {
				if !strings.Contains(r.Explanation, w) {
					t.Errorf("explanation %q lacks %q", r.Explanation, w)
				}
			}
			for k, want := range tc.figures {
				if got := r.Get(k); got != want {
					t.Errorf("%s = %v, want %v", k, got, want)
				}
			}
		})
	}
}

// TestListAppendGenerated: on generated list-append histories (internal/gen,
// whose lost updates each lose the other writer's element) the check finds
// exactly the lost appends injected and nothing else: with none, valid.
func TestListAppendGenerated(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		cfg := gen.Config{Sections: 300, Workers: 2 + int(seed%5), Lost: int(seed % 4), Info: int(seed % 7), Seed: seed, Lists: true, PerKey: 1 + int(seed%9)}
		ops, _, err := gen.Ops(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := Check(context.Background(), ops, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := rs.Check(ModelListAppend)
		want := Valid
		if cfg.Lost > 0 {
			want = Invalid
		}
		if r.Valid != want || r.Get("lost-min") != int64(cfg.Lost) {
			t.Errorf("%+v: valid %v, lost-min %v; want %v, %d: %s", cfg, r.Valid, r.Get("lost-min"), want, cfg.Lost, r.Explanation)
		}
		for _, k := range []string{"duplicated-count", "bad-read-count", "stale-read-count", "misplaced-count", "failed-visible-count", "unknown-element-count"} {
			if r.Get(k) != int64(0) && !(cfg.Lost > 0 && (k == "bad-read-count" || k == "stale-read-count")) {
				t.Errorf("%+v: %s = %v, want 0: %s", cfg, k, r.Get(k), r.Explanation)
			}
		}
	}
}
