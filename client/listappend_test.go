package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
)

// listWorker is a setnx worker whose sections append to the rig's list
// under guard g, perKey appends a key.
func (r *rig) listWorker(p history.Process, lease time.Duration, g client.Guard, perKey int, hook client.Hook) *client.Worker {
	w := r.worker(p, lease, g.Fenced(), hook)
	w.Workload = &client.ListAppend{DB: r.db, ID: r.id, Guard: g, PerKey: perKey}
	return w
}

// listHistory closes the rig's history with the list's final read and
// checks it as a list-append history.
func (r *rig) listHistory(t *testing.T) ([]history.Op, checker.Result) {
	t.Helper()
	ctx := context.Background()
	extra := map[history.Keyword]any{history.KeyFinal: true}
	r.record(history.Op{Time: r.clock.Now(ctx), Type: history.Invoke, Process: 99, F: history.FRead, Extra: extra})
	v, err := (&client.ListAppend{DB: r.db, ID: r.id}).FinalRead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.record(history.Op{Time: r.clock.Now(ctx), Type: history.Ok, Process: 99, F: history.FRead, Value: v, Extra: extra})
	ops := slices.Clone(r.ops)
	slices.SortStableFunc(ops, func(a, b history.Op) int { return int(a.Time - b.Time) })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	rs, err := checker.Check(ctx, ops, checker.Options{Model: checker.ModelListAppend})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := rs.Check(checker.ModelListAppend)
	return ops, res
}

// TestListAppendGuards is TestGuards's interleaving on a list. A (fence 1)
// reads the empty list and pauses past its lease; B (fence 2) acquires,
// reads it too and pauses; A writes [a]; then B writes [b]. Unguarded, and
// fenced, B's write drops A's element, and the checker names B's write as
// the one that took its place; fence-rmw refuses A's write, cas B's.
func TestListAppendGuards(t *testing.T) {
	const lease = 200 * time.Millisecond
	for _, tc := range []struct {
		guard   client.Guard
		refused history.Process // whose append is refused; -1 for none
		lost    int64
	}{
		{guard: client.GuardNone, refused: -1, lost: 1},
		{guard: client.GuardFence, refused: -1, lost: 1},
		{guard: client.GuardFenceRMW, refused: 0},
		{guard: client.GuardCAS, refused: 1},
	} {
		t.Run(string(tc.guard), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newRig(t)
			if err := (&client.ListAppend{DB: r.db, ID: r.id}).Setup(ctx); err != nil {
				t.Fatal(err)
			}
			interleave(ctx, lease, func(p history.Process, hook client.Hook) *client.Worker {
				return r.listWorker(p, lease, tc.guard, 0, hook)
			})

			ops, res := r.listHistory(t)
			var bWrite int64 = -1
			for _, o := range ops {
				if o.F != history.FAppend || o.Type == history.Invoke {
					continue
				}
				if o.Process == 1 {
					bWrite = o.Index
				}
				want := history.Ok
				if o.Process == tc.refused {
					want = history.Fail
				}
				if o.Type != want {
					t.Errorf("process %d's append: %s %v, want %s", o.Process, o.Type, o.Error, want)
				}
			}
			if got := res.Get("lost-min"); got != tc.lost {
				t.Errorf("lost-min = %v, want %d: %s", got, tc.lost, res.Explanation)
			}
			if wantValid := tc.lost == 0; (res.Valid == checker.Valid) != wantValid {
				t.Errorf("valid = %v, want %v: %s", res.Valid, wantValid, res.Explanation)
			}
			if tc.lost > 0 {
				lost, _ := res.Get("lost").([]any)
				if len(lost) == 0 || lost[0].(map[history.Keyword]any)["overwritten-by"] != bWrite {
					t.Errorf("lost = %v, want A's element overwritten by B's append, op %d", lost, bWrite)
				}
			}
		})
	}
}

// TestListAppendKeys: a key takes PerKey appends, then the next is begun;
// the final read has every key's list, the audit table every write.
func TestListAppendKeys(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	l := &client.ListAppend{DB: r.db, ID: r.id, PerKey: 2}
	if err := l.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	w := r.listWorker(0, time.Second, client.GuardCAS, 2, nil)
	for range 5 {
		w.Section(ctx)
	}
	_, res := r.listHistory(t)
	if res.Valid != checker.Valid || res.Get("keys") != int64(3) || res.Get("final") != int64(5) {
		t.Errorf("valid %v, keys %v, final %v; want true, 3, 5: %s", res.Valid, res.Get("keys"), res.Get("final"), res.Explanation)
	}
	ids := []client.WriteID{{Process: 0, Section: 1}, {Process: 0, Section: 5}, {Process: 0, Section: 6}}
	got, err := l.Audited(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !got[ids[0]] || !got[ids[1]] || got[ids[2]] {
		t.Errorf("Audited(%v) = %v; want the first two, not the third (never written)", ids, got)
	}
}
