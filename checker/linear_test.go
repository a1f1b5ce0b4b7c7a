package checker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// The lock-counter histories below are built with sec, finalRead, pause and
// build from lockcounter_test.go.

func TestLinearLockCounter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ops     []history.Op
		valid   Validity // of the linear check
		explain []string // phrases its explanation must hold
	}{
		{
			name:  "serial sections",
			ops:   build(sec(0, 10, 40, 0, history.Ok, 0), sec(1, 50, 80, 1, history.Ok, 0), sec(2, 90, 120, 2, history.Ok, 0), finalRead(200, 3)),
			valid: Valid,
		},
		{
			name: "paused holder overwrites",
			ops: build(sec(0, 10, 901, 0, history.Ok, 0), pause(0, 20, 900),
				sec(1, 520, 560, 0, history.Ok, 0), sec(2, 570, 600, 1, history.Ok, 0), finalRead(1000, 1)),
			valid: Invalid,
			explain: []string{"op 10 and op 23 both wrote 1 after reading 0",
				"process 0 (op 23) was stopped by nemesis op 4 (sigstop) for 880 ms while holding a 500 ms lease"},
		},
		{
			name: "fenced: the stale write is rejected and did not happen",
			ops: build(sec(0, 10, 901, 0, history.Fail, 1), pause(0, 20, 900),
				sec(1, 520, 560, 0, history.Ok, 2), sec(2, 570, 600, 1, history.Ok, 3), finalRead(1000, 2)),
			valid: Valid,
		},
		{
			name:  ":info write that happened",
			ops:   build(sec(0, 10, 40, 0, history.Info, 0), sec(1, 50, 80, 1, history.Ok, 0), finalRead(200, 2)),
			valid: Valid,
		},
		{
			name:  ":info write that did not happen",
			ops:   build(sec(0, 10, 40, 0, history.Info, 0), sec(1, 50, 80, 0, history.Ok, 0), finalRead(200, 1)),
			valid: Valid,
		},
		{
			name:    "final read below the increments",
			ops:     build(sec(0, 10, 40, 0, history.Ok, 0), sec(1, 50, 80, 1, history.Ok, 0), finalRead(200, 1)),
			valid:   Invalid,
			explain: []string{"op 17 (process 100) read 1, but op 13 (process 1) had written 2 before it began"},
		},
		{
			name:  "no final read",
			ops:   build(sec(0, 10, 40, 0, history.Ok, 0)),
			valid: Valid,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := Check(context.Background(), tc.ops, Options{Model: ModelLockCounter})
			if err != nil {
				t.Fatal(err)
			}
			r, ok := rs.Check("linear")
			if !ok {
				t.Fatalf("no linear check in %s", rs.AppendEDN(nil))
			}
			if r.Valid != tc.valid {
				t.Errorf("valid? %v, want %v\n%s", r.Valid, tc.valid, rs.AppendEDN(nil))
			}
			for _, want := range tc.explain {
				if !strings.Contains(r.Explanation, want) {
					t.Errorf("explanation %q lacks %q", r.Explanation, want)
				}
			}
		})
	}
}

// TestLinearDeterministic checks that the evidence of a violation does not
// depend on the order porcupine returns its partial linearizations in: a
// re-check must give the results the run gave.
func TestLinearDeterministic(t *testing.T) {
	ops := build(sec(0, 10, 901, 0, history.Ok, 0), pause(0, 20, 900),
		sec(1, 520, 560, 0, history.Ok, 0), sec(2, 570, 600, 1, history.Ok, 0),
		sec(1, 610, 640, 2, history.Ok, 0), sec(2, 650, 680, 2, history.Ok, 0), finalRead(1000, 3))
	first, err := Check(context.Background(), ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		rs, _ := Check(context.Background(), ops, Options{})
		if got, want := string(rs.AppendEDN(nil)), string(first.AppendEDN(nil)); got != want {
			t.Fatalf("check %d differs:\n%s\nfirst:\n%s", i, got, want)
		}
	}
}

// TestLinearTimeout checks that a search that cannot finish is :unknown,
// never valid.
func TestLinearTimeout(t *testing.T) {
	// Many concurrent writes and reads that no order explains make
	// porcupine search every order before it can say so.
	var ops []history.Op
	const n = 60
	for p := 0; p < n; p++ {
		ops = append(ops, inv(history.Process(p), "write", int64(p)))
	}
	for p := 0; p < n; p++ {
		ops = append(ops, ok(history.Process(p), "write", int64(p)))
	}
	ops = append(ops, inv(n, "read", nil), ok(n, "read", int64(1000)))
	ops = h(ops...)
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		opts Options
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, Options{Model: ModelRegister}},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Nanosecond)
		}, Options{Model: ModelRegister}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			rs, err := Check(ctx, ops, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if rs.Valid != Unknown {
				t.Errorf("valid? %v, want :unknown\n%s", rs.Valid, rs.AppendEDN(nil))
			}
		})
	}
}
