package checker

import (
	"context"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
)

// h builds a history from ops written as Knossos writes them, in order:
// each op is (type, process, f, value); indexes are positions.
func h(ops ...history.Op) []history.Op {
	for i := range ops {
		ops[i].Index, ops[i].Time = int64(i), history.Unset
	}
	return ops
}

func inv(p history.Process, f history.Keyword, v any) history.Op {
	return history.Op{Type: history.Invoke, Process: p, F: f, Value: v}
}
func ok(p history.Process, f history.Keyword, v any) history.Op {
	return history.Op{Type: history.Ok, Process: p, F: f, Value: v}
}
func fail(p history.Process, f history.Keyword, v any) history.Op {
	return history.Op{Type: history.Fail, Process: p, F: f, Value: v}
}
func info(p history.Process, f history.Keyword, v any) history.Op {
	return history.Op{Type: history.Info, Process: p, F: f, Value: v}
}

func pair(a, b any) []any { return []any{a, b} }

func txn(ms ...[]any) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

func r(k string, v any) []any { return []any{history.Keyword("read"), history.Keyword(k), v} }
func w(k string, v any) []any { return []any{history.Keyword("write"), history.Keyword(k), v} }

func TestModels(t *testing.T) {
	xy0 := map[history.Keyword]any{"x": int64(0), "y": int64(0)}
	for _, tc := range []struct {
		name    string
		model   string
		initial any
		ops     []history.Op
		valid   Validity
		explain string // a phrase the explanation must hold
		parts   int    // partitions, when not 0
	}{
		{name: "register: read what was written", model: ModelRegister, ops: h(
			inv(0, "write", int64(1)), ok(0, "write", int64(1)),
			inv(1, "read", nil), ok(1, "read", int64(1))), valid: Valid},
		{name: "register: stale read", model: ModelRegister, ops: h(
			inv(0, "write", int64(1)), ok(0, "write", int64(1)),
			inv(0, "write", int64(2)), ok(0, "write", int64(2)),
			inv(1, "read", nil), ok(1, "read", int64(1))), valid: Invalid, explain: "op 5 (process 1: read 1"},
		{name: "register: concurrent read may see either", model: ModelRegister, ops: h(
			inv(0, "write", int64(1)), ok(0, "write", int64(1)),
			inv(0, "write", int64(2)), inv(1, "read", nil), ok(1, "read", int64(1)), ok(0, "write", int64(2))), valid: Valid},
		{name: "register: nil read is unknown", model: ModelRegister, initial: int64(0), ops: h(
			inv(1, "read", nil), ok(1, "read", nil)), valid: Valid},
		{name: "register: initial nil, a read of 0 is wrong", model: ModelRegister, ops: h(
			inv(1, "read", nil), ok(1, "read", int64(0))), valid: Invalid},
		{name: "register: values compare as EDN", model: ModelRegister, ops: h(
			inv(0, "write", []any{int64(1), history.Keyword("a")}), ok(0, "write", []any{int64(1), history.Keyword("a")}),
			inv(1, "read", nil), ok(1, "read", []any{int64(1), history.Keyword("a")})), valid: Valid},
		{name: "cas: succeeded", model: ModelCASRegister, initial: int64(0), ops: h(
			inv(0, "cas", pair(int64(0), int64(1))), ok(0, "cas", pair(int64(0), int64(1))),
			inv(1, "read", nil), ok(1, "read", int64(1))), valid: Valid},
		{name: "cas: from the wrong value", model: ModelCASRegister, initial: int64(0), ops: h(
			inv(0, "cas", pair(int64(3), int64(1))), ok(0, "cas", pair(int64(3), int64(1)))), valid: Invalid},
		{name: "cas: a failed op did not happen", model: ModelCASRegister, initial: int64(0), ops: h(
			inv(0, "cas", pair(int64(0), int64(9))), fail(0, "cas", pair(int64(0), int64(9))),
			inv(1, "read", nil), ok(1, "read", int64(9))), valid: Invalid},
		{name: "cas: an info op may have happened", model: ModelCASRegister, initial: int64(0), ops: h(
			inv(0, "cas", pair(int64(0), int64(6))), info(0, "cas", pair(int64(0), int64(6))),
			inv(1, "read", nil), ok(1, "read", int64(6))), valid: Valid},
		{name: "cas: an info op may not have happened", model: ModelCASRegister, initial: int64(0), ops: h(
			inv(0, "cas", pair(int64(0), int64(6))), info(0, "cas", pair(int64(0), int64(6))),
			inv(1, "read", nil), ok(1, "read", int64(0))), valid: Valid},
		{name: "cas: an info op that can never apply", model: ModelCASRegister, initial: int64(0), ops: h(
			inv(0, "cas", pair(int64(5), int64(6))), info(0, "cas", pair(int64(5), int64(6))),
			inv(1, "write", int64(2)), ok(1, "write", int64(2))), valid: Valid},
		{name: "cas: an invocation that never completed is info", model: ModelCASRegister, initial: int64(0), ops: h(
			inv(0, "write", int64(7)),
			inv(1, "read", nil), ok(1, "read", int64(7)),
			inv(2, "read", nil), ok(2, "read", int64(0))), valid: Invalid},
		{name: "cas: info ops take effect only after their invocation", model: ModelCASRegister, initial: int64(0), ops: h(
			inv(1, "read", nil), ok(1, "read", int64(7)),
			inv(0, "write", int64(7)), info(0, "write", int64(7))), valid: Invalid},
		{name: "cas: nemesis ops are not client ops", model: ModelCASRegister, initial: int64(0), ops: h(
			info(history.Nemesis, "start", nil),
			inv(1, "read", nil), ok(1, "read", int64(0)),
			info(history.Nemesis, "stop", nil)), valid: Valid},
		{name: "mutex: two holders", model: ModelMutex, ops: h(
			inv(0, "acquire", nil), ok(0, "acquire", nil),
			inv(1, "acquire", nil), ok(1, "acquire", nil)), valid: Invalid, explain: "leave it at held"},
		{name: "mutex: hand over", model: ModelMutex, ops: h(
			inv(0, "acquire", nil), ok(0, "acquire", nil),
			inv(0, "release", nil), ok(0, "release", nil),
			inv(1, "acquire", nil), ok(1, "acquire", nil)), valid: Valid},
		{name: "mutex: an info release may have freed it", model: ModelMutex, ops: h(
			inv(0, "acquire", nil), ok(0, "acquire", nil),
			inv(0, "release", nil), info(0, "release", nil),
			inv(1, "acquire", nil), ok(1, "acquire", nil)), valid: Valid},
		{name: "mutex: an info acquire need not have happened", model: ModelMutex, ops: h(
			inv(0, "acquire", nil), info(0, "acquire", nil),
			inv(1, "acquire", nil), ok(1, "acquire", nil),
			inv(1, "release", nil), ok(1, "release", nil)), valid: Valid},
		{name: "mutex: a failed release is dropped", model: ModelMutex, ops: h(
			inv(0, "release", nil), fail(0, "release", nil),
			inv(1, "acquire", nil), ok(1, "acquire", nil)), valid: Valid},
		{name: "multi-register: snapshot", model: ModelMultiRegister, initial: xy0, ops: h(
			inv(0, "txn", txn(w("x", int64(1)), w("y", int64(1)))), ok(0, "txn", txn(w("x", int64(1)), w("y", int64(1)))),
			inv(1, "txn", txn(r("x", nil), r("y", nil))), ok(1, "txn", txn(r("x", int64(1)), r("y", int64(1))))),
			valid: Valid, parts: 1},
		{name: "multi-register: torn read", model: ModelMultiRegister, initial: xy0, ops: h(
			inv(0, "txn", txn(w("x", int64(1)), w("y", int64(1)))), ok(0, "txn", txn(w("x", int64(1)), w("y", int64(1)))),
			inv(1, "txn", txn(r("x", nil), r("y", nil))), ok(1, "txn", txn(r("x", int64(1)), r("y", int64(0))))),
			valid: Invalid, explain: "[r :x 1, r :y 0]"},
		{name: "multi-register: independent keys are partitions", model: ModelMultiRegister, initial: xy0, ops: h(
			inv(0, "txn", txn(w("x", int64(1)))), ok(0, "txn", txn(w("x", int64(1)))),
			inv(1, "txn", txn(r("y", nil))), ok(1, "txn", txn(r("y", int64(0)))),
			inv(2, "txn", txn(r("x", nil))), ok(2, "txn", txn(r("x", int64(1))))),
			valid: Valid, parts: 2},
		{name: "multi-register: a missing key reads nil", model: ModelMultiRegister, initial: xy0, ops: h(
			inv(1, "txn", txn(r("z", nil))), ok(1, "txn", txn(r("z", int64(0))))),
			valid: Invalid},
		{name: "multi-register: info txn may have happened", model: ModelMultiRegister, initial: xy0, ops: h(
			inv(0, "txn", txn(w("x", int64(1)), w("y", int64(1)))), info(0, "txn", txn(w("x", int64(1)), w("y", int64(1)))),
			inv(1, "txn", txn(r("x", nil), r("y", nil))), ok(1, "txn", txn(r("x", int64(1)), r("y", int64(1)))),
			inv(2, "txn", txn(r("x", nil), r("y", nil))), ok(2, "txn", txn(r("x", int64(1)), r("y", int64(1))))),
			valid: Valid},
		{name: "counter: reads within bounds", model: ModelCounter, ops: h(
			inv(0, "add", int64(1)), ok(0, "add", int64(1)),
			inv(1, "add", int64(2)), inv(2, "read", nil), ok(2, "read", int64(3)), info(1, "add", int64(2)),
			inv(2, "read", nil), ok(2, "read", int64(1))), valid: Valid},
		{name: "counter: read below the acknowledged adds", model: ModelCounter, ops: h(
			inv(0, "add", int64(1)), ok(0, "add", int64(1)),
			inv(2, "read", nil), ok(2, "read", int64(0))), valid: Invalid, explain: "at least 1"},
		{name: "counter: read above the attempted adds", model: ModelCounter, initial: int64(10), ops: h(
			inv(0, "add", int64(1)), fail(0, "add", int64(1)),
			inv(2, "read", nil), ok(2, "read", int64(11))), valid: Invalid, explain: "at most 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := Check(context.Background(), tc.ops, Options{Model: tc.model, Initial: tc.initial})
			if err != nil {
				t.Fatal(err)
			}
			if rs.Valid != tc.valid {
				t.Errorf("valid? %v, want %v\n%s", rs.Valid, tc.valid, rs.AppendEDN(nil))
			}
			var expl []string
			for _, r := range rs.Checks {
				expl = append(expl, r.Explanation)
			}
			if got := strings.Join(expl, "\n"); !strings.Contains(got, tc.explain) {
				t.Errorf("explanation %q lacks %q", got, tc.explain)
			}
			if tc.parts > 0 {
				r, _ := rs.Check("linear")
				if got := r.Get("partitions"); got != tc.parts {
					t.Errorf("partitions = %v, want %d", got, tc.parts)
				}
			}
		})
	}
}

