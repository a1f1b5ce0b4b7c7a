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
}
