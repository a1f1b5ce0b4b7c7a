package checker

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
)

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []history.Op
		want string // "" for an error
	}{
		{"lock-counter", build(sec(0, 10, 40, 0, history.Ok, 0), finalRead(200, 1)), ModelLockCounter},
		{"lock-counter cut short", build(sec(0, 10, 40, 0, history.Ok, 0)), ModelLockCounter},
		{"lock-counter with pauses", build(sec(0, 10, 40, 0, history.Ok, 0), pause(0, 20, 30)), ModelLockCounter},
		{"lock-counter with extends", append(build(sec(0, 10, 40, 0, history.Ok, 0)), inv(0, "extend", nil)), ModelLockCounter},
		{"cas-register", h(inv(0, "cas", pair(int64(1), int64(2))), inv(1, "read", nil)), ModelCASRegister},
		{"multi-register", h(inv(0, "txn", txn(r("x", nil)))), ModelMultiRegister},
		{"mutex", h(inv(0, "acquire", nil), inv(1, "release", nil)), ModelMutex},
		{"counter", h(inv(0, "add", int64(1)), inv(1, "read", nil)), ModelCounter},
		{"register", h(inv(0, "write", int64(1)), inv(1, "read", nil)), ModelRegister},
		{"register, nemesis aside", h(info(history.Nemesis, "start", nil), inv(1, "read", nil)), ModelRegister},
		{"unknown ops", h(inv(0, "enqueue", int64(1))), ""},
		{"mixed", h(inv(0, "cas", nil), inv(1, "add", int64(1))), ""},
		{"empty", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.ops)
			if tc.want == "" {
				if !errors.Is(err, ErrUnknownModel) {
					t.Errorf("Detect = %q, %v; want an error wrapping ErrUnknownModel", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Detect = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestCheckOptions(t *testing.T) {
	ops := h(inv(0, "write", int64(1)), ok(0, "write", int64(1)))
	for _, tc := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"register from anything", Options{Model: ModelRegister, Initial: "x"}, true},
		{"unknown model", Options{Model: "queue"}, false},
		{"counter from a string", Options{Model: ModelCounter, Initial: "x"}, false},
		{"lock-counter from an integer", Options{Model: ModelLockCounter, Initial: int64(5)}, true},
		{"multi-register from a vector", Options{Model: ModelMultiRegister, Initial: []any{int64(0)}}, false},
		{"multi-register from a map", Options{Model: ModelMultiRegister, Initial: map[any]any{history.Keyword("x"): int64(0)}}, true},
		{"mutex with an initial value", Options{Model: ModelMutex, Initial: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(context.Background(), ops, tc.opts)
			if (err == nil) != tc.ok {
				t.Errorf("err = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestCheckHistoryRules covers what makes a verdict uncertain whatever the
// model says: a history cut short, and one that breaks the rules of a
// history.
func TestCheckHistoryRules(t *testing.T) {
	valid := h(inv(0, "write", int64(1)), ok(0, "write", int64(1)), inv(1, "read", nil), ok(1, "read", int64(1)))
	invalid := h(inv(0, "write", int64(1)), ok(0, "write", int64(1)), inv(1, "read", nil), ok(1, "read", int64(2)))
	for _, tc := range []struct {
		name      string
		ops       []history.Op
		truncated bool
		valid     Validity
		explain   string
	}{
		{"valid", valid, false, Valid, ""},
		{"truncated valid is unknown", valid, true, Unknown, "cut short after 4 ops"},
		{"truncated invalid stays invalid", invalid, true, Invalid, "cut short"},
		{"completion without invocation", h(ok(0, "read", int64(0))), false, Unknown, "op 0: process 0 completed :read that it never invoked"},
		{"double invocation", h(inv(0, "write", int64(1)), inv(0, "write", int64(2)), ok(0, "write", int64(2))), false, Unknown,
			"op 1: process 0 invoked :write while its op 0 was still open"},
		{"mismatched completion", h(inv(0, "write", int64(1)), ok(0, "read", int64(1))), false, Unknown, "completed :read, but invoked :write"},
		{"invocation after :info", h(inv(0, "write", int64(1)), info(0, "write", int64(1)), inv(0, "write", int64(2))), false, Unknown,
			"a crashed process must not invoke again"},
		{"lone :info is Knossos's", h(info(0, "write", int64(1))), false, Valid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := Check(context.Background(), tc.ops, Options{Model: ModelRegister, Truncated: tc.truncated})
			if err != nil {
				t.Fatal(err)
			}
			if rs.Valid != tc.valid {
				t.Errorf("valid? %v, want %v\n%s", rs.Valid, tc.valid, rs.AppendEDN(nil))
			}
			hr, _ := rs.Check("history")
			if !strings.Contains(hr.Explanation, tc.explain) {
				t.Errorf("history explanation %q lacks %q", hr.Explanation, tc.explain)
			}
		})
	}
}

// TestCheckMalformedOps checks that ops of the wrong shape for the model
// give :unknown with the op named, never a panic or a wrong verdict.
func TestCheckMalformedOps(t *testing.T) {
	appendX := []any{history.Keyword("append"), history.Keyword("x"), int64(1)}
	for _, tc := range []struct {
		name    string
		model   string
		ops     []history.Op
		explain string
	}{
		{"cas not a pair", ModelCASRegister, h(inv(0, "cas", int64(1)), ok(0, "cas", int64(1))), "op 0: :cas value 1 is not [old new]"},
		{"cas on a register", ModelRegister, h(inv(0, "cas", pair(int64(1), int64(2))), ok(0, "cas", pair(int64(1), int64(2)))), "the register model has no :cas"},
		{"txn not a list", ModelMultiRegister, h(inv(0, "txn", int64(1)), ok(0, "txn", int64(1))), "is not a list"},
		{"txn micro-op", ModelMultiRegister, h(inv(0, "txn", txn(appendX)), ok(0, "txn", txn(appendX))), "neither a :read nor a :write"},
		{"counter add", ModelCounter, h(inv(0, "add", "x"), ok(0, "add", "x")), "not a non-negative integer"},
		{"lock-counter write", ModelLockCounter, build([]history.Op{
			{Time: 1, Type: history.Invoke, Process: 0, F: history.FWrite, Value: "x"},
			{Time: 2, Type: history.Ok, Process: 0, F: history.FWrite, Value: "x"}}), "not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := Check(context.Background(), tc.ops, Options{Model: tc.model})
			if err != nil {
				t.Fatal(err)
			}
			var expl []string
			for _, r := range rs.Checks {
				expl = append(expl, r.Explanation)
			}
			got := strings.Join(expl, "\n")
			if rs.Valid == Valid || !strings.Contains(got, tc.explain) || strings.Contains(got, "panicked") {
				t.Errorf("valid? %v, explanation %q; want not valid, with %q", rs.Valid, got, tc.explain)
			}
		})
	}
}

// TestVerdictZeroValue: a verdict nobody reached is unknown, never valid;
// verdicts merge by rank, as Jepsen's merge-valid.
func TestVerdictZeroValue(t *testing.T) {
	var zero Validity
	if zero != Unknown || (Results{}).Valid != Unknown || (Result{}).Valid != Unknown {
		t.Fatalf("zero values: Validity %v, Results %v, Result %v; want :unknown", zero, (Results{}).Valid, (Result{}).Valid)
	}
	if code := (Results{}).Valid.ExitCode(); code != 2 {
		t.Errorf("an empty Results exits %d, want 2", code)
	}
	for _, tc := range []struct{ a, b, want Validity }{
		{Valid, Valid, Valid},
		{Valid, Unknown, Unknown},
		{Unknown, Valid, Unknown},
		{Valid, Invalid, Invalid},
		{Invalid, Unknown, Invalid},
		{Unknown, Invalid, Invalid},
	} {
		if got := Merge(tc.a, tc.b); got != tc.want {
			t.Errorf("Merge(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	var rs Results
	rs.Add(Result{Name: "a", Valid: Valid})
	if rs.Valid != Valid {
		t.Errorf("one valid check: %v", rs.Valid)
	}
	rs.Add(Result{Name: "b"}) // a check that judged nothing
	if rs.Valid != Unknown {
		t.Errorf("a valid check and an unjudged one: %v, want :unknown", rs.Valid)
	}
}

// TestDuplicateIndexes: the count and first duplicates of :index agree with
// a count of every pair, on small random histories of renamed ops (past
// the end, Unset and negative indexes among them); and a journal's are
// told by the file's positions, not those of the ops sorted by time.
func TestDuplicateIndexes(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for range 2000 {
		n := 1 + r.Intn(12)
		named := map[int]int64{}
		for i := range n {
			if r.Intn(3) == 0 {
				named[i] = int64(r.Intn(n+3)) - 2 // -2 .. n: negative, Unset, past the end
			}
		}
		index := func(i int) int64 {
			if id, ok := named[i]; ok {
				return id
			}
			return int64(i)
		}
		want := 0
		for i := range n {
			for j := range i {
				if index(i) >= 0 && index(i) == index(j) {
					want++
					break
				}
			}
		}
		got, first := duplicateIndexes(n, named)
		if got != want || len(first) != min(want, evidenceLimit) {
			t.Fatalf("%d ops, named %v: %d duplicates (%v), want %d", n, named, got, first, want)
		}
	}
	journal := `{:time 5, :index 0, :type :invoke, :process 0, :f :read}
{:time 1, :index 1, :type :invoke, :process 1, :f :write, :value 1}
{:time 2, :index 1, :type :ok, :process 1, :f :write, :value 1}
{:time 6, :index 3, :type :ok, :process 0, :f :read, :value 1}
`
	ops, err := history.ReadAll(strings.NewReader(journal), "journal.edn")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Check(context.Background(), ops, Options{Model: ModelLockCounter})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := rs.Check("history")
	if got := fmt.Sprint(h.Get("first-duplicates")); got != "[op 1, the 3rd op map, as the 2nd]" {
		t.Errorf("first duplicates %s, want the file's 3rd op map as its 2nd", got)
	}
}
