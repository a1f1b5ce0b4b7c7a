package servers

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/internal/shellquote"
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
	d, err := tempDir("hiatus-sentinel-", nil)
	if err != nil {
		return nil, fmt.Errorf("redis-sentinel: %w", err)
	}
	dir := d.Path()
	s := &Server{name: "redis-sentinel", host: opt.Host, bin: bin, dir: dir, home: d, log: d.Join("sentinel.log"),
		quit: syscall.SIGTERM, crash: syscall.SIGKILL}
	conf, err := sentinelConfig(opt, s.ip(), dir, s.log)
	if err == nil {
		err = d.WriteFile("sentinel.conf", []byte(conf))
	}
	if err != nil {
		removeDir(d)
		return nil, fmt.Errorf("redis-sentinel: its configuration: %w", err)
	}
	s, err = launchSentinel(ctx, s, d.Join("sentinel.conf"))
	if err != nil {
		removeDir(d)
		return nil, err
	}
	return s, nil
}

// StartSentinelOnNode starts a sentinel as StartSentinel does, on the node
// n, from its own redis-server, listening on the node's address on a port
// of the node's range; opt.Host is not used.
func StartSentinelOnNode(ctx context.Context, n Node, opt SentinelOptions) (*Server, error) {
	bin, err := lookOnNode(n, needRedis)
	if err != nil {
		return nil, fmt.Errorf("redis-sentinel: %w", err)
	}
	dir, err := nodeDir(n, "sentinel", "")
	if err != nil {
		return nil, err
	}
	s := &Server{name: "redis-sentinel", node: n, bin: bin, dir: dir, log: path.Join(dir, "sentinel.log"),
		quit: syscall.SIGTERM, crash: syscall.SIGKILL}
	// Its log is its output, which Start appends to s.log.
	conf, err := sentinelConfig(opt, n.IP(), dir, "")
	if err == nil {
		_, err = s.onNode(fmt.Sprintf("printf %%s %s > %s", shellquote.Quote(conf), shellquote.Quote(path.Join(dir, "sentinel.conf"))))
	}
	if err == nil {
		s, err = launchSentinel(ctx, s, path.Join(dir, "sentinel.conf"))
	}
	if err != nil {
		(&Server{name: "redis-sentinel", node: n, dir: dir}).stopOnNode()
		return nil, fmt.Errorf("redis-sentinel: %w", err)
	}
	return s, nil
}

// sentinelConfig is the configuration of a sentinel that opt describes,
// bound to bind, its directory dir and its log logfile ("" for its
// standard output).
func sentinelConfig(opt SentinelOptions, bind, dir, logfile string) (string, error) {
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
		return "", fmt.Errorf("primary %q: %w", opt.Addr, err)
	}
	if net.ParseIP(host) == nil {
		return "", fmt.Errorf("primary %q: not an IP address", opt.Addr)
	}
	lines := []string{
		"bind " + bind,
		"daemonize no",
		"dir " + strconv.Quote(dir),
		"logfile " + strconv.Quote(logfile),
		"sentinel resolve-hostnames no",
		"sentinel announce-hostnames no",
	}
	if opt.Announce != "" {
		host, port, err := net.SplitHostPort(opt.Announce)
		if err != nil {
			return "", fmt.Errorf("announce %q: %w", opt.Announce, err)
		}
		lines = append(lines, "sentinel announce-ip "+strconv.Quote(host), "sentinel announce-port "+port)
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	lines = append(lines,
		fmt.Sprintf("sentinel monitor %s %s %s %d", opt.Master, host, port, opt.Quorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %s", opt.Master, ms(opt.DownAfter)),
		fmt.Sprintf("sentinel failover-timeout %s %s", opt.Master, ms(opt.FailoverTimeout)),
		fmt.Sprintf("sentinel parallel-syncs %s 1", opt.Master),
	)
	return strings.Join(lines, "\n") + "\n", nil
}

// launchSentinel launches s, a sentinel of the configuration conf, on a
// free port, and waits until it answers.
func launchSentinel(ctx context.Context, s *Server, conf string) (*Server, error) {
	var addr string
	s.ready = func(ctx context.Context) error {
		rdb := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		return rdb.Ping(ctx).Err()
	}
	return launch(ctx, s, func(port int) {
		addr = net.JoinHostPort(s.ip(), strconv.Itoa(port))
		s.URL, s.Addr = "redis://"+addr, addr
		s.args = []string{conf, "--sentinel", "--port", strconv.Itoa(port)}
	})
}
