package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/internal/servers"
)

// TestZooKeeper runs the ZooKeeper lock's checks on one throwaway server:
// a JVM's start is the most of their time, so they share it, each on a lock
// of its own.
func TestZooKeeper(t *testing.T) {
	z, err := servers.StartZooKeeper(context.Background(), 1)
	if errors.Is(err, servers.ErrMissing) {
		t.Skipf("zookeeper: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { z.Stop() })
	look, _, err := zk.Connect(z.Addrs(), 10*time.Second, zk.WithLogger(zkQuiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(look.Close)
	r := &zkRig{addrs: z.Addrs(), look: look}
	t.Run("exclusion", r.exclusion)
	t.Run("fence", r.fence)
	t.Run("expiry", r.expiry)
}

// A zkRig is the test's server, and a session of its own to look at and
// tamper with the locks' znodes.
type zkRig struct {
	addrs []string
	look  *zk.Conn
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// lock returns a new ZooKeeper lock named after t, closed when t ends.
func (r *zkRig) lock(t *testing.T, lease time.Duration, fenced bool) *client.ZooKeeper {
	t.Helper()
	l, err := client.NewZooKeeper(context.Background(), r.addrs, "lock:"+t.Name(), lease, time.Millisecond, fenced)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// children are the znodes under the lock named after t.
func (r *zkRig) children(t *testing.T) []string {
	t.Helper()
	c, _, err := r.look.Children(client.ZooKeeperPath("lock:" + t.Name()))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	return c
}

// exclusion: while A holds the lock B cannot take it, and B's try given
// up leaves no znode; once A releases, B takes it.
func (r *zkRig) exclusion(t *testing.T) {
	ctx := context.Background()
	a, b := r.lock(t, 10*time.Second, false), r.lock(t, 10*time.Second, false)
	ga, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ga.Token, client.ZooKeeperPath("lock:"+t.Name())+"/") {
		t.Errorf("grant's token %q is not a znode of the lock's path", ga.Token)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.Acquire(short)
	cancel()
	if err == nil {
		t.Fatal("B acquired while A held the lock")
	}
	if c := r.children(t); len(c) != 1 {
		t.Errorf("after B gave up the lock's path holds %v, want A's znode alone", c)
	}
	if err := a.Release(ctx, ga); err != nil {
		t.Fatalf("A's release: %v", err)
	}
	gb, err := b.Acquire(ctx)
	if err != nil {
		t.Fatalf("B after A's release: %v", err)
	}
	if err := b.Release(ctx, gb); err != nil {
		t.Fatalf("B's release: %v", err)
	}
}

// fence: the fence is the znode's czxid, which rises from holder to holder
// even when the lock's path is deleted and made anew (as a clean-up of empty
// lock paths does), where the sequence number starts again from 0: the
// sequence number is no fence.
func (r *zkRig) fence(t *testing.T) {
	ctx := context.Background()
	l := r.lock(t, 10*time.Second, true)
	var fences []int64
	var seqs []string
	for i := range 3 {
		if i == 2 {
			if err := r.look.Delete(client.ZooKeeperPath("lock:"+t.Name()), -1); err != nil {
				t.Fatalf("delete the empty lock path: %v", err)
			}
		}
		g, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fences, seqs = append(fences, g.Fence), append(seqs, g.Token[strings.LastIndex(g.Token, "lock-")+len("lock-"):])
		if err := l.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("fences (czxid) %v; sequence numbers %v", fences, seqs)
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("fence %d is %d, not above %d before it: %v", i, fences[i], fences[i-1], fences)
		}
	}
	if seqs[2] >= seqs[1] {
		t.Errorf("the sequence number after the path was made anew is %s, not below %s: the test shows nothing", seqs[2], seqs[1])
	}
}

// expiry: a holder frozen past its session timeout (no pings, as in a
// stopped process) loses its znode when the server expires the session;
// the next waiter is granted, with a higher fence; the old holder, thawed,
// finds its grant stolen at its release, and B's release then finds it held.
func (r *zkRig) expiry(t *testing.T) {
	ctx := context.Background()
	const session = 400 * time.Millisecond
	a, b := r.lock(t, session, true), r.lock(t, session, true)
	ga, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	thaw := a.Freeze()
	began := time.Now()
	// Bounded, so that a freeze that stopped nothing fails the test
	// rather than hanging it: a session expires within a tick of its
	// timeout, and a waiter is told at once.
	bounded, cancel := context.WithTimeout(ctx, 50*session)
	defer cancel()
	gb, err := b.Acquire(bounded)
	took := time.Since(began)
	thaw()
	if err != nil {
		t.Fatalf("B while A was frozen: %v", err)
	}
	t.Logf("B granted %v after A froze (session timeout %v)", took, session)
	if took < session {
		t.Errorf("B granted %v after A froze, within A's session timeout %v", took, session)
	}
	if gb.Fence <= ga.Fence {
		t.Errorf("B's fence %d is not above A's %d", gb.Fence, ga.Fence)
	}
	if err := a.Release(ctx, ga); !errors.Is(err, client.ErrStolen) {
		t.Errorf("A's release after its session expired: %v, want ErrStolen", err)
	}
	if err := b.Release(ctx, gb); err != nil {
		t.Errorf("B's release: %v", err)
	}
}
