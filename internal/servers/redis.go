package servers

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// RedisOptions are the settings of StartRedisWith. The zero value starts
// the server StartRedis starts.
type RedisOptions struct {
	// FakeClock starts the server under libfaketime, so that JumpClock can
	// step its wall clock; its monotonic clock is left alone, as when a
	// real clock is stepped. False by default.
	FakeClock bool

	// AppendFsyncAlways has the server log every write to an append-only
	// file and fsync it before it answers (appendonly yes, appendfsync
	// always): a restart after Crash loads every key it had, with its
	// expiry. False by default: the server keeps nothing.
	AppendFsyncAlways bool

	// ReplicaOf is the "host:port" of a primary for the server to
	// replicate; "" (the default) for none.
	ReplicaOf string

	// Announce is the "host:port" a replica gives its primary, and through
	// it the sentinels, as its own: the address of a proxy in front of it,
	// say. "" (the default) for the address it connects from and its port.
	Announce string

	// Host is where the server runs; nil (the default) for this machine.
	Host Host
}

// StartRedis starts redis-server on a free loopback port, keeping nothing on
// disk: a restart after Crash starts empty, every lease and key gone.
func StartRedis(ctx context.Context) (*Server, error) {
	return StartRedisWith(ctx, RedisOptions{})
}

// StartRedisWith starts redis-server as StartRedis does, with the options
// opt.
func StartRedisWith(ctx context.Context, opt RedisOptions) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w (on Debian: apt-get install redis-server)", ErrMissing)
	}
	extra, err := replicaArgs(opt)
	if err != nil {
		return nil, err
	}
	if opt.Host != nil {
		// Its clients are on other hosts of a private test network, which
		// protected mode would turn away (it has no password).
		extra = append(extra, "--protected-mode", "no")
	}
	var preload string
	if opt.FakeClock {
		if preload, err = fakeClockPreload(bin, libDirs()); err != nil {
			return nil, fmt.Errorf("redis-server: %w", err)
		}
	}

	d, err := tempDir("hiatus-redis-", nil)
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	s := &Server{name: "redis-server", host: opt.Host, bin: bin, dir: d.Path(), home: d, log: d.Join("redis.log"),
		quit: syscall.SIGTERM, crash: syscall.SIGKILL}
	var wrap []string // runs bin under libfaketime
	if opt.FakeClock {
		if s.bin, wrap, err = fakeClockCommand(bin, preload, d); err != nil {
			removeDir(d)
			return nil, fmt.Errorf("redis-server: %w", err)
		}
	}
	s, err = launchRedis(ctx, s, s.ip(), opt, s.log, wrap, extra)
	if err != nil {
		removeDir(d)
		return nil, err
	}
	return s, nil
}

// replicaArgs are the arguments of opt's replication: whose replica the
// server is, and the address it gives its primary as its own.
func replicaArgs(opt RedisOptions) ([]string, error) {
	var args []string
	if opt.ReplicaOf != "" {
		host, port, err := net.SplitHostPort(opt.ReplicaOf)
		if err != nil {
			return nil, fmt.Errorf("redis-server: replica of %q: %w", opt.ReplicaOf, err)
		}
		args = append(args, "--replicaof", host, port)
	}
	if opt.Announce != "" {
		host, port, err := net.SplitHostPort(opt.Announce)
		if err != nil {
			return nil, fmt.Errorf("redis-server: announce %q: %w", opt.Announce, err)
		}
		args = append(args, "--replica-announce-ip", host, "--replica-announce-port", port)
	}
	return args, nil
}

// launchRedis launches s, a redis-server whose command line begins with
// wrap, on a free port of ip, its data in s.dir, its log in logfile ("" for
// its standard output), with extra arguments, and waits until it answers:
// the readiness and the command line of this machine's servers and of a
// node's, said once.
func launchRedis(ctx context.Context, s *Server, ip string, opt RedisOptions, logfile string, wrap, extra []string) (*Server, error) {
	persist := []string{"--appendonly", "no"}
	if opt.AppendFsyncAlways {
		persist = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	var addr string
	s.ready = func(ctx context.Context) error {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		return rdb.Ping(ctx).Err()
	}
	return launch(ctx, s, func(port int) {
		addr = net.JoinHostPort(ip, strconv.Itoa(port))
		s.URL, s.Addr = "redis://"+addr+"/0", addr
		s.args = slices.Concat(wrap, []string{"--port", strconv.Itoa(port), "--bind", ip,
			"--save", "", "--dir", s.dir, "--logfile", logfile, "--daemonize", "no",
			// A replica's first sync starts at once, not 5 s later.
			"--repl-diskless-sync-delay", "0"}, persist, extra)
	})
}
