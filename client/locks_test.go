package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
)

// sharedLocks are the locks kept on the rig's Redis or PostgreSQL: not
// redlock (nodes of its own: lock_redlock_test.go) nor etcd's and ZooKeeper's
// (lock_etcd_test.go, lock_etcd_v3lock_test.go).
func sharedLocks() []string {
	var out []string
	for _, k := range client.LockKinds() {
		if k.Store != client.OnRedisNodes && k.Store != client.OnEtcd && k.Store != client.OnZooKeeper {
			out = append(out, k.Name)
		}
	}
	return out
}

// lockWorker is rig.worker with the lock called name.
func (r *rig) lockWorker(t *testing.T, p history.Process, name string, lease time.Duration, fenced bool, hook client.Hook) (*client.Worker, client.Lock) {
	t.Helper()
	l, err := client.NewLock(context.Background(), name, client.LockConfig{Redis: r.rdb, RedisURL: redisURL, Postgres: r.db, Key: "lock:" + r.name,
		FenceKey: "fence:" + r.name, Lease: lease, Retry: time.Millisecond, Fenced: fenced})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := l.(interface{ Close() }); ok {
		t.Cleanup(c.Close)
	}
	return &client.Worker{
		Lock:     l,
		Workload: &client.Counter{DB: r.db, ID: r.id, Guard: client.GuardOf(fenced)},
		Clock:    r.clock, Record: r.record, Process: p, Stride: 10, Hook: hook,
		Renewals: &client.Renewals{Clock: r.clock, Record: r.record},
	}, l
}

func TestNewLock(t *testing.T) {
	r := newRig(t)
	for _, name := range sharedLocks() {
		r.lockWorker(t, 0, name, time.Second, false, nil) // fails the test if NewLock does
	}
	if _, err := client.NewLock(context.Background(), "chubby", client.LockConfig{}); err == nil {
		t.Error("NewLock of an unknown lock gave no error")
	}
}

// TestLocksPausedHolder is TestPausedHolder for every lock: holder A
// acquires with a 200 ms lease, reads, and pauses inside its section; 1.5
// leases later holder B runs a section (giving up after bWait when it cannot
// acquire); once B is done (or, for a lock B waits on, after 2 leases), A
// goes on and writes.
//
// A lease lock loses A's lease, so unfenced B's update is lost and fenced
// A's write is rejected. The watchdogs of renew and redsync-extend keep
// the lease through a pause of A's goroutine (sleep), so B gives up;
// through a pause of A's whole process (stop: its renewals are frozen too)
// they do not. The
// advisory lock has no lease: B waits for A's release and nothing is lost.
func TestLocksPausedHolder(t *testing.T) {
	const lease = 200 * time.Millisecond
	type want = pausedWant
	var (
		lost     = want{writes: 2, final: 1, lost: 1, overlapping: 2, bAcquire: history.Ok, releaseA: "expired"}
		rejected = want{writes: 1, final: 1, rejected: 1, overlapping: 2, bAcquire: history.Ok, releaseA: "expired"}
		kept     = want{writes: 1, final: 1, bAcquire: history.Fail}
		waited   = want{writes: 2, final: 2, bAcquire: history.Ok}
	)
	type tc struct {
		lock   string
		fenced bool
		stop   bool          // the pause freezes the lock's renewals, as a stopped process would
		bWait  time.Duration // how long B tries to acquire
		want   want
	}
	var cases []tc
	for _, l := range []string{"setnx", "redsync", "redislock"} {
		cases = append(cases,
			tc{lock: l, bWait: 5 * time.Second, want: lost},
			tc{lock: l, fenced: true, bWait: 5 * time.Second, want: rejected})
	}
	for _, l := range []string{"renew", "redsync-extend"} {
		cases = append(cases,
			tc{lock: l, bWait: lease, want: kept},
			tc{lock: l, fenced: true, bWait: lease, want: kept},
			tc{lock: l, stop: true, bWait: 5 * time.Second, want: lost},
			tc{lock: l, fenced: true, stop: true, bWait: 5 * time.Second, want: rejected})
	}
	cases = append(cases,
		tc{lock: "pg-advisory", bWait: 5 * time.Second, want: waited},
		tc{lock: "pg-advisory", fenced: true, bWait: 5 * time.Second, want: waited},
	)
	for _, tc := range cases {
		pause := "sleep"
		if tc.stop {
			pause = "stop"
		}
		t.Run(fmt.Sprintf("%s/fenced=%v/%s", tc.lock, tc.fenced, pause), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newRig(t)
			inside, resume := make(chan struct{}), make(chan struct{})
			var lockA client.Lock
			a, lockA := r.lockWorker(t, 0, tc.lock, lease, tc.fenced, func(context.Context, client.Section) {
				if tc.stop {
					thaw := lockA.(client.Freezer).Freeze()
					defer thaw()
				}
				close(inside)
				<-resume
			})
			b, _ := r.lockWorker(t, 1, tc.lock, lease, tc.fenced, nil)

			if tc.want == waited {
				contendWaiting(ctx, a, b, inside, resume, lease, tc.bWait)
			} else {
				contend(ctx, a, b, inside, resume, lease, tc.bWait)
			}

			r.checkPaused(t, tc.want)
		})
	}
}

