package lockserver

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
)

// A zkGrant is a grant a worker's ZooKeeper lock was given, as it saw it.
type zkGrant struct {
	token, worker string
	fence         int64
}

// TestZooKeeperRecord: on a real ZooKeeper, workers contending for
// ZooKeeper's lock recipe (go-zookeeper's Lock, as hiatus's zookeeper lock
// uses it), each on sessions of its own that it names, are recorded as
// the server's acts: every grant a worker was told of is in the record, in
// the order the workers held the lock, to the worker, with the znode's
// czxid as its fence; every release is its worker's delete. A holder
// stopped past its session's timeout (its lock frozen, as a SIGSTOPped
// process's) has its znode deleted by the server: an expiry, and the next
// holder's grant. Each grant says the servers' tick (:expiry-grain), which
// a session may outlive its timeout by.
func TestZooKeeperRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zk, rs := startZooKeeper(ctx, t)
	const name, workers, rounds = "hiatus:lock:zk-record", 3, 8
	// Sessions long enough that a loaded machine's late pings do not let
	// a worker's expire: the frozen holder's alone does.
	const lease = 2 * time.Second
	kind, _ := client.LockKindOf("zookeeper", nil)
	locks := make([]client.Lock, workers)
	for i := range locks {
		l, err := kind.New(ctx, client.LockConfig{Endpoints: zk.Addrs(), Key: name, Lease: lease, Fenced: true,
			ClientName: fmt.Sprintf("worker-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := l.(interface{ Close() error }); ok {
			defer c.Close()
		}
		locks[i] = l
	}
	var (
		mu     sync.Mutex
		told   []zkGrant // in the order they were held
		frozen string    // the expired holder's token
	)
	take := func(i int) client.Grant {
		g, err := locks[i].Acquire(ctx)
		if err != nil {
			t.Errorf("worker-%d: acquire: %v", i, err)
			return g
		}
		mu.Lock()
		told = append(told, zkGrant{g.Token, fmt.Sprintf("worker-%d", i), g.Fence})
		mu.Unlock()
		return g
	}
	evs := recordZooKeeper(t, rs.URL, zk, client.ZooKeeperPath(name), func() {
		var wg sync.WaitGroup
		for i := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					// Released at once: the shortest holds there are.
					if g := take(i); g.Token != "" {
						if err := locks[i].Release(ctx, g); err != nil {
							t.Errorf("worker-%d: release: %v", i, err)
						}
					}
				}
			}()
		}
		wg.Wait()
		// worker-0 holds and stops; worker-1's acquire returns once the
		// server has expired worker-0's session.
		a := take(0)
		frozen = a.Token
		thaw := locks[0].(client.Freezer).Freeze()
		b := take(1)
		thaw()
		if err := locks[0].Release(ctx, a); err == nil {
			t.Errorf("worker-0's release after its session expired: ok, want its grant lost")
		}
		if err := locks[1].Release(ctx, b); err != nil {
			t.Errorf("worker-1: release: %v", err)
		}
	})
	if t.Failed() {
		return
	}
	var grants []zkGrant
	fences := map[string]int64{}
	var acts []history.Keyword
	for _, e := range evs {
		switch e.Act {
		case history.SGrant:
			grants = append(grants, zkGrant{token: e.Token, worker: e.Client})
			if e.ExpiryGrain != int64(servers.ZooKeeperTick) {
				t.Errorf("%s's grant says :expiry-grain %v, want the servers' tick, %v (conf)", e.Token, time.Duration(e.ExpiryGrain), servers.ZooKeeperTick)
			}
		case history.SFence:
			fences[e.Token] = e.Fence
		case history.SDelete, history.SExpire:
			acts = append(acts, e.Act)
			if want := e.Token == frozen; (e.Act == history.SExpire) != want {
				t.Errorf("%s's end: %s (%s), want an expiry only for the frozen holder's", e.Token, e.Act, e.Command)
			}
		}
	}
	for i := range grants {
		grants[i].fence = fences[grants[i].token]
	}
	if !slices.Equal(grants, told) {
		t.Errorf("the record's grants:\n%+v\nthe workers were told:\n%+v", grants, told)
	}
	if len(acts) != len(told) {
		t.Errorf("%d holders' znodes deleted or expired, want every one of the %d", len(acts), len(told))
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Time < evs[i-1].Time {
			t.Errorf("event %d at %d before event %d at %d", i, evs[i].Time, i-1, evs[i-1].Time)
		}
	}
}

