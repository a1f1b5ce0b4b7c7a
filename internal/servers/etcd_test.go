package servers

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestEtcdThrowaway starts etcd, writes a key and a key under a lease,
// crashes and restarts the server in place, and checks that both survived
// (etcd is durable); after Stop no process and no directory is left.
func TestEtcdThrowaway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	s, err := StartEtcd(ctx)
	if errors.Is(err, ErrMissing) {
		t.Skipf("etcd: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	t.Logf("StartEtcd took %v", time.Since(began))

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.URL}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	if _, err := cli.Put(ctx, "leased", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatalf("put with a lease: %v", err)
	}

	old := s.ProcessID()
	if err := s.Crash(); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Logf("Restart took %v", time.Since(began))
	if s.ProcessID() == old {
		t.Errorf("same pid %d after a restart", old)
	}
	for _, key := range []string{"k", "leased"} {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			t.Fatalf("get %s after a crash: %v", key, err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
			t.Errorf("get %s after a crash: %v, want v (etcd keeps its data)", key, resp.Kvs)
		}
	}
	ttl, err := cli.TimeToLive(ctx, lease.ID)
	t.Logf("lease of 60 s after the restart: TTL %d s left", ttl.TTL)
	if err != nil || ttl.TTL <= 0 {
		t.Errorf("lease after a crash: %v, %v; want it still there", ttl, err)
	}

	dir, pid := s.dir, s.ProcessID()
	if err := s.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after Stop (%v)", dir, err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d still there after Stop (%v)", pid, err)
	}
}
