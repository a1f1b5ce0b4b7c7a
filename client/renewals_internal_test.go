package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
)

// tickClock is a clock that ticks once a reading.
type tickClock struct {
	mu sync.Mutex
	t  int64
}

func (c *tickClock) Now(context.Context) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t++
	return c.t
}

// TestRenewalGenerations: each renewal is an invocation and a completion
// of a renewer of the holder's, classified as a release's answer is; after
// one of unknown outcome that renewer is not used again (a process whose
// op completed :info never invokes again), after a refusal it is; two
// renewals at once go under two renewers; a lock renewing outside a
// worker's Acquire records nothing.
func TestRenewalGenerations(t *testing.T) {
	var ops []history.Op
	r := &Renewals{Clock: &tickClock{}, Record: func(o history.Op) { ops = append(ops, o) }}
	ctx := withHolder(context.Background(), r, 3)
	g := Grant{Token: "t1", Lease: 300_000_000}
	for _, err := range []error{nil, errors.New("i/o timeout"), nil, ErrLost, fmt.Errorf("wrapped: %w", ErrStolen), &Refused{Reason: "no"}} {
		if got := RecordRenewal(ctx, history.ByAdapter, g, func(context.Context) error { return err }); got != err {
			t.Errorf("RecordRenewal returned %v, want renew's %v", got, err)
		}
	}
	gen0, _ := history.Renewer(3, 0)
	gen1, _ := history.Renewer(3, 1)
	want := []struct {
		p   history.Process
		t   history.Type
		err any
	}{
		{gen0, history.Invoke, nil}, {gen0, history.Ok, nil},
		{gen0, history.Invoke, nil}, {gen0, history.Info, "i/o timeout"},
		{gen1, history.Invoke, nil}, {gen1, history.Ok, nil},
		{gen1, history.Invoke, nil}, {gen1, history.Fail, history.ErrLost},
		{gen1, history.Invoke, nil}, {gen1, history.Fail, history.ErrStolen},
		{gen1, history.Invoke, nil}, {gen1, history.Fail, "no"},
	}
	if len(ops) != len(want) {
		t.Fatalf("%d ops recorded, want %d: %v", len(ops), len(want), ops)
	}
	for i, w := range want {
		o := ops[i]
		if o.Process != w.p || o.Type != w.t || o.Error != w.err || o.F != history.FRenew || o.Get(history.KeyToken) != "t1" ||
			o.Get(history.KeyBy) != history.ByAdapter || o.Get(history.KeyLeaseMS) != int64(300) || o.Time != int64(i+1) {
			t.Errorf("op %d = %s, want %v %v %v", i, history.AppendOp(nil, o), w.p, w.t, w.err)
		}
	}
	if _, err := history.Pairs(ops); err != nil {
		t.Errorf("the renewals do not pair: %v", err)
	}
	// Two renewals open at once (a watchdog's and an adapter's library's)
	// go under two renewers; the first free one is taken next.
	ops = nil
	_ = RecordRenewal(ctx, history.ByWatchdog, g, func(ctx context.Context) error {
		return RecordRenewal(ctx, history.ByAdapter, g, func(context.Context) error { return nil })
	})
	_ = RecordRenewal(ctx, history.ByAdapter, g, func(context.Context) error { return nil })
	gen2, _ := history.Renewer(3, 2)
	var procs []history.Process
	for _, o := range ops {
		procs = append(procs, o.Process)
	}
	if want := []history.Process{gen1, gen2, gen2, gen1, gen1, gen1}; !slices.Equal(procs, want) {
		t.Errorf("renewals at once went under %v, want %v", procs, want)
	}
	if _, err := history.Pairs(ops); err != nil {
		t.Errorf("the renewals do not pair: %v", err)
	}

	ops = nil
	if err := RecordRenewal(context.Background(), history.ByWatchdog, g, func(context.Context) error { return nil }); err != nil || len(ops) > 0 {
		t.Errorf("outside a worker's Acquire: %v, recorded %v", err, ops)
	}
}
