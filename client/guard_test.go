package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/guard"
	"github.com/hiatus-dev/hiatus/history"
)

// guardWorker is a setnx worker whose writes the resource guards with g.
func (r *rig) guardWorker(p history.Process, lease time.Duration, g client.Guard, hook client.Hook) *client.Worker {
	w := r.worker(p, lease, g.Fenced(), hook)
	w.Workload.(*client.Counter).Guard = g
	return w
}

// TestGuards is the interleaving that tells the guards apart. Holder A
// (fence 1) reads 0 and pauses; its lease lapses; B (fence 2) acquires,
// reads 0 and pauses before its write; A wakes and writes 1; then B writes
// 1. Both read 0, so one update is lost unless the resource refuses one of
// the writes:
//
//   - none: both land;
//   - fence: both land too — A's fence 1 is above every fence landed when
//     it arrives, and B's 2 above A's. A fence orders writes, not
//     read-modify-writes;
//   - fence-rmw: B's read recorded fence 2, so A's write is refused;
//   - cas: A's lands (the counter still holds the 0 it read), B's is
//     refused (it no longer does).
func TestGuards(t *testing.T) {
	const lease = 200 * time.Millisecond
	for _, tc := range []struct {
		guard          client.Guard
		refused        history.Process // whose write is refused; -1 for none
		why            history.Keyword
		writes, lost   int64
		staleRejected  int64
		changeRejected int64
	}{
		{guard: client.GuardNone, refused: -1, writes: 2, lost: 1},
		{guard: client.GuardFence, refused: -1, writes: 2, lost: 1},
		{guard: client.GuardFenceRMW, refused: 0, why: history.ErrStaleFence, writes: 1, staleRejected: 1},
		{guard: client.GuardCAS, refused: 1, why: history.ErrChanged, writes: 1, changeRejected: 1},
	} {
		t.Run(string(tc.guard), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newRig(t)
			interleave(ctx, lease, func(p history.Process, hook client.Hook) *client.Worker {
				return r.guardWorker(p, lease, tc.guard, hook)
			})

			ops := r.history(t)
			for _, o := range ops {
				if o.F != history.FWrite || o.Type == history.Invoke {
					continue
				}
				want := history.Ok
				if o.Process == tc.refused {
					want = history.Fail
				}
				if o.Type != want || (want == history.Fail && o.Error != tc.why) {
					t.Errorf("process %d's write: %s %v, want %s %v", o.Process, o.Type, o.Error, want, tc.why)
				}
			}
			res := checker.LockCounter(ops, 0)
			f, _ := res.LockFigures()
			if f.Writes != tc.writes || f.LostMin != tc.lost || f.LostMax != tc.lost ||
				f.StaleRejected != tc.staleRejected || f.ChangeRejected != tc.changeRejected {
				t.Errorf("writes %d, lost %d–%d, stale-rejected %d, change-rejected %d; want %d, %d, %d, %d",
					f.Writes, f.LostMin, f.LostMax, f.StaleRejected, f.ChangeRejected,
					tc.writes, tc.lost, tc.staleRejected, tc.changeRejected)
			}
			if wantValid := tc.lost == 0; (res.Valid == checker.Valid) != wantValid {
				t.Errorf("valid = %v, want %v:\n%s", res.Valid, wantValid, res.Explanation)
			}
			if f.LockOverlapping != 2 {
				t.Errorf("lock-overlapping-sections = %d, want 2: the lock granted twice whatever the guard", f.LockOverlapping)
			}
		})
	}
}

// interleave runs the interleaving of TestGuards with the workers worker
// makes of processes 0 (A) and 1 (B), each with the hook given: A reads
// and pauses; its lease lapses; B acquires, reads and pauses; A writes;
// then B.
func interleave(ctx context.Context, lease time.Duration, worker func(history.Process, client.Hook) *client.Worker) {
	inA, resumeA := make(chan struct{}), make(chan struct{})
	inB, resumeB := make(chan struct{}), make(chan struct{})
	a := worker(0, func(context.Context, client.Section) { close(inA); <-resumeA })
	b := worker(1, func(context.Context, client.Section) { close(inB); <-resumeB })
	aDone, bDone := make(chan struct{}), make(chan struct{})
	go func() { a.Section(ctx); close(aDone) }()
	<-inA
	time.Sleep(lease * 3 / 2) // A's lease lapses on the server
	go func() { b.Section(ctx); close(bDone) }()
	<-inB
	close(resumeA)
	<-aDone
	close(resumeB)
	<-bDone
}

// TestGuardRMWRefusesStaleRead: under fence-rmw a read with a fence below
// one already recorded is refused, and records nothing.
func TestGuardRMWRefusesStaleRead(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	c := &client.Counter{DB: r.db, ID: r.id, Guard: client.GuardFenceRMW}
	if _, err := c.ReadAs(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadAs(ctx, 4); err != client.ErrStale {
		t.Fatalf("read with fence 4 after 5: %v, want ErrStale", err)
	}
	if err := c.Write(ctx, 1, 0, 5, client.WriteID{Process: 0, Section: 1}); err != nil {
		t.Fatalf("write with the fence the row holds: %v", err)
	}
	if _, err := c.ReadAs(ctx, 5); err != nil {
		t.Fatalf("the same holder reads again: %v", err)
	}
}

// TestGuardReasons: the metrics' reason label says a refusal with the word
// the history's :error does, so that a dashboard and a run read alike.
func TestGuardReasons(t *testing.T) {
	if guard.ReasonStale != string(history.ErrStaleFence) || guard.ReasonChanged != string(history.ErrChanged) {
		t.Errorf("reasons %q, %q; the history's errors %q, %q", guard.ReasonStale, guard.ReasonChanged, history.ErrStaleFence, history.ErrChanged)
	}
}
