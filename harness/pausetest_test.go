package harness_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/adaptertest"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/report"
	"github.com/hiatus-dev/hiatus/store"
)

// How a lock keeps its holder's lease through a pause.
type keeping int

const (
	lapses  keeping = iota // a lease that nothing renews: B takes the lock
	renews                 // a watchdog renews it, unless the holder's process is stopped
	noLease                // no lease: B waits for A's release
)

// pauseWant is what a case of the paused-holder test must do.
type pauseWant struct {
	taken                  harness.Takeover
	writes, lost, rejected int64
	passed, froze          bool
}

// wantOf is what case c of a lock that keeps leases as k must do.
func wantOf(k keeping, c harness.PauseCase, freezes bool) pauseWant {
	stopped := c.Pause == nemesis.KindStop
	froze := stopped && freezes
	switch {
	case k == noLease:
		return pauseWant{taken: harness.Waited, writes: 2, passed: true, froze: froze}
	case k == renews && !stopped:
		return pauseWant{taken: harness.Kept, writes: 2, passed: true}
	case c.Guard == client.GuardNone:
		// A's write lands on B's: both acknowledged, the counter at 1.
		return pauseWant{taken: harness.Took, writes: 2, lost: 1, froze: froze}
	}
	// The guard refuses A's write, or (fence-rmw) its read.
	return pauseWant{taken: harness.Took, writes: 1, rejected: 1, passed: true, froze: froze}
}

