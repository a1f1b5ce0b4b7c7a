package lockserver

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/redis/go-redis/v9"
)

// TestHistoryClockNotFirstTrip: the record's clock beside this machine's
// is not measured by the client's first TIME alone, whose round trip
// holds the connection's dial and handshake, and whose midpoint is then
// early by half of it: every event stamped by arrival (etcd's, ZooKeeper's)
// went that much late — CI's TestRunZooKeeperFaults/zk-none, 11 releases
// answered ok 12 to 37 ms before the record's delete. Here the dial takes
// a set delay; the run's Redis is on this machine, so its clock stands
// where this machine's does, and the offset is 0 give or take a round
// trip's spread.
func TestHistoryClockNotFirstTrip(t *testing.T) {
	s := startRedis(t, servers.RedisOptions{})
	const dialDelay = 50 * time.Millisecond
	opt, err := redis.ParseURL(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		time.Sleep(dialDelay)
		return d.DialContext(ctx, network, addr)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	c, err := newHistoryClock(context.Background(), rdb, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if off := time.Duration(c.localNS); off > dialDelay/5 || off < -dialDelay/5 {
		t.Errorf("the history's clock stands %v from this machine's, want 0 within %v: the first trip, dial and all, was taken (half of %v)",
			off, dialDelay/5, dialDelay)
	}
	if sp := time.Duration(c.spread); sp <= 0 || sp > dialDelay/5 {
		t.Errorf("the history's clock is known to %v, want a round trip's half, within %v", sp, dialDelay/5)
	}
}

// TestAdoptWideMeasure: a node's offset measured wide (a loaded machine's
// round trips) and then narrow, the two within the first's spread, is not
// taken for a step of the node's clock: a line read late is stamped by the
// narrow measure, not 46 ms later by the wide one. (Kept as the offset
// before a step, the wide one stamped a release's DEL on a node over SSH
// 46 ms after the client was told ok: TestRunHostsSSH/ssh-lease-2s's
// lock-server check, 2 false oks.) A real step, wider than both spreads,
// still keeps the offset before it for the lines that ran before it. The
// stamps' uncertainty, which the record writes, is the wider spread of
// the offsets a line may be stamped by.
func TestAdoptWideMeasure(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, tc := range []struct {
		name                  string
		first, firstSpread    int64
		then, thenSpread      int64
		wantPrev, line, stamp int64 // line: node ns; stamp: the history's, read 100 ms late
		uncertainty           int64
	}{
		{"wide then narrow", -46 * ms, 50 * ms, 0, ms / 2, 0, 10_000 * ms, 10_000 * ms, ms / 2},
		{"narrow then stepped", 0, ms / 2, 1000 * ms, ms / 2, 0, 10_000 * ms, 10_000 * ms, ms / 2},
		{"stepped, a line after it", 0, ms / 2, 1000 * ms, ms / 2, 0, 11_000 * ms, 10_000 * ms, ms / 2},
		{"stepped, measured wide", 0, ms / 2, 1000 * ms, 30 * ms, 0, 10_000 * ms, 10_000 * ms, 30 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := nodeClock{own: true}
			c.off, c.prev, c.spread, c.prevSpread = tc.first, tc.first, tc.firstSpread, tc.firstSpread
			c.adopt(tc.then, tc.thenSpread)
			if u := c.uncertainty(); u != tc.uncertainty {
				t.Errorf("stamps known to %v, want %v", time.Duration(u), time.Duration(tc.uncertainty))
			}
			if c.prev != tc.wantPrev || c.off != tc.then {
				t.Errorf("offsets %v and before it %v, want %v and %v", time.Duration(c.off), time.Duration(c.prev),
					time.Duration(tc.then), time.Duration(tc.wantPrev))
			}
			arrived := tc.stamp + 100*ms
			if got := c.pick(tc.line, arrived); got != tc.stamp {
				t.Errorf("a line at %v read at %v is stamped %v, want %v", time.Duration(tc.line), time.Duration(arrived),
					time.Duration(got), time.Duration(tc.stamp))
			}
		})
	}
}
