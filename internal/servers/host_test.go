package servers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hiatus-dev/hiatus/internal/sshtest"
	"github.com/hiatus-dev/hiatus/topology"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// TestOnHost starts each server on a host of its own, a network namespace
// of a test network: it answers on the host's address, its process is in
// the host's namespace (and PostgreSQL's runs as postgres there), a crash
// and restart keep it there, and Stop leaves no process.
func TestOnHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("NOT RUN: hosts of their own need root (CI runs as root)")
	}
	ctx := context.Background()
	n, err := topology.NewNet(ctx, "srv")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	host := func(name string) *topology.NetnsHost {
		h, err := n.AddHost(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	redisHost := host("redis")
	for _, tc := range []struct {
		name  string
		host  *topology.NetnsHost
		start func(*topology.NetnsHost) (*Server, error)
		ping  func(url string) error
	}{
		{"redis", redisHost, func(h *topology.NetnsHost) (*Server, error) {
			return StartRedisWith(ctx, RedisOptions{Host: h, FakeClock: true})
		}, pingRedis},
		{"sentinel", host("sentinel"), func(h *topology.NetnsHost) (*Server, error) {
			return StartSentinel(ctx, SentinelOptions{Host: h, Addr: redisHost.IP() + ":6379"})
		}, pingRedis},
		{"etcd", host("etcd"), func(h *topology.NetnsHost) (*Server, error) { return StartEtcdOn(ctx, h) }, nil},
		{"zookeeper", host("zk"), func(h *topology.NetnsHost) (*Server, error) {
			z, err := StartZooKeeperOn(ctx, []Host{h})
			if err != nil {
				return nil, err
			}
			return z.Servers[0], nil
		}, func(url string) error { return zooServing(ctx, strings.TrimPrefix(url, "zookeeper://")) }},
		{"postgres", host("pg"), func(h *topology.NetnsHost) (*Server, error) { return StartPostgresOn(ctx, h) }, func(url string) error {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				return err
			}
			return c.Close(ctx)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.start(tc.host)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			for _, step := range []string{"started", "restarted"} {
				if tc.ping != nil {
					if err := tc.ping(s.URL); err != nil {
						t.Errorf("%s: %s does not answer at %s: %v", step, tc.name, s.URL, err)
					}
				}
				if got, want := netns(t, s.ProcessID()), hostNetns(t, tc.host); got != want {
					t.Errorf("%s: pid %d in network namespace %s, want the host's %s", step, s.ProcessID(), got, want)
				}
				if tc.name == "postgres" {
					checkPassword(t, s)
					if uid := procUID(t, s.ProcessID()); uid == 0 {
						t.Errorf("%s: postgres runs as root", step)
					}
				}
				if step == "started" {
					s.Crash()
					if err := s.Restart(ctx); err != nil {
						t.Fatalf("restart: %v", err)
					}
				}
			}
			pid := s.ProcessID()
			if err := s.Stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
				t.Errorf("pid %d still running after Stop", pid)
			}
		})
	}
}

func pingRedis(url string) error {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	return c.Ping(context.Background()).Err()
}

// netns names the network namespace of process pid.
func netns(t *testing.T, pid int) string {
	s, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hostNetns names the network namespace of h, as a process it runs sees it.
func hostNetns(t *testing.T, h *topology.NetnsHost) string {
	out, err := h.Command("readlink", "/proc/self/ns/net").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out[:len(out)-1])
}

// procUID is the real user of process pid.
func procUID(t *testing.T, pid int) int {
	fi, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// TestKeepLogOnNode: a server on a node reached over SSH keeps its log as
// one on this machine does, copied as it comes into the file named; a
// link planted at that name is refused, not written through, and the
// server's directory on the node is removed either way.
func TestKeepLogOnNode(t *testing.T) {
	ctx := context.Background()
	_, h := sshtest.NodeT(t, "keep", "redis")
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := errors.Join(os.WriteFile(target, []byte("untouched"), 0o644), os.Symlink(target, filepath.Join(dir, "link"))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ keep, err string }{{"redis.log", ""}, {"link", "symbolic link"}} {
		s, err := StartRedisOnNode(ctx, h, RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kept := filepath.Join(dir, tc.keep)
		s.KeepLog(kept)
		sdir := s.dir
		err = s.Stop()
		if tc.err == "" {
			b, rerr := os.ReadFile(kept)
			if err != nil || rerr != nil || !strings.Contains(string(b), "bye bye") {
				t.Errorf("%s: Stop: %v; the kept log (%v) lacks bye bye:\n%s", tc.keep, err, rerr, b)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: Stop: %v, want an error with %q", tc.keep, err, tc.err)
		}
		if _, err := os.Lstat(sdir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the server's directory %s is still on the node (%v)", tc.keep, sdir, err)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "untouched" {
		t.Errorf("the link's target holds %q (%v): written through the link", b, err)
	}
}

// TestLogHolds: a server's log is searched for a line, on this machine and
// on a node over SSH alike (as ZooKeeper's are for the sessions they
// expired), text quoted as the shell reads it back.
func TestLogHolds(t *testing.T) {
	ctx := context.Background()
	_, h := sshtest.NodeT(t, "logs", "redis")
	local, err := StartRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Stop()
	remote, err := StartRedisOnNode(ctx, h, RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Stop()
	for _, s := range []*Server{local, remote} {
		for text, want := range map[string]bool{"Ready to accept connections": true, `it's "not" $there`: false} {
			if got, err := s.logHolds(ctx, text); err != nil || got != want {
				t.Errorf("%s (node %v): the log holds %q: %v (%v), want %v", s.name, s.node != nil, text, got, err, want)
			}
		}
	}
}
