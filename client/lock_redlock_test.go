package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/redis/go-redis/v9"
)

// redlockNodes starts n throwaway Redis nodes and returns clients of them.
func redlockNodes(t *testing.T, n int) []*redis.Client {
	t.Helper()
	var out []*redis.Client
	for range n {
		s, err := servers.StartRedis(context.Background())
		if err != nil {
			t.Fatalf("a redlock node: %v", err)
		}
		t.Cleanup(func() { s.Stop() })
		opt, err := redis.ParseURL(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		opt.MaxRetries = -1
		c := redis.NewClient(opt)
		t.Cleanup(func() { c.Close() })
		out = append(out, c)
	}
	return out
}

// redlockWorker is a worker of the redlock over nodes.
func (r *rig) redlockWorker(t *testing.T, p history.Process, nodes []*redis.Client, lease time.Duration, fenced bool, hook client.Hook) *client.Worker {
	t.Helper()
	l, err := client.NewLock(context.Background(), "redlock", client.LockConfig{Redis: r.rdb, Nodes: nodes, Key: "lock:" + r.name,
		FenceKey: "fence:" + r.name, Lease: lease, Retry: time.Millisecond, Fenced: fenced})
	if err != nil {
		t.Fatal(err)
	}
	return &client.Worker{Lock: l, Workload: &client.Counter{DB: r.db, ID: r.id, Guard: client.GuardOf(fenced)},
		Clock: r.clock, Record: r.record, Process: p, Stride: 10, Hook: hook}
}

// TestRedlock: over 3 nodes, three workers with a long lease never overlap;
// a holder paused past its lease loses its update (or, fenced, its write),
// as every lease lock does; and redlock without its nodes is refused.
func TestRedlock(t *testing.T) {
	if _, err := client.NewLock(context.Background(), "redlock", client.LockConfig{}); err == nil {
		t.Error("redlock without nodes: no error")
	}
	nodes := redlockNodes(t, 3)
	t.Run("exclusion", func(t *testing.T) {
		r := newRig(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for p := range 3 {
			w := r.redlockWorker(t, history.Process(p), nodes, 5*time.Second, true, nil)
			w.Work = 2 * time.Millisecond
			wg.Add(1)
			go func() { defer wg.Done(); w.Run(ctx) }()
		}
		wg.Wait()
		res := checker.LockCounter(r.history(t), 0)
		f, _ := res.LockFigures()
		if res.Valid != checker.Valid || f.LockOverlapping != 0 || f.Writes == 0 {
			t.Errorf("valid %v, lock-overlapping %d, writes %d; want valid, 0, some:\n%s", res.Valid, f.LockOverlapping, f.Writes, res.Explanation)
		}
	})
	const lease = 200 * time.Millisecond
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("paused/fenced=%v", fenced), func(t *testing.T) {
			r := newRig(t)
			inside, resume := make(chan struct{}), make(chan struct{})
			a := r.redlockWorker(t, 0, nodes, lease, fenced, func(context.Context, client.Section) { close(inside); <-resume })
			b := r.redlockWorker(t, 1, nodes, lease, fenced, nil)
			contend(context.Background(), a, b, inside, resume, lease, 5*time.Second)
			f, _ := checker.LockCounter(r.history(t), 0).LockFigures()
			lost, rejected := int64(1), int64(0)
			if fenced {
				lost, rejected = 0, 1
			}
			if f.LostMin != lost || f.StaleRejected != rejected || f.LockOverlapping != 2 {
				t.Errorf("lost %d, stale-rejected %d, lock-overlapping %d; want %d, %d, 2", f.LostMin, f.StaleRejected, f.LockOverlapping, lost, rejected)
			}
		})
	}
}
