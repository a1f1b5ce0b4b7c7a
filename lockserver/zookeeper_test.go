package lockserver

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

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
	zk, err := servers.StartZooKeeper(ctx, 1)
	if err != nil {
		t.Fatalf("ZooKeeper: %v", err)
	}
	t.Cleanup(func() { zk.Stop() })
	rs := startRedis(t, servers.RedisOptions{})
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
	evs := recordZooKeeper(t, rs.URL, zk.Addrs(), client.ZooKeeperPath(name), func() {
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

// recordZooKeeper runs fn under a Recorder of the ZooKeeper lock whose
// znode is key, on the ensemble at servers, the history's clock the Redis at
// clockURL, and returns the record.
func recordZooKeeper(t *testing.T, clockURL string, servers []string, key string, fn func()) []history.ServerEvent {
	t.Helper()
	evs, _ := recordWith(t, clockURL, Config{Mode: ModeFull, Key: key, ZooKeeper: &ZooKeeperNode{Name: "zk-0", Servers: servers}}, fn)
	return evs
}