// contend runs the paused-holder choreography: A's section, until its
// hook says it is inside (inside closes); 1.5 leases later B's section,
// trying to acquire for bWait; once B is done, A goes on (resume
// closes). It returns when both are done.
func contend(ctx context.Context, a, b *client.Worker, inside, resume chan struct{}, lease, bWait time.Duration) {
	contendUntil(ctx, a, b, inside, resume, lease, bWait, nil)
}

// contendWaiting is contend for a lock with no lease, which B waits on
// until A releases: A goes on after 2 leases, B still waiting, whatever
// the timing (B cannot take the lock before A lets it go).
func contendWaiting(ctx context.Context, a, b *client.Worker, inside, resume chan struct{}, lease, bWait time.Duration) {
	contendUntil(ctx, a, b, inside, resume, lease, bWait, time.After(2*lease))
}

// contendUntil resumes A once B's section is done, or at early. Not after
// a guess at how long B takes: beside two CPU burners a B acquiring
// through a node adapter took more than 2 leases, A went on while B held
// the lock, and a lock that loses B's update (redis-semaphore 5.3.0) was
// not shown doing so.
func contendUntil(ctx context.Context, a, b *client.Worker, inside, resume chan struct{}, lease, bWait time.Duration, early <-chan time.Time) {
	aDone, bDone := make(chan struct{}), make(chan struct{})
	go func() { a.Section(ctx); close(aDone) }()
	<-inside
	time.Sleep(lease * 3 / 2)
	go func() {
		bctx, cancel := context.WithTimeout(ctx, bWait)
		defer cancel()
		b.Section(bctx)
		close(bDone)
	}()
	select {
	case <-bDone:
	case <-early:
	}
	close(resume)
	<-aDone
	<-bDone
}

// pausedWant is what a paused-holder test (contend) should leave: figures
// of the lock-counter check, and how B's acquire and A's release ended.
type pausedWant struct {
	writes, final, lost, rejected int64
	overlapping                   int64           // lock-overlapping-sections
	bAcquire                      history.Type    // B's acquire
	releaseA                      history.Keyword // A's release :error; "" when ok
}

