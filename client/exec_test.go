package client_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
)

// A reference is a lock adapter shipped in adapters/, and how its lock
// keeps a lease through a pause of the application's thread alone (sleep):
// a lease lock does not; a lock renewed by hiatus's watchdog (its hello
// says renewal) or by its library's own does.
type reference struct {
	name, command string
	keepsLease    bool
}

// references are the reference adapters, as a user runs them. What they
// need comes from scripts/setup --tests: a missing part fails the test,
// loudly, rather than skip it.
func references(t *testing.T) []reference {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import redis").CombinedOutput(); err != nil {
		t.Fatalf("the Python adapter needs Debian's python3-redis (scripts/setup --tests installs it): %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "adapters/node/node_modules/redlock")); err != nil {
		t.Fatalf("the Node adapters need their npm packages (scripts/setup --tests installs them): %v", err)
	}
	goAdapter := filepath.Join(t.TempDir(), "go-setnx")
	if out, err := exec.Command("go", "build", "-o", goAdapter, filepath.Join(root, "adapters/go-setnx")).CombinedOutput(); err != nil {
		t.Fatalf("build the Go adapter: %v: %s", err, out)
	}
	return []reference{
		{"go-setnx", goAdapter, false},
		{"redis-py-lock", filepath.Join(root, "adapters/python/redis_py_lock.py"), false},
		{"node-redlock", "node " + filepath.Join(root, "adapters/node/redlock.js"), true},
		{"node-redis-semaphore", "node " + filepath.Join(root, "adapters/node/redis-semaphore.js"), true},
	}
}

// TestReferenceAdapters runs the conformance check of each reference
// adapter, then the deterministic pause test through it: holder A pauses
// inside its section, its adapter with it (stop) or not (sleep); 1.5 leases
// later holder B runs a section; then A writes. Where A's lease lapsed,
// unfenced B's update is lost and fenced A's write is rejected; where the
// lease is kept, B gives up and nothing is lost.
func TestReferenceAdapters(t *testing.T) {
	// A lease that lapses lapses at any length; one kept by renewals
	// every lease/3 is kept only while no renewal comes a lease late, and
	// beside two CPU burners and the suite a Node renewal came more than
	// a second late: a kept lease is long enough for a stall of 2 s.
	leaseOf := func(lapses bool) time.Duration {
		if lapses {
			return time.Second
		}
		return 3 * time.Second
	}
	for _, ref := range references(t) {
		t.Run(ref.name+"/conform", func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := adapter.Conform(context.Background(), ref.command, redisURL, &out, false); err != nil {
				t.Errorf("%v:\n%s", err, out.String())
			}
		})
		for _, tc := range []struct {
			stop, fenced bool
		}{{false, false}, {true, false}, {false, true}} {
			lapses := tc.stop || !ref.keepsLease
			t.Run(fmt.Sprintf("%s/stop=%v/fenced=%v", ref.name, tc.stop, tc.fenced), func(t *testing.T) {
				t.Parallel()
				ops := pausedThroughAdapter(t, ref.command, leaseOf(lapses), tc.stop, tc.fenced, lapses)
				res := checker.LockCounter(ops, 0)
				want := map[string]int64{"writes": 1, "final": 1, "lost-min": 0, "stale-rejected": 0}
				switch {
				case lapses && tc.fenced:
					want["stale-rejected"] = 1
				case lapses:
					want["writes"], want["lost-min"] = 2, 1
				}
				for key, w := range want {
					if got, _ := history.Int(res.Get(key)); got != w {
						t.Errorf("%s = %v, want %d (%s)", key, res.Get(key), w, res.Explanation)
					}
				}
			})
		}
	}
}

// pausedThroughAdapter runs holder A and holder B on locks of the adapter
// command, A paused inside its section for up to 2 leases, and returns the
// history. With stop, A's adapter is frozen (SIGSTOP) for the pause, as a
// stopped application would be. B tries for 5 s if A's lease is to lapse,
// else for a lease.
func pausedThroughAdapter(t *testing.T, command string, lease time.Duration, stop, fenced, lapses bool) []history.Op {
	ctx := context.Background()
	r := newRig(t)
	lock := func() *client.Exec {
		l, err := client.NewExec(ctx, command, client.LockConfig{Redis: r.rdb, Key: "lock:" + r.name,
			FenceKey: "fence:" + r.name, Lease: lease, Retry: time.Millisecond, Fenced: fenced, RedisURL: redisURL}, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	lockA := lock()
	inside, resume := make(chan struct{}), make(chan struct{})
	a := &client.Worker{Lock: lockA, Workload: &client.Counter{DB: r.db, ID: r.id, Guard: client.GuardOf(fenced)},
		Clock: r.clock, Record: r.record, Process: 0, Stride: 10,
		Hook: func(context.Context, client.Section) {
			if stop {
				_ = syscall.Kill(lockA.PID(), syscall.SIGSTOP)
				defer syscall.Kill(lockA.PID(), syscall.SIGCONT)
			}
			close(inside)
			<-resume
		}}
	b := &client.Worker{Lock: lock(), Workload: &client.Counter{DB: r.db, ID: r.id, Guard: client.GuardOf(fenced)},
		Clock: r.clock, Record: r.record, Process: 1, Stride: 10}
	bWait := lease
	if lapses {
		bWait = 5 * time.Second
	}
	contend(ctx, a, b, inside, resume, lease, bWait)
	return r.history(t)
}

func TestLockLabel(t *testing.T) {
	for name, want := range map[string]string{
		"setnx":                                 "setnx",
		"exec:node adapters/node/redlock.js":    "exec-redlock",
		"exec:adapters/python/redis_py_lock.py": "exec-redis_py_lock",
		"exec:env A=1 /tmp/go-setnx --verbose":  "exec-go-setnx",
		"exec:java -jar 'my lock.jar'":          "exec-lock",
		"exec:/opt/locks/résumé":                "exec-r-sum-",
		"exec:bin/redsync-v4.0.3":               "exec-redsync-v4.0.3",
		// The script, not its arguments; a package's entry point by its
		// directory.
		"exec:adapters/python/tooz_lock.py etcd3gw --careful":                "exec-tooz_lock",
		"exec:node adapters/node-simple-redis-mutex/main.js --fencing --try": "exec-node-simple-redis-mutex",
		"exec:/usr/bin/node -r ./otel.js adapters/node/redlock.js":           "exec-redlock",
		"exec:/usr/bin/env python3 x.py":                                     "exec-x",
		"exec:node main.js":                                                  "exec-main",
	} {
		if got := client.LockLabel(name); got != want {
			t.Errorf("LockLabel(%q) = %q, want %q", name, got, want)
		}
	}
}