func TestCanon(t *testing.T) {
	for _, tc := range []struct {
		a, b  any
		equal bool
	}{
		{[]any{int64(1), int64(2)}, []any{int64(1), int64(2)}, true},
		{history.Set{int64(2), int64(1)}, history.Set{int64(1), int64(2)}, true},
		{map[any]any{history.Keyword("a"): int64(1), history.Keyword("b"): int64(2)},
			map[history.Keyword]any{"b": int64(2), "a": int64(1)}, true},
		{int64(1), 1.0, false},
		{nil, int64(0), false},
		{"a", history.Keyword("a"), false},
	} {
		if got := canon(tc.a) == canon(tc.b); got != tc.equal {
			t.Errorf("canon(%v) == canon(%v): %v (%s, %s), want %v", tc.a, tc.b, got, canon(tc.a), canon(tc.b), tc.equal)
		}
	}
}

// TestModelKinds: each model is judged somehow (its own check, streamed or
// not, or a porcupine problem), a streamed model with no check of its own
// is the lock-counter's (walked), the counter walk walks only a streamed
// model's operations, and each tells its histories apart from every other's on
// every non-empty set of :f values (Detect asks them in no order).
func TestModelKinds(t *testing.T) {
	fs := []history.Keyword{history.FAcquire, history.FRelease, history.FRead, history.FWrite, history.FAppend, history.FExtend, history.FRenew, "cas", "txn", "add", "foo"}
	for _, k := range modelKinds() {
		if k.check == nil && k.problem == nil && k.streamCheck == nil {
			t.Errorf("%s: neither a check nor a porcupine problem", k.name)
		}
		if k.stream && k.streamCheck == nil && !k.walk {
			t.Errorf("%s: streamed, with no check of its own, but not the counter walk's", k.name)
		}
		if k.check != nil && k.stream {
			t.Errorf("%s: streamed, yet with a check on the whole history", k.name)
		}
		if k.walk && !k.stream {
			t.Errorf("%s: walked by the counter walk, but not streamed", k.name)
		}
	}
	for set := 1; set < 1<<len(fs); set++ {
		has := fset{}
		for i, f := range fs {
			if set&(1<<i) != 0 {
				has[f] = true
			}
		}
		var told []string
		for _, k := range modelKinds() {
			if k.tells(has) {
				told = append(told, k.name)
			}
		}
		if len(told) > 1 {
			t.Errorf("the :f values %v tell %v", has, told)
		}
	}
}