// startZooKeeper starts a one-server ensemble and a Redis for the
// history's clock, both stopped when t ends.
func startZooKeeper(ctx context.Context, t *testing.T) (*servers.ZooKeeper, *servers.Server) {
	t.Helper()
	zk, err := servers.StartZooKeeper(ctx, 1)
	if err != nil {
		t.Fatalf("ZooKeeper: %v", err)
	}
	t.Cleanup(func() { zk.Stop() })
	return zk, startRedis(t, servers.RedisOptions{})
}

// recordZooKeeper runs fn under a Recorder of the ZooKeeper lock whose
// znode is key, on the ensemble zk (whose logs say the sessions it
// expired), the history's clock the Redis at clockURL, and returns the
// record.
func recordZooKeeper(t *testing.T, clockURL string, zk *servers.ZooKeeper, key string, fn func()) []history.ServerEvent {
	t.Helper()
	evs, _ := recordWith(t, clockURL, Config{Mode: ModeFull, Key: key, ZooKeeper: &ZooKeeperNode{Name: "zk-0", Servers: zk.Addrs(), Expired: zk.SessionExpired}}, fn)
	return evs
}

// TestZooKeeperExpiryNamed: a session that expired elsewhere — a frozen
// holder of another key, with no znode in this line — is not taken for
// this line's holder's, whose session closed (the close deletes its
// znode and its name in one transaction, so the record finds its name
// gone). The servers count expiries without naming them, and the count
// that rose was the other session's: under partition-redis on a 3-server
// ensemble the record said a released holder's session expired in 2 of
// 5 runs, where each server's log named another. The log names it.
func TestZooKeeperExpiryNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zk, rs := startZooKeeper(ctx, t)
	kind, _ := client.LockKindOf("zookeeper", nil)
	lock := func(key, name string, lease time.Duration) client.Lock {
		l, err := kind.New(ctx, client.LockConfig{Endpoints: zk.Addrs(), Key: key, Lease: lease, ClientName: name})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	const key = "hiatus:lock:zk-expiry-named"
	holder := lock(key, "worker-0", 10*time.Second)
	other := lock(key+"-other", "worker-1", time.Second) // the ZooKeeper tick's 2 at the least
	evs := recordZooKeeper(t, rs.URL, zk, client.ZooKeeperPath(key), func() {
		if _, err := holder.Acquire(ctx); err != nil {
			t.Fatalf("holder: %v", err)
		}
		g, err := other.Acquire(ctx)
		if err != nil {
			t.Fatalf("the other key's holder: %v", err)
		}
		thaw := other.(client.Freezer).Freeze()
		defer thaw()
		// Its znode goes when the server expires its session.
		if err := waitGone(ctx, zk.Addrs(), g.Token); err != nil {
			t.Fatal(err)
		}
		holder.(interface{ Close() error }).Close() // the session's close deletes the holder's znode
	})
	var ends []history.Keyword
	for _, e := range evs {
		if e.Act == history.SDelete || e.Act == history.SExpire {
			ends = append(ends, e.Act)
		}
	}
	if !slices.Equal(ends, []history.Keyword{history.SDelete}) {
		t.Errorf("the holder's end: %v, want one :delete (its session closed; another expired): %+v", ends, evs)
	}
}

// waitGone waits until the znode at path is gone.
func waitGone(ctx context.Context, addrs []string, path string) error {
	c, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		ok, _, ch, err := c.ExistsW(path)
		if err != nil || !ok {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%s still there: %w", path, ctx.Err())
		}
	}
}