// checkPaused checks the rig's history of a paused-holder test: A is
// process 0, B process 1.
func (r *rig) checkPaused(t *testing.T, w pausedWant) {
	t.Helper()
	res := checker.LockCounter(r.history(t), 0)
	for key, want := range map[string]int64{"writes": w.writes, "final": w.final,
		"lost-min": w.lost, "lost-max": w.lost, "stale-rejected": w.rejected,
		"lock-overlapping-sections": w.overlapping} {
		if got, _ := history.Int(res.Get(key)); got != want {
			t.Errorf("%s = %v, want %d", key, res.Get(key), want)
		}
	}
	if wantValid := w.lost == 0; (res.Valid == checker.Valid) != wantValid {
		t.Errorf("valid? %v (%s)", res.Valid, res.Explanation)
	}
	for _, o := range r.ops {
		switch {
		case o.Type == history.Invoke:
		case o.Process == 1 && o.F == "acquire" && o.Type != w.bAcquire:
			t.Errorf("B's acquire completed %v (%v), want %v", o.Type, o.Error, w.bAcquire)
		case o.Process == 0 && o.F == "release" && !sameError(o.Error, w.releaseA):
			t.Errorf("A's release completed %v with error %v, want %q", o.Type, o.Error, w.releaseA)
		}
	}
}

func sameError(got any, want history.Keyword) bool {
	if want == "" {
		return got == nil
	}
	return got == want
}

// TestLocksMutualExclusion runs three workers on every lock with a lease far
// longer than a section: no section overlaps another, nothing is lost.
func TestLocksMutualExclusion(t *testing.T) {
	for _, name := range sharedLocks() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			var wg sync.WaitGroup
			for p := range 3 {
				w, _ := r.lockWorker(t, history.Process(p), name, 5*time.Second, true, nil)
				w.Work = 2 * time.Millisecond
				wg.Add(1)
				go func() { defer wg.Done(); w.Run(ctx) }()
			}
			wg.Wait()
			res := checker.LockCounter(r.history(t), 0)
			if writes, _ := history.Int(res.Get("writes")); writes < 1 { // how many is the machine's
				t.Errorf("no write in 500 ms: nothing was checked")
			}
			if res.Valid != checker.Valid {
				t.Errorf("valid? %v: %s", res.Valid, res.Explanation)
			}
			for _, key := range []string{"lock-overlapping-sections", "stale-rejected", "info-ops"} {
				if n, _ := history.Int(res.Get(key)); n != 0 {
					t.Errorf("%s = %d under a working lock", key, n)
				}
			}
			// Every acquisition had a fence larger than the one before.
			var fences []int64
			for _, o := range r.ops {
				if o.F == "acquire" && o.Type == history.Ok {
					f, _ := history.Int(o.Get("fence"))
					fences = append(fences, f)
				}
			}
			if !slices.IsSorted(fences) || len(fences) == 0 || fences[0] < 1 {
				t.Errorf("fences %v, want increasing from 1", fences)
			}
		})
	}
}

// TestFenceDoesNotFenceTheRead shows what fencing leaves open: the write is
// fenced, the read is not. A reads and stalls past its lease; B acquires
// (a larger fence), reads the same value and stalls too; A writes first —
// its fence is still the largest written — then B. Both writes are
// accepted, and one of the two increments is lost.
func TestFenceDoesNotFenceTheRead(t *testing.T) {
	const lease = 200 * time.Millisecond
	ctx := context.Background()
	r := newRig(t)
	type holder struct {
		inside, resume, done chan struct{}
		w                    *client.Worker
	}
	hold := func(p history.Process) *holder {
		h := &holder{inside: make(chan struct{}), resume: make(chan struct{}), done: make(chan struct{})}
		h.w, _ = r.lockWorker(t, p, "setnx", lease, true, func(context.Context, client.Section) {
			close(h.inside)
			<-h.resume
		})
		go func() { h.w.Section(ctx); close(h.done) }()
		<-h.inside
		return h
	}
	a := hold(0)
	time.Sleep(lease * 3 / 2)
	b := hold(1)
	close(a.resume)
	<-a.done
	close(b.resume)
	<-b.done

	res := checker.LockCounter(r.history(t), 0)
	for key, want := range map[string]int64{"writes": 2, "final": 1, "lost-min": 1, "lost-max": 1, "stale-rejected": 0} {
		if got, _ := history.Int(res.Get(key)); got != want {
			t.Errorf("%s = %v, want %d", key, res.Get(key), want)
		}
	}
	if res.Valid != checker.Invalid {
		t.Errorf("valid? %v, want false: an update was lost under fencing", res.Valid)
	}
}
