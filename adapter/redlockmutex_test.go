package adapter_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/topology"
)

// TestRedisSemaphoreRedlockValidity is the order of events of the
// redis-semaphore-redlock finding (docs/findings.md), fixed: client A's
// replies from all three nodes are held back a second, past its 300 ms
// lease, so its SETs land at once and expire before it hears of them;
// client B, whose replies come at once, takes the lock meanwhile. The
// library then tells A it acquired (a quorum of OKs, however late); with
// the suggested fix (a node timeout, a validity check) it is refused, and
// with the validity check alone too (its quorum came after its lease).
func TestRedisSemaphoreRedlockValidity(t *testing.T) {
	script := nodeScript(t, "../adapters/node/redis-semaphore.js", "redis-semaphore")
	const lease, held = 300 * time.Millisecond, time.Second
	for _, tc := range []struct {
		name, flags string
		stale       string // A's answer
	}{
		{"library", "", "ok"},
		{"suggested-fix", "--fix-redlock", "fail"},
		{"validity-check-alone", "--fix-redlock=validity", "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var direct, slowed []string
			var nodes []*redis.Client
			var links []*topology.Link
			for range 3 {
				url, rc := startRedis(t)
				link, err := topology.Listen(rc.Options().Addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { link.Close() })
				links, direct, slowed, nodes = append(links, link), append(direct, url), append(slowed, "redis://"+link.Addr()+"/0"), append(nodes, rc)
			}
			start := func(urls []string) *adapter.Process {
				p, err := adapter.Start(ctx, strings.TrimSpace("node "+script+" "+tc.flags),
					adapter.Setup{RedisURL: urls[0], RedisURLs: urls, Lock: "validity", Lease: lease, Retry: 5 * time.Millisecond}, os.Stderr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(p.Close)
				return p
			}
			a, b := start(slowed), start(direct)
			acquire := func(p *adapter.Process, wait time.Duration) (adapter.Answer, error) {
				return p.Request(ctx, adapter.Request{Type: "acquire", Lock: "validity", LeaseMS: lease.Milliseconds(), WaitMS: wait.Milliseconds()}, 10*time.Second)
			}
			// A takes and releases the lock once before its replies are
			// held, so that its clients are connected: a handshake held
			// back would hold its first SETs behind it.
			if ans, err := acquire(a, 5*time.Second); err != nil || ans.Type != "ok" {
				t.Fatalf("A's first acquire, undelayed: %+v, %v", ans, err)
			} else if ans, err := a.Request(ctx, adapter.Request{Type: "release", Lock: "validity", Token: ans.Token}, 10*time.Second); err != nil || ans.Type != "ok" {
				t.Fatalf("A's release, undelayed: %+v, %v", ans, err)
			}
			for _, l := range links {
				l.SlowReplies(held)
			}
			type result struct {
				a   adapter.Answer
				err error
				at  time.Duration
			}
			first := make(chan result, 1)
			asked := time.Now()
			// A asks once: a single attempt, its wait shorter than its
			// replies' delay.
			go func() { r, err := acquire(a, lease/2); first <- result{r, err, time.Since(asked)} }()
			for _, rc := range nodes {
				await(t, "A's second SET on "+rc.Options().Addr, func() bool { return calls(t, rc, "set") >= 2 })
				waitFor(t, rc, "mutex:validity", false) // and expired there, its answer still held
			}
			bAns, err := acquire(b, 5*time.Second)
			if err != nil || bAns.Type != "ok" {
				t.Fatalf("B's acquire: %+v, %v: want ok", bAns, err)
			}
			r := <-first
			if r.err != nil || r.a.Type != tc.stale {
				t.Errorf("A's acquire, answered %v after it asked (lease %v): %+v, %v: want %s", r.at.Round(time.Millisecond), lease, r.a, r.err, tc.stale)
			}
		})
	}
}
