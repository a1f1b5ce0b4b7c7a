package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/redis/go-redis/v9"
)

// TestRedlockRestartAtBareMajority is Kleppmann's Redlock restart with its
// order fixed by the test: holder A reaches 3 of the 5 nodes (the other 2
// refuse its connections) and takes the lock on them, a bare majority;
// one of the 3 crashes and restarts; B, which reaches all 5, asks for the
// lock. A node that kept nothing grants it to B with the 2 A never had: two
// holders (go-redsync/redsync#186). One that fsynced every write
// (antirez's appendfsync always) comes back with A's key, and B is refused.
func TestRedlockRestartAtBareMajority(t *testing.T) {
	for _, aof := range []bool{false, true} {
		t.Run(fmt.Sprintf("aof=%v", aof), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var all, cut []*redis.Client
			var crashed *servers.Server
			for i := range 5 {
				s, err := servers.StartRedisWith(ctx, servers.RedisOptions{AppendFsyncAlways: aof})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Stop() })
				all = append(all, node(t, s.Addr))
				if i < 3 {
					cut = append(cut, node(t, s.Addr))
				} else {
					cut = append(cut, node(t, refusing(t)))
				}
				if i == 0 {
					crashed = s
				}
			}
			cfg := client.LockConfig{Key: "lock:" + t.Name(), Lease: time.Minute, Retry: time.Millisecond}
			a, b := redlockOn(t, cfg, cut), redlockOn(t, cfg, all)
			if _, err := a.Acquire(ctx); err != nil {
				t.Fatalf("A, on 3 of the 5 nodes: %v", err)
			}
			if err := crashed.Crash(); err != nil {
				t.Fatal(err)
			}
			if err := crashed.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			bctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := b.Acquire(bctx)
			switch {
			case !aof && err != nil:
				t.Errorf("B after the restart without persistence: %v; want the lock, held by A too", err)
			case aof && !errors.Is(err, client.ErrGaveUp):
				t.Errorf("B after the restart with every write fsynced: %v; want refused until it gave up", err)
			}
		})
	}
}

func node(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// refusing is the address of a listener that closes each connection as
// it comes: a node A cannot use, as one a partition cut off, and a port no
// server started meanwhile can take.
func refusing(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().String()
}

func redlockOn(t *testing.T, cfg client.LockConfig, nodes []*redis.Client) client.Lock {
	cfg.Nodes = nodes
	l, err := client.NewLock(context.Background(), "redlock", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
