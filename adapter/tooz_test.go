package adapter_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/internal/servers"
)

// TestToozEtcd3gwHeartbeatAfterExpiry is the order of events of the
// tooz-etcd3gw-heartbeat finding (docs/findings.md), fixed: a holder's
// whole process (its heart too) is stopped until etcd has expired its
// lease and deleted its key, then it asks its lock whether it still holds
// it, as a careful user does before a write. tooz's etcd3gw driver says
// yes (heartbeat() drops refresh()'s -1); etcd3gw's own Lock, which it
// wraps, says no (refresh() returns -1). It pins the bug: when Debian
// ships a tooz that heeds the -1, its "tooz" case fails, and the finding
// is to be measured again (docs/findings.md).
func TestToozEtcd3gwHeartbeatAfterExpiry(t *testing.T) {
	dir, err := filepath.Abs("../adapters/python")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command, key string
		want               string // the renew's answer
	}{
		{"tooz", filepath.Join(dir, "tooz_lock.py") + " etcd3gw --careful", "/tooz/locksexpiry", "ok"},
		{"etcd3gw", filepath.Join(dir, "etcd3gw_lock.py") + " --careful", "/locks/expiry", "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e, err := servers.StartEtcd(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Stop() })
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.URL}, Logger: zap.NewNop(), DialTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cli.Close() })
			// tooz's imports alone took more than HelloTimeout (10 s)
			// beside two CPU burners.
			p, err := adapter.Start(ctx, tc.command, adapter.Setup{Etcd: []string{e.URL}, Lock: "expiry", Lease: time.Second, Retry: 5 * time.Millisecond,
				Hello: 30 * time.Second}, os.Stderr)
			if err != nil {
				t.Fatalf("%v (scripts/setup --tests installs python3-tooz and python3-etcd3gw)", err)
			}
			t.Cleanup(p.Close)
			a, err := p.Request(ctx, adapter.Request{Type: "acquire", Lock: "expiry", LeaseMS: 1000, WaitMS: 5000}, 20*time.Second)
			if err != nil || a.Type != "ok" {
				t.Fatalf("acquire: %+v, %v: want ok", a, err)
			}
			if err := syscall.Kill(p.PID(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := true
			defer func() {
				if stopped {
					syscall.Kill(p.PID(), syscall.SIGCONT)
				}
			}()
			gone := func() bool {
				r, err := cli.Get(ctx, tc.key)
				if err != nil {
					t.Fatal(err)
				}
				return r.Count == 0
			}
			if gone() {
				t.Fatalf("key %s is not the lock's: nothing there while it is held", tc.key)
			}
			deadline := time.Now().Add(30 * time.Second)
			for !gone() { // etcd expires the lease and deletes its key
				if time.Now().After(deadline) {
					t.Fatalf("key %s outlived its lease", tc.key)
				}
				time.Sleep(10 * time.Millisecond)
			}
			syscall.Kill(p.PID(), syscall.SIGCONT)
			stopped = false
			r, err := p.Request(ctx, adapter.Request{Type: "renew", Lock: "expiry", Token: a.Token, LeaseMS: 1000}, 20*time.Second)
			if err != nil || r.Type != tc.want {
				t.Errorf("renew after the lease expired: %+v, %v: want %s", r, err, tc.want)
			}
		})
	}
}
