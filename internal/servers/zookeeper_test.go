package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestZooKeeperEnsemble starts a three-server ensemble, checks that it
// elected one leader, writes a znode, crashes and restarts a follower and
// then the leader, and checks that the znode survived and the ensemble
// serves again; after Stop no process and no directory is left.
func TestZooKeeperEnsemble(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	z, err := StartZooKeeper(ctx, 3)
	if errors.Is(err, ErrMissing) {
		t.Skipf("zookeeper: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer z.Stop()
	t.Logf("StartZooKeeper(3) took %v", time.Since(began))
	leader := zooLeader(ctx, t, z)

	c, _, err := zk.Connect(z.Addrs(), 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create("/kept", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create: %v", err)
	}
	for _, i := range []int{(leader + 1) % 3, leader} {
		s := z.Servers[i]
		old := s.ProcessID()
		if err := s.Crash(); err != nil {
			t.Fatal(err)
		}
		began = time.Now()
		if err := s.Restart(ctx); err != nil {
			t.Fatalf("restart server %d: %v", i, err)
		}
		t.Logf("restart of server %d took %v", i, time.Since(began))
		if s.ProcessID() == old {
			t.Errorf("server %d: same pid %d after a restart", i, old)
		}
		b, _, err := c.Get("/kept")
		if err != nil || string(b) != "v" {
			t.Errorf("get /kept after server %d's crash: %q, %v; want v (ZooKeeper keeps its data)", i, b, err)
		}
	}
	zooLeader(ctx, t, z)

	logs := t.TempDir()
	z.KeepLogs(logs)
	var dirs []string
	var pids []int
	for _, s := range z.Servers {
		dirs, pids = append(dirs, s.dir), append(pids, s.ProcessID())
	}
	if err := z.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	for i := range dirs {
		if _, err := os.Stat(dirs[i]); !os.IsNotExist(err) {
			t.Errorf("%s still there after Stop (%v)", dirs[i], err)
		}
		if err := syscall.Kill(pids[i], 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still there after Stop (%v)", pids[i], err)
		}
		// The server logs through slf4j-simple: without a binding it
		// would log nothing, and a run's zookeeper logs would be empty.
		b, err := os.ReadFile(filepath.Join(logs, fmt.Sprintf("zookeeper-%d.log", i)))
		if err != nil || !strings.Contains(string(b), "QuorumPeer") {
			t.Errorf("server %d's log kept: %d bytes, %v; want its QuorumPeer's lines", i, len(b), err)
		}
	}
}

// zooLeader returns the ensemble's leader, failing t unless exactly one
// server leads and the others follow.
func zooLeader(ctx context.Context, t *testing.T, z *ZooKeeper) int {
	t.Helper()
	var modes []string
	for _, s := range z.Servers {
		m, err := ZooKeeperMode(ctx, s.Addr)
		if err != nil {
			t.Fatalf("srvr %s: %v", s.Addr, err)
		}
		modes = append(modes, m)
	}
	sorted := slices.Sorted(slices.Values(modes))
	if !slices.Equal(sorted, []string{"follower", "follower", "leader"}) {
		t.Fatalf("modes %v, want a leader and two followers", modes)
	}
	return slices.Index(modes, "leader")
}

// quiet is a zk.Logger that says nothing: the client logs each reconnect.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
