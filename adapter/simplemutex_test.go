package adapter_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/topology"
)

// TestSimpleRedisMutexFenceOrder is the order of events of the
// simple-redis-mutex-fence finding (docs/findings.md), fixed: client A's
// replies are held back a second, past its 300 ms lease, so its tryLock is
// granted at once and learns it a second later; once its key has expired,
// client B takes the lock and its fencing token; then A's INCR goes. The
// library hands A, no longer the holder, the larger token; with the
// suggested fix (the INCR in the SET's script) A's token is taken with its
// grant, before B's.
func TestSimpleRedisMutexFenceOrder(t *testing.T) {
	script := nodeScript(t, "../adapters/node-simple-redis-mutex/main.js", "simple-redis-mutex")
	const lease, held = 300 * time.Millisecond, time.Second
	for _, tc := range []struct {
		name, flags string
		staleLarger bool // A's token larger than B's
	}{
		{"library", "--fencing --try", true},
		{"suggested-fix", "--fencing --try --release-says --fix-fence", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			url, rc := startRedis(t)
			link, err := topology.Listen(rc.Options().Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { link.Close() })
			start := func(url string) *adapter.Process {
				p, err := adapter.Start(ctx, "node "+script+" "+tc.flags,
					adapter.Setup{RedisURL: url, Lock: "fence-order", Lease: lease, Retry: 5 * time.Millisecond}, os.Stderr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(p.Close)
				return p
			}
			a, b := start("redis://"+link.Addr()+"/0"), start(url)
			acquire := func(p *adapter.Process) (adapter.Answer, error) {
				return p.Request(ctx, adapter.Request{Type: "acquire", Lock: "fence-order", LeaseMS: lease.Milliseconds(), WaitMS: 5000}, 10*time.Second)
			}
			link.SlowReplies(held)
			type result struct {
				a   adapter.Answer
				err error
			}
			first := make(chan result, 1)
			go func() { r, err := acquire(a); first <- result{r, err} }()
			const key = "@simple-redis-mutex:lock-fence-order"
			waitFor(t, rc, key, true)  // A's SET is granted
			waitFor(t, rc, key, false) // and its lease runs out, its answer still held
			bAns, err := acquire(b)
			if err != nil || bAns.Type != "ok" {
				t.Fatalf("B's acquire: %+v, %v: want ok", bAns, err)
			}
			r := <-first
			if r.err != nil || r.a.Type != "ok" {
				t.Fatalf("A's acquire: %+v, %v: want ok (its grant, answered late)", r.a, r.err)
			}
			if got := r.a.Fence > bAns.Fence; got != tc.staleLarger {
				t.Errorf("A (granted first, its lease over) got fence %d, B (the holder) %d: stale larger %v, want %v", r.a.Fence, bAns.Fence, got, tc.staleLarger)
			}
		})
	}
}
