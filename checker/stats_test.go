package checker

import (
	"context"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
)

// TestStats: :stats counts completions by :f and outcome; a lock-counter
// history none of whose writes succeeded is unknown, whatever else it
// shows; other models are only counted.
func TestStats(t *testing.T) {
	op := func(typ history.Type, p history.Process, f history.Keyword, v any) history.Op {
		return history.Op{Index: history.Unset, Time: history.Unset, Type: typ, Process: p, F: f, Value: v}
	}
	noWrite := []history.Op{
		op(history.Invoke, 0, history.FAcquire, nil), op(history.Ok, 0, history.FAcquire, nil),
		op(history.Invoke, 0, history.FRead, nil), op(history.Ok, 0, history.FRead, int64(0)),
		op(history.Invoke, 0, history.FWrite, int64(1)), op(history.Fail, 0, history.FWrite, int64(1)),
		op(history.Invoke, 0, history.FRelease, nil), op(history.Ok, 0, history.FRelease, nil),
		op(history.Invoke, 1, history.FRead, nil).With(history.KeyFinal, true),
		op(history.Ok, 1, history.FRead, int64(0)).With(history.KeyFinal, true),
	}
	for i := range noWrite {
		noWrite[i].Index = int64(i)
	}
	register := []history.Op{
		op(history.Invoke, 0, "write", int64(1)), op(history.Ok, 0, "write", int64(1)),
		op(history.Invoke, 1, "read", nil), op(history.Ok, 1, "read", int64(1)),
		op(history.Invoke, 1, "read", nil), op(history.Info, 1, "read", nil),
	}
	for _, tc := range []struct {
		name  string
		ops   []history.Op
		model string
		valid Validity
		count int64
		byF   history.Keyword
		fail  int64
	}{
		{"lock-counter, no write ok", noWrite, ModelLockCounter, Unknown, 5, history.FWrite, 1},
		{"register", register, ModelRegister, Valid, 3, "read", 0},
	} {
		rs, err := Check(context.Background(), tc.ops, Options{Model: tc.model})
		if err != nil {
			t.Fatal(err)
		}
		var st Result
		for _, r := range rs.Checks {
			if r.Name == "stats" {
				st = r
			}
		}
		if st.Valid != tc.valid || st.Get("count") != tc.count {
			t.Errorf("%s: stats %v, count %v; want %v, %d (%s)", tc.name, st.Valid, st.Get("count"), tc.valid, tc.count, st.Explanation)
		}
		byF, _ := st.Get("by-f").(map[history.Keyword]any)
		if m, _ := byF[tc.byF].(map[history.Keyword]any); m == nil || m["fail-count"] != tc.fail {
			t.Errorf("%s: by-f %v, want %s with fail-count %d", tc.name, byF, tc.byF, tc.fail)
		}
		if tc.valid == Unknown && rs.Valid != Unknown {
			t.Errorf("%s: verdict %v, want unknown", tc.name, rs.Valid)
		}
	}
}

// TestOpsMissingUnknown: a history whose run says ops are missing is
// unknown, even where a check finds it invalid (here: a counter that rose
// by more than the writes recorded, which the missing ops may explain).
func TestOpsMissingUnknown(t *testing.T) {
	op := func(i int64, typ history.Type, p history.Process, f history.Keyword, v any) history.Op {
		return history.Op{Index: i, Time: i, Type: typ, Process: p, F: f, Value: v}
	}
	ops := []history.Op{
		op(0, history.Invoke, 0, history.FAcquire, nil), op(1, history.Ok, 0, history.FAcquire, nil),
		op(2, history.Invoke, 0, history.FRead, nil), op(3, history.Ok, 0, history.FRead, int64(0)),
		op(4, history.Invoke, 0, history.FWrite, int64(1)), op(5, history.Ok, 0, history.FWrite, int64(1)),
		op(6, history.Invoke, 0, history.FRelease, nil), op(7, history.Ok, 0, history.FRelease, nil),
		op(8, history.Invoke, 1, history.FRead, nil).With(history.KeyFinal, true),
		op(9, history.Ok, 1, history.FRead, int64(5)).With(history.KeyFinal, true),
	}
	rs, err := Check(context.Background(), ops, Options{Model: ModelLockCounter})
	if err != nil || rs.Valid != Invalid {
		t.Fatalf("without the event: %v (%v), want invalid", rs.Valid, err)
	}
	ops = append(ops, history.Op{Index: 10, Time: 10, Type: history.Info, Process: history.Nemesis,
		F: history.FOpsMissing, Value: "worker 1 output: not an op: the worker's later ops"})
	rs, err = Check(context.Background(), ops, Options{Model: ModelLockCounter})
	h, _ := rs.Check("history")
	if err != nil || rs.Valid != Unknown || h.Valid != Unknown {
		t.Errorf("with the event: %v, :history %v (%v); want unknown", rs.Valid, h.Valid, err)
	}
	if lc, _ := rs.Check("lock-counter"); lc.Valid != Invalid {
		t.Errorf(":lock-counter %v, want its own verdict kept: invalid", lc.Valid)
	}
}
