package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
)

// etcdRig is a throwaway etcd server, a client of its own to look at and
// tamper with the locks' keys, and a lock name of the test's own.
type etcdRig struct {
	srv *servers.Server
	url string
	cli *clientv3.Client
	key string
}

func newEtcdRig(t *testing.T) *etcdRig {
	t.Helper()
	ctx := context.Background()
	s, err := servers.StartEtcd(ctx)
	if errors.Is(err, servers.ErrMissing) {
		t.Skipf("etcd: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.URL}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &etcdRig{srv: s, url: s.URL, cli: cli, key: "lock:" + t.Name()}
}

// lock returns a new Etcd lock on the rig's lock name, closed when the test
// ends.
func (e *etcdRig) lock(t *testing.T, lease time.Duration, fenced bool) *client.Etcd {
	t.Helper()
	l, err := client.NewEtcd(context.Background(), []string{e.url}, e.key, lease, time.Millisecond, fenced)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// keys returns the keys under the lock's prefix: its holder's and its
// waiters'.
func (e *etcdRig) keys(t *testing.T) []string {
	t.Helper()
	resp, err := e.cli.Get(context.Background(), "/hiatus/"+e.key+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// expire revokes the lease of the grant g: etcd deletes the holder's key
// at once, as it does when the lease runs out because its keep-alives
// stopped (a holder's process stopped, or cut off, for longer than the
// TTL). In-process, revoking is the one honest way to have that happen:
// the test's goroutines cannot stop the lock's keep-alives.
func (e *etcdRig) expire(g client.Grant) error {
	ctx := context.Background()
	resp, err := e.cli.Get(ctx, g.Token) // the token is the holder's key
	if err != nil {
		return err
	}
	if len(resp.Kvs) != 1 {
		return fmt.Errorf("no key %s to expire", g.Token)
	}
	_, err = e.cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	return err
}

// TestEtcdMutualExclusion: while A holds the lock, B's Acquire waits —
// its key is in line, and it has not returned — and it returns only after
// A's release, with a larger fence.
func TestEtcdMutualExclusion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEtcdRig(t)
	a, b := e.lock(t, time.Second, true), e.lock(t, time.Second, true)

	ga, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// From the revision after A's key: B's key is seen however soon it
	// is put.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := e.cli.Watch(wctx, "/hiatus/"+e.key+"/", clientv3.WithPrefix(), clientv3.WithRev(ga.Fence+1))
	var released atomic.Bool // set just before A's release begins
	type result struct {
		g     client.Grant
		early bool // B had the lock before A began to release it
		err   error
	}
	got := make(chan result, 1)
	go func() {
		g, err := b.Acquire(ctx)
		got <- result{g, !released.Load(), err}
	}()
	for w := range watch { // until B's key is in line behind A's
		if len(w.Events) > 0 {
			break
		}
	}
	if keys := e.keys(t); len(keys) != 2 || keys[0] != ga.Token {
		t.Fatalf("keys %v, want A's %s then B's", keys, ga.Token)
	}
	select {
	case r := <-got:
		t.Fatalf("B acquired (%+v, %v) while A held the lock", r.g, r.err)
	default:
	}
	released.Store(true)
	if err := a.Release(ctx, ga); err != nil {
		t.Fatal(err)
	}
	r := <-got
	switch {
	case r.err != nil:
		t.Fatal(r.err)
	case r.early:
		t.Errorf("B acquired before A released")
	case r.g.Fence <= ga.Fence:
		t.Errorf("B's fence %d, not above A's %d", r.g.Fence, ga.Fence)
	}
	if err := b.Release(ctx, r.g); err != nil {
		t.Fatal(err)
	}
	if keys := e.keys(t); len(keys) != 0 {
		t.Errorf("keys %v left after both released", keys)
	}
}

// TestEtcdFences: with fencing every grant's fence is above the last one,
// whichever lock value took it; without, grants have none. Each grant
// carries the lease the server gave, at least the one asked for.
func TestEtcdFences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEtcdRig(t)
	for _, fenced := range []bool{true, false} {
		locks := []*client.Etcd{e.lock(t, time.Second, fenced), e.lock(t, time.Second, fenced)}
		var last int64
		for i := range 6 {
			l := locks[i%2]
			g, err := l.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				t.Logf("a lease of 1 s asked for, %v granted", g.Lease)
			}
			if g.Lease < time.Second || g.Lease%time.Second != 0 {
				t.Errorf("lease %v, want whole seconds, at least 1 s", g.Lease)
			}
			switch {
			case !fenced && g.Fence != 0:
				t.Errorf("unfenced grant with fence %d", g.Fence)
			case fenced && g.Fence <= last:
				t.Errorf("grant %d: fence %d, not above %d", i, g.Fence, last)
			}
			last = g.Fence
			if err := l.Release(ctx, g); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestEtcdReleaseAfterExpiry: the release of a grant whose lease ran out
// finds no key of its own, and says whether another holds the lock.
func TestEtcdReleaseAfterExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		other bool // B acquires once A's lease is gone
		want  error
	}{
		{"not-held", false, client.ErrNotHeld},
		{"stolen", true, client.ErrStolen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEtcdRig(t)
			a, b := e.lock(t, time.Second, false), e.lock(t, time.Second, false)
			ga, err := a.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.expire(ga); err != nil {
				t.Fatal(err)
			}
			if tc.other {
				if _, err := b.Acquire(ctx); err != nil { // released by b's Close
					t.Fatal(err)
				}
			}
			if err := a.Release(ctx, ga); !errors.Is(err, tc.want) {
				t.Errorf("release: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestEtcdGiveUp: an Acquire that cannot have the lock before its ctx ends
// returns ErrGaveUp, and leaves no key of its own in line behind the
// holder's.
func TestEtcdGiveUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEtcdRig(t)
	a, b := e.lock(t, time.Second, false), e.lock(t, time.Second, false)
	ga, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if g, err := b.Acquire(bctx); !errors.Is(err, client.ErrGaveUp) {
		t.Fatalf("B's acquire: %+v, %v; want ErrGaveUp", g, err)
	}
	if keys := e.keys(t); len(keys) != 1 || keys[0] != ga.Token {
		t.Errorf("keys %v after B gave up, want A's %s alone", keys, ga.Token)
	}
}

// TestEtcdAcquireOverACrash: an Acquire begun while the server is down
// gives up when its ctx ends, or waits for the server and acquires once it
// is back; the lock is then held and released as usual, and nothing is
// left.
func TestEtcdAcquireOverACrash(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newEtcdRig(t)
	l := e.lock(t, time.Second, true)
	if err := e.srv.Crash(); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if g, err := l.Acquire(short); !errors.Is(err, client.ErrGaveUp) {
		t.Fatalf("acquire while down: %+v, %v; want ErrGaveUp", g, err)
	}
	if late := time.Since(deadline(short)); late > time.Second {
		t.Errorf("acquire while down gave up %v after its ctx ended", late)
	}
	type result struct {
		g   client.Grant
		err error
	}
	got := make(chan result, 1)
	go func() {
		g, err := l.Acquire(ctx)
		got <- result{g, err}
	}()
	began := time.Now()
	if err := e.srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("acquire over a crash: %v", r.err)
	}
	t.Logf("acquired %v after the restart began", time.Since(began))
	if err := l.Release(ctx, r.g); err != nil {
		t.Errorf("release: %v", err)
	}
	if keys := e.keys(t); len(keys) != 0 {
		t.Errorf("keys %v left", keys)
	}
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// TestEtcdPausedHolder is TestLocksPausedHolder for the etcd lock. A pause
// of A's goroutine (sleep) does not stop the client's keep-alives: A keeps
// the lock past its lease, and B gives up. A pause of A's whole process
// would stop them, and after the TTL etcd would delete A's key; that is
// modelled by revoking A's lease from inside the pause (stop), which is
// what the TTL running out does: then B acquires, unfenced A's write loses
// B's update, and fenced A's write is rejected (B's key was created at a
// later revision).
func TestEtcdPausedHolder(t *testing.T) {
	t.Parallel()
	const asked = time.Second
	lease := 2 * time.Second // what etcd 3.4 grants for 1 s; checked below
	type want = pausedWant
	for _, tc := range []struct {
		fenced, stop bool
		bWait        time.Duration
		want         want
	}{
		{bWait: lease, want: want{writes: 1, final: 1, bAcquire: history.Fail}},
		{fenced: true, bWait: lease, want: want{writes: 1, final: 1, bAcquire: history.Fail}},
		{stop: true, bWait: 5 * time.Second, want: want{writes: 2, final: 1, lost: 1, overlapping: 2,
			bAcquire: history.Ok, releaseA: history.ErrExpired}},
		{fenced: true, stop: true, bWait: 5 * time.Second, want: want{writes: 1, final: 1, rejected: 1,
			overlapping: 2, bAcquire: history.Ok, releaseA: history.ErrExpired}},
	} {
		pause := "sleep"
		if tc.stop {
			pause = "stop"
		}
		t.Run(fmt.Sprintf("fenced=%v/%s", tc.fenced, pause), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r, e := newRig(t), newEtcdRig(t)
			worker := func(p history.Process, hook client.Hook) *client.Worker {
				return &client.Worker{Lock: e.lock(t, asked, tc.fenced),
					Workload: &client.Counter{DB: r.db, ID: r.id, Guard: client.GuardOf(tc.fenced)},
					Clock:    r.clock, Record: r.record, Process: p, Stride: 10, Hook: hook}
			}
			inside, resume := make(chan struct{}), make(chan struct{})
			a := worker(0, func(_ context.Context, s client.Section) {
				if s.Grant.Lease != lease {
					t.Errorf("lease %v granted for %v, want %v", s.Grant.Lease, asked, lease)
				}
				if tc.stop {
					if err := e.expire(s.Grant); err != nil {
						t.Error(err)
					}
				}
				close(inside)
				<-resume
			})
			b := worker(1, nil)

			contend(ctx, a, b, inside, resume, lease, tc.bWait)

			r.checkPaused(t, tc.want)
		})
	}
}

// TestEtcdKeepAlivesRecorded: etcd's client keeps a holder's lease alive
// on its own, and each keep-alive of a grant held is in the history: a
// :renew op of the holder's renewer, :by :library, naming the grant's
// token, answered :ok while the lease lives; once the lease is gone
// (revoked here, as when it runs out), the next is answered :fail :lost.
// Both etcd locks: the client's Mutex on a session, and the server's Lock
// RPC on a lease hiatus keeps alive through the client.
func TestEtcdKeepAlivesRecorded(t *testing.T) {
	for _, name := range []string{"etcd", "etcd-v3lock"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, r := newEtcdRig(t), newRig(t)
			l, err := client.NewLock(context.Background(), name, client.LockConfig{Redis: r.rdb, Endpoints: []string{e.url}, Key: e.key,
				FenceKey: "fence:" + r.name, Lease: time.Second, Retry: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.(io.Closer).Close() })
			isRenewal := func(o history.Op, typ history.Type) bool {
				holder, _, ok := o.Process.Renews()
				return ok && holder == 0 && o.Type == typ
			}
			var token string
			w := &client.Worker{Lock: l, Workload: &client.Counter{DB: r.db, ID: r.id}, Clock: r.clock, Record: r.record, Process: 0, Stride: 10,
				Renewals: &client.Renewals{Clock: r.clock, Record: r.record},
				Hook: func(_ context.Context, s client.Section) {
					token = s.Grant.Token
					r.await(t, func(o history.Op) bool { return isRenewal(o, history.Ok) })
					if err := e.expire(s.Grant); err != nil {
						t.Error(err)
					}
					r.await(t, func(o history.Op) bool { return isRenewal(o, history.Fail) })
				}}
			if err := w.Section(context.Background()); err != nil {
				t.Fatal(err)
			}
			var oks, lost int
			for _, o := range r.ops {
				switch {
				case !o.Process.IsRenewer():
				case o.F != history.FRenew || o.Get(history.KeyBy) != history.ByLibrary || o.Get(history.KeyToken) != token:
					t.Errorf("renewal %s: want a :renew :by :library of token %s", history.AppendOp(nil, o), token)
				case o.Type == history.Ok:
					oks++
				case o.Type == history.Fail && o.Error == history.ErrLost:
					lost++
				}
			}
			if oks == 0 || lost != 1 {
				t.Errorf("keep-alives: %d ok, %d lost; want some ok, then one lost", oks, lost)
			}
			if _, err := history.Pairs(r.history(t)); err != nil {
				t.Errorf("the history does not pair: %v", err)
			}
		})
	}
}
