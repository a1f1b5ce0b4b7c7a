package client_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hiatus-dev/hiatus/client"
)

// TestEtcdWaiterLeaseLapse is etcd-io/etcd#11456's order of events, fixed
// by the test: A holds the lock; B waits for it, its key in line behind
// A's; B's lease runs out while it waits (revoked here, as the TTL running
// out would do it: etcd deletes B's key); C lines up behind A; A releases,
// and C holds the lock.
//
// etcd's Mutex (client v3.7.3, the etcd lock) reads B's key once A's is
// gone, finds it gone too, and returns ErrSessionExpired: B's Acquire takes
// a new lease and waits behind C. The Lock RPC of a 3.4 server (the
// etcd-v3lock lock), whose Mutex is 3.4's, does not read it: it answers B
// that it holds the lock, with a key etcd deleted, while C holds it. From
// 3.5 on the server's Mutex reads it too; the test asks the server its
// version and wants the fixed behaviour of the Lock RPC there.
func TestEtcdWaiterLeaseLapse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newEtcdRig(t)
	st, err := e.cli.Status(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	fixedServer := versionAtLeast(st.Version, 3, 5)
	for _, tc := range []struct {
		lock   string
		double bool // B is granted the lock while C holds it
	}{
		{"etcd", false},
		{"etcd-v3lock", !fixedServer},
	} {
		t.Run(tc.lock, func(t *testing.T) {
			e := *e
			e.key += "/" + tc.lock
			lock := func() client.Lock {
				l, err := client.NewLock(ctx, tc.lock, client.LockConfig{Endpoints: []string{e.url}, Key: e.key,
					Lease: time.Second, Retry: time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.(interface{ Close() error }).Close() })
				return l
			}
			a, b, c := lock(), lock(), lock()
			type result struct {
				g   client.Grant
				err error
			}
			acquire := func(l client.Lock) chan result {
				got := make(chan result, 1)
				go func() {
					g, err := l.Acquire(ctx)
					got <- result{g, err}
				}()
				return got
			}

			ga, err := a.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gotB := acquire(b)
			keys := e.awaitKeys(ctx, t, func(k []string) bool { return len(k) == 2 })
			bKey := keys[1]
			if err := e.revokeKey(ctx, bKey); err != nil {
				t.Fatal(err)
			}
			gotC := acquire(c)
			e.awaitKeys(ctx, t, func(k []string) bool { return len(k) == 2 && k[1] != bKey })
			select {
			case r := <-gotB:
				t.Fatalf("B's acquire returned (%+v, %v) while A held the lock", r.g, r.err)
			case r := <-gotC:
				t.Fatalf("C's acquire returned (%+v, %v) while A held the lock", r.g, r.err)
			default:
			}
			if err := a.Release(ctx, ga); err != nil {
				t.Fatal(err)
			}
			rc := <-gotC
			if rc.err != nil {
				t.Fatalf("C's acquire: %v", rc.err)
			}
			// B is either granted (its Acquire returns) or in line again,
			// behind C, under a new lease.
			var rb result
			granted := func() bool {
				for {
					select {
					case rb = <-gotB:
						return true
					case <-time.After(time.Millisecond):
						if k := e.keys(t); len(k) == 2 && k[0] == rc.g.Token && k[1] != bKey {
							t.Logf("B is in line behind C, with key %s", k[1])
							return false
						}
					case <-ctx.Done():
						t.Fatal("B neither granted nor in line behind C")
					}
				}
			}()
			if granted {
				if rb.err != nil {
					t.Fatalf("B's acquire: %v", rb.err)
				}
				t.Logf("B granted with key %s while C holds the lock with key %s; the keys: %v", rb.g.Token, rc.g.Token, e.keys(t))
			}
			if granted != tc.double {
				t.Errorf("B granted while C holds the lock: %v, want %v (server %s)", granted, tc.double, st.Version)
			}
			if granted {
				if err := b.Release(ctx, rb.g); !errors.Is(err, client.ErrStolen) {
					t.Errorf("B's release: %v, want ErrStolen", err)
				}
			}
			if err := c.Release(ctx, rc.g); err != nil {
				t.Fatal(err)
			}
			if !granted {
				rb = <-gotB
				if rb.err != nil {
					t.Fatalf("B's acquire after C's release: %v", rb.err)
				}
				if err := b.Release(ctx, rb.g); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// awaitKeys polls the keys under the lock's prefix until ok says they are
// what the test waits for, and returns them.
func (e *etcdRig) awaitKeys(ctx context.Context, t *testing.T, ok func([]string) bool) []string {
	t.Helper()
	for {
		if k := e.keys(t); ok(k) {
			return k
		}
		select {
		case <-ctx.Done():
			t.Fatalf("keys %v: not what the test waits for", e.keys(t))
		case <-time.After(time.Millisecond):
		}
	}
}

// revokeKey revokes the lease key is attached to: etcd deletes the key at
// once, as it does when the lease runs out.
func (e *etcdRig) revokeKey(ctx context.Context, key string) error {
	resp, err := e.cli.Get(ctx, key)
	if err != nil {
		return err
	}
	if len(resp.Kvs) != 1 {
		return errors.New("no key " + key)
	}
	_, err = e.cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	return err
}

// versionAtLeast reports whether the version v ("3.4.23") is at least
// major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// TestEtcdLockRPC is, for the Lock RPC, what lock_etcd_test.go asks of the
// etcd lock: while A holds the lock B waits, and acquires once A releases;
// an Acquire given up leaves no key in line; the release of a grant whose
// lease ran out says whether another holds the lock; nothing is left.
func TestEtcdLockRPC(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newEtcdRig(t)
	lock := func() client.Lock {
		l, err := client.NewLock(ctx, "etcd-v3lock", client.LockConfig{Endpoints: []string{e.url}, Key: e.key,
			Lease: time.Second, Retry: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.(interface{ Close() error }).Close() })
		return l
	}
	a, b := lock(), lock()

	ga, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ga.Lease != 2*time.Second || ga.Fence != 0 {
		t.Errorf("grant %+v: want etcd 3.4's 2 s lease for 1 s, unfenced", ga)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if g, err := b.Acquire(short); !errors.Is(err, client.ErrGaveUp) {
		t.Fatalf("B's acquire while A holds: %+v, %v; want ErrGaveUp", g, err)
	}
	if keys := e.keys(t); len(keys) != 1 || keys[0] != ga.Token {
		t.Errorf("keys %v after B gave up, want A's %s alone", keys, ga.Token)
	}
	got := make(chan error, 1)
	var gb client.Grant
	go func() {
		var err error
		gb, err = b.Acquire(ctx)
		got <- err
	}()
	e.awaitKeys(ctx, t, func(k []string) bool { return len(k) == 2 })
	select {
	case err := <-got:
		t.Fatalf("B acquired (%v) while A held the lock", err)
	default:
	}
	if err := a.Release(ctx, ga); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := e.revokeKey(ctx, gb.Token); err != nil { // B's lease runs out
		t.Fatal(err)
	}
	if err := b.Release(ctx, gb); !errors.Is(err, client.ErrNotHeld) {
		t.Errorf("B's release after its lease ran out: %v, want ErrNotHeld", err)
	}
	ga, err = a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.revokeKey(ctx, ga.Token); err != nil {
		t.Fatal(err)
	}
	if gb, err = b.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, ga); !errors.Is(err, client.ErrStolen) {
		t.Errorf("A's release after its lease ran out and B acquired: %v, want ErrStolen", err)
	}
	if err := b.Release(ctx, gb); err != nil {
		t.Fatal(err)
	}
	if keys := e.keys(t); len(keys) != 0 {
		t.Errorf("keys %v left", keys)
	}
}
