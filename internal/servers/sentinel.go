package servers

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions are the settings of StartSentinel.
type SentinelOptions struct {
	// Master names the monitored primary; "mymaster" by default.
	Master string

	// Addr is the primary's "host:port", an IP address and a port, as the
	// sentinel is to reach it. Required.
	Addr string

	// Quorum is how many sentinels must agree that the primary is down
	// before one fails it over; 2 by default, a majority of three.
	Quorum int

	// DownAfter is how long an instance may leave a PING unanswered before
	// the sentinel deems it down; 1 s by default.
	DownAfter time.Duration

	// FailoverTimeout bounds each step of a failover, and twice it is the
	// pause before a failed failover of the same primary is tried again;
	// 5 s by default.
	FailoverTimeout time.Duration

	// Announce is the "host:port" the sentinel gives the other sentinels
	// as its own; "" (the default) for the address it connects from and
	// its port.
	Announce string

	// Host is where the sentinel runs; nil (the default) for this machine.
	Host Host
}

// StartSentinel starts a Redis sentinel (redis-server --sentinel) on a free
// loopback port, monitoring the primary at opt.Addr. Sentinels find each
// other and the primary's replicas through the primary. Its configuration,
// which it rewrites as it learns, lives in its directory and so holds over
// Crash and Restart.
func StartSentinel(ctx context.Context, opt SentinelOptions) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-sentinel: %w (on Debian: apt-get install redis-server)", ErrMissing)
	}
	if opt.Master == "" {
		opt.Master = "mymaster"
	}
	if opt.Quorum == 0 {
		opt.Quorum = 2
	}
	if opt.DownAfter == 0 {
		opt.DownAfter = time.Second
	}
	if opt.FailoverTimeout == 0 {
		opt.FailoverTimeout = 5 * time.Second
	}
	host, port, err := net.SplitHostPort(opt.Addr)
	if err != nil {
		return nil, fmt.Errorf("redis-sentinel: primary %q: %w", opt.Addr, err)
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("redis-sentinel: primary %q: not an IP address", opt.Addr)
	}
	var announce []string
	if opt.Announce != "" {
		host, port, err := net.SplitHostPort(opt.Announce)
		if err != nil {
			return nil, fmt.Errorf("redis-sentinel: announce %q: %w", opt.Announce, err)
		}
		announce = []string{"sentinel announce-ip " + strconv.Quote(host), "sentinel announce-port " + port}
	}

	d, err := tempDir("hiatus-sentinel-", nil)
	if err != nil {
		return nil, fmt.Errorf("redis-sentinel: %w", err)
	}
	dir := d.Path()
	s := &Server{name: "redis-sentinel", host: opt.Host, bin: bin, dir: dir, home: d, log: d.Join("sentinel.log"),
		quit: syscall.SIGTERM, crash: syscall.SIGKILL}
	conf := d.Join("sentinel.conf")
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	lines := append([]string{
		"bind " + s.ip(),
		"daemonize no",
		"dir " + strconv.Quote(dir),
		"logfile " + strconv.Quote(s.log),
		"sentinel resolve-hostnames no",
		"sentinel announce-hostnames no",
	}, announce...)
	lines = append(lines,
		fmt.Sprintf("sentinel monitor %s %s %s %d", opt.Master, host, port, opt.Quorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %s", opt.Master, ms(opt.DownAfter)),
		fmt.Sprintf("sentinel failover-timeout %s %s", opt.Master, ms(opt.FailoverTimeout)),
		fmt.Sprintf("sentinel parallel-syncs %s 1", opt.Master),
	)
	if err := d.WriteFile(filepath.Base(conf), []byte(strings.Join(lines, "\n")+"\n")); err != nil {
		removeDir(d)
		return nil, fmt.Errorf("redis-sentinel: write its configuration: %w", err)
	}

	var addr string
	s.ready = func(ctx context.Context) error {
		rdb := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		return rdb.Ping(ctx).Err()
	}
	s, err = launch(ctx, s, func(port int) {
		addr = net.JoinHostPort(s.ip(), strconv.Itoa(port))
		s.URL, s.Addr = "redis://"+addr, addr
		s.args = []string{conf, "--sentinel", "--port", strconv.Itoa(port)}
	})
	if err != nil {
		removeDir(d)
		return nil, err
	}
	return s, nil
}