// TestPauseTest runs the paused-holder test on a lock of each way of
// keeping a lease, an adapter's (its own process, which a stop stops) and
// a lock of the test's own (the Go API a user's test calls), and checks
// every case's verdict, figures and run directory. The order of events is
// the test's own: B tries from the moment A is paused, and A goes on after
// B's section or a lease past its lease on the server's clock.
func TestPauseTest(t *testing.T) {
	t.Parallel()
	shared := harness.DefaultConfig()
	stop, err := harness.StartServers(context.Background(), &shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	all := []client.Guard{client.GuardNone, client.GuardFence, client.GuardFenceRMW, client.GuardCAS}
	two := []client.Guard{client.GuardNone, client.GuardFence}
	for i, tc := range []struct {
		lock    string
		keeping keeping
		freezes bool // the lock is a client.Freezer
		guards  []client.Guard
		pauses  []history.Keyword
		// lease is the case's lease; 200ms when 0. A watchdog's renewal
		// every lease/3 must keep up with it on a starved machine (beside
		// two CPU burners, under -race, one came more than 2/3 of a 200ms
		// lease late and B took the lock): renewing locks get 1.5s, which a
		// renewal misses only a second late.
		lease time.Duration
	}{
		{lock: "setnx", keeping: lapses, guards: all, pauses: harness.PauseTestKinds()},
		{lock: "renew", keeping: renews, freezes: true, guards: two, pauses: harness.PauseTestKinds(), lease: 1500 * time.Millisecond},
		{lock: "pg-advisory", keeping: noLease, guards: two[:1], pauses: harness.PauseTestKinds()},
		{lock: "exec:" + adaptertest.Command("setnx"), keeping: lapses, freezes: true, guards: two, pauses: []history.Keyword{nemesis.KindStop}},
		// The lab's. Its release, a plain DEL, cannot say its lease lapsed:
		// a B starved past A's release (beside two CPU burners, none took
		// the lock in the 200 ms past a 200 ms lease) is not told Late, as
		// setnx's is, and a lease of 1 s gives it a second.
		{lock: "del-release", keeping: lapses, guards: two[:1], pauses: []history.Keyword{nemesis.KindSleep}, lease: time.Second},
		// etcd grants 2 s at the least: a case takes 2 to 4 s.
		{lock: "etcd", keeping: renews, freezes: true, guards: two[:1], pauses: harness.PauseTestKinds()},
		// ZooKeeper's client pings its session every third of its
		// timeout, as a watchdog renews: a renewing lock's lease.
		{lock: "zookeeper", keeping: renews, freezes: true, guards: two, pauses: harness.PauseTestKinds(), lease: 1500 * time.Millisecond},
	} {
		name := tc.lock
		if i == 3 {
			name = "exec"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := harness.DefaultConfig()
			cfg.RedisURL, cfg.PostgresURL, cfg.Store = shared.RedisURL, shared.PostgresURL, t.TempDir()
			cfg.Name, cfg.CounterID = fmt.Sprintf("pause-test-%d", i), int64(900+i)
			cfg.Lease, cfg.Retry = 200*time.Millisecond, time.Millisecond
			if tc.lease != 0 {
				cfg.Lease = tc.lease
			}
			cases := harness.PauseCases([]string{tc.lock}, tc.guards, tc.pauses)
			vs, err := lab.PauseTest(context.Background(), cfg, cases, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != len(cases) {
				t.Fatalf("%d verdicts of %d cases", len(vs), len(cases))
			}
			for _, v := range vs {
				checkPauseVerdict(t, v, cfg.Lease, wantOf(tc.keeping, v.Case, tc.freezes))
			}
		})
	}
}

func checkPauseVerdict(t *testing.T, v harness.PauseVerdict, lease time.Duration, w pauseWant) {
	t.Helper()
	c := fmt.Sprintf("%s/%s", v.Case.Guard, v.Case.Pause)
	f := v.Figures()
	got := pauseWant{taken: v.Taken, writes: f.Writes, lost: f.LostMin,
		rejected: f.StaleRejected + f.ChangeRejected, passed: v.Passed(), froze: v.Froze}
	if got != w {
		t.Errorf("%s: %+v, want %+v (%s; run %s)", c, got, w, v.Explanation(), v.Dir)
	}
	if v.Taken == harness.Took && v.After < lease {
		t.Errorf("%s: B took the lock %v after A, within A's %v lease", c, v.After, lease)
	}
	for _, f := range []string{store.History, store.Results, store.Test, report.TimelineFile} {
		if _, err := os.Stat(filepath.Join(v.Dir, f)); err != nil {
			t.Errorf("%s: the case's run lacks %s: %v", c, f, err)
		}
	}
	t.Logf("%s: B %s (+%v), %v", c, v.Taken, v.After.Round(time.Millisecond), v.Elapsed.Round(time.Millisecond))
}

// TestPauseTestSlowAcquire: the sequence holds when an acquire takes a
// lease's time, as on a starved machine. A B that takes the lock only well
// after A's lease lapsed — here a second holder that waits three leases
// before it asks — does not make the case pass: A wakes a lease past its
// lease and writes, its release finds the lease lapsed, the case runs
// again, three times in all, and is then Late, not passed, though nothing
// was lost. An A whose lock is granted a lease and a half after it asked
// is paused past the end of its lease as granted, not as asked: B takes
// the lock, and the unguarded case loses B's update.
func TestPauseTestSlowAcquire(t *testing.T) {
	t.Parallel()
	const lease = 200 * time.Millisecond
	for _, tc := range []struct {
		name     string
		slow     int32 // which holder's acquire waits: 1 for A, 2 for B
		wait     time.Duration
		taken    harness.Takeover
		attempts int
		lost     int64
	}{
		{name: "late-taker", slow: 2, wait: 3 * lease, taken: harness.Late, attempts: 3},
		{name: "slow-holder", slow: 1, wait: 3 * lease / 2, taken: harness.Took, attempts: 1, lost: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var made atomic.Int32
			lab := harness.Lab{Locks: []client.LockKind{{Name: tc.name, Store: client.OnRedis,
				New: func(ctx context.Context, c client.LockConfig) (client.Lock, error) {
					l, err := client.NewLock(ctx, "setnx", c)
					if made.Add(1) == tc.slow {
						return slowAsker{l, tc.wait}, err
					}
					return l, err
				}}}}
			cfg := harness.DefaultConfig()
			cfg.Store, cfg.Lease, cfg.Retry = t.TempDir(), lease, time.Millisecond
			vs, err := lab.PauseTest(context.Background(), cfg,
				harness.PauseCases([]string{tc.name}, []client.Guard{client.GuardNone}, []history.Keyword{nemesis.KindSleep}), nil)
			if err != nil {
				t.Fatal(err)
			}
			v := vs[0]
			if v.Taken != tc.taken || v.Attempts != tc.attempts || v.Passed() || v.Figures().LostMin != tc.lost {
				t.Errorf("B %s after %d attempts, passed %v, lost %d: want %s after %d, not passed, %d lost (%s)",
					v.Taken, v.Attempts, v.Passed(), v.Figures().LostMin, tc.taken, tc.attempts, tc.lost, v.Explanation())
			}
		})
	}
}

// slowAsker is a lock whose every acquire waits before it asks.
type slowAsker struct {
	client.Lock
	wait time.Duration
}

func (l slowAsker) Acquire(ctx context.Context) (client.Grant, error) {
	select {
	case <-ctx.Done():
		return client.Grant{}, client.ErrGaveUp
	case <-time.After(l.wait):
	}
	return l.Lock.Acquire(ctx)
}
