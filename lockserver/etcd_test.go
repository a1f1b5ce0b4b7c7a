package lockserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestEtcdRecord: on a real etcd-server, the line of an etcd lock — keys
// under its prefix, each on a lease its worker named — reads as the
// server's acts: the first key granted (and its revision handed out as its
// fence), one behind it refused; the holder's key deleted while its lease
// lives is its worker's delete and grants the next; a holder's lease
// revoked is a delete too; one left to run out is an expiry, as etcd's own
// count of expired leases says, and neither a waiter's that ran out behind
// a holder nor another lease's, counted before the holder's revoke, makes
// that revoke an expiry (etcd counts an expiry after its revoke applies,
// and the watch may deliver the revoke first).
func TestEtcdRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	etcd, err := servers.StartEtcd(ctx)
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	t.Cleanup(func() { etcd.Stop() })
	rs := startRedis(t, servers.RedisOptions{})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.URL}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const name = "hiatus:lock:etcd-record"
	prefix := client.EtcdPrefix(name)
	// hold puts a key of the line on a lease of ttl seconds named worker.
	hold := func(worker string, ttl int64) (string, clientv3.LeaseID) {
		l, err := cli.Grant(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, client.EtcdClientKey(name, int64(l.ID)), worker, clientv3.WithLease(l.ID)); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s/%x", prefix, int64(l.ID))
		if _, err := cli.Put(ctx, key, "", clientv3.WithLease(l.ID)); err != nil {
			t.Fatal(err)
		}
		return key, l.ID
	}
	var a, b, c, d string
	evs := recordEtcd(t, rs.URL, etcd.URL, prefix, func() {
		var lb clientv3.LeaseID
		a, _ = hold("worker-0", 60)
		b, lb = hold("worker-1", 60)
		if _, err := cli.Delete(ctx, a); err != nil { // the holder's unlock
			t.Fatal(err)
		}
		if _, err := cli.Revoke(ctx, lb); err != nil { // the next holder's lease revoked
			t.Fatal(err)
		}
		c, _ = hold("worker-2", 1) // left to run out: etcd 3.4 makes it 2 s at the least
		// Until etcd has revoked it, and its key with it.
		for {
			resp, err := cli.Get(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		// A waiter's lease runs out behind a holder, whose lease is then
		// revoked: a delete, not an expiry (etcd's count rose for the
		// waiter's).
		var ld clientv3.LeaseID
		d, ld = hold("worker-3", 60)
		e, _ := hold("worker-4", 1)
		for {
			resp, err := cli.Get(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		// A lease of no key of the line runs out, and is counted.
		counted := &etcdSource{metrics: etcd.URL + "/metrics", hc: &http.Client{Timeout: time.Second}}
		before, err := counted.expiredLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		other, err := cli.Grant(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, "hiatus:other", "", clientv3.WithLease(other.ID)); err != nil {
			t.Fatal(err)
		}
		for n := before; n == before; time.Sleep(100 * time.Millisecond) {
			if n, err = counted.expiredLeases(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cli.Revoke(ctx, ld); err != nil {
			t.Fatal(err)
		}
	})
	type act struct {
		act           history.Keyword
		token, client string
	}
	var got []act
	for _, e := range evs {
		if e.Act != history.SFence {
			got = append(got, act{e.Act, e.Token, e.Client})
		}
	}
	want := []act{
		{history.SGrant, a, "worker-0"}, {history.SRefuse, a, "worker-1"},
		{history.SDelete, a, "worker-0"}, {history.SGrant, b, "worker-1"},
		{history.SDelete, b, "worker-1"},
		{history.SGrant, c, "worker-2"}, {history.SExpire, c, ""},
		{history.SGrant, d, "worker-3"}, {history.SRefuse, d, "worker-4"}, {history.SDelete, d, "worker-3"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("the record:\n%+v\nwant\n%+v", got, want)
	}
	fences := 0
	for _, e := range evs {
		if e.Act == history.SFence && e.Fence > 0 {
			fences++
		}
	}
	if fences != 4 {
		t.Errorf("%d fences handed out, want one a grant (4)", fences)
	}
}

// recordEtcd runs fn under a Recorder of the etcd lock at prefix, the
// history's clock the Redis at clockURL, and returns the record.
func recordEtcd(t *testing.T, clockURL, etcdURL, prefix string, fn func()) []history.ServerEvent {
	t.Helper()
	evs, _ := recordWith(t, clockURL, Config{Mode: ModeFull, Key: prefix, Etcd: &EtcdNode{Name: "etcd-0", Endpoints: []string{etcdURL}}}, fn)
	return evs
}
