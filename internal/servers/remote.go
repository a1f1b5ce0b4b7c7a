package servers

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/topology"
	"github.com/redis/go-redis/v9"
)

// A Node is a machine reached over SSH (topology.SSHHost): a server there
// runs from the node's own packages, in a directory of the run's on it,
// and dies with the run's connection.
type Node interface {
	Name() string
	IP() string
	Dir() string // the run's directory on the node
	Run(ctx context.Context, script string) ([]byte, error)
	// Do runs a line of sh at once, through a session already open: a
	// fault's action, which must not lag its event.
	Do(cmd string) error
	Start(ctx context.Context, argv []string, log string, stderr io.Writer) (*topology.Proc, error)
}

// nodeTimeout bounds a server's commands on its node but the start.
const nodeTimeout = 30 * time.Second

// onNode runs script on s's node and returns what it printed, trimmed.
func (s *Server) onNode(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	out, err := s.node.Run(ctx, script)
	if err != nil {
		return "", fmt.Errorf("%s on node %s: %w: %s", s.name, s.node.Name(), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// startOnNode starts the server's process on its node, its output in its
// log there.
func (s *Server) startOnNode() error {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	argv := append([]string{s.bin}, s.args...)
	if s.user != "" {
		argv = append([]string{"setpriv", "--reuid=" + s.user, "--regid=" + s.user, "--init-groups"}, argv...)
	}
	p, err := s.node.Start(ctx, argv, s.log, nil)
	if err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.pid, s.signal, s.done = p.Pid(), p.Signal, done
	s.mu.Unlock()
	go func() {
		err := p.Wait()
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(done)
	}()
	return nil
}

// stopOnNode keeps the log of a server that has ended, as Stop does, and
// removes its directory from its node.
func (s *Server) stopOnNode() error {
	if s.dir == "" {
		return nil
	}
	// One session for both: a loaded node's sshd may take a good part of
	// a second to open one.
	script := "rm -rf " + quote(s.dir)
	if s.keep != "" {
		script = "cat " + quote(s.log) + "; " + script
	}
	b, err := s.onNode(script)
	if err != nil {
		return err
	}
	s.dir = ""
	if s.keep != "" {
		if err := os.WriteFile(s.keep, []byte(b+"\n"), 0o644); err != nil {
			return fmt.Errorf("keep %s's log: %w", s.name, err)
		}
	}
	return nil
}

// tailOnNode is tail of the server's log on its node.
func (s *Server) tailOnNode() string {
	out, err := s.onNode("tail -n 8 " + quote(s.log))
	if err != nil || out == "" {
		return ""
	}
	return "; its log (" + s.node.Name() + ":" + s.log + ") ends:\n  " + strings.ReplaceAll(out, "\n", "\n  ")
}

// freePort is a free port for the server: one the kernel offers here, or
// on a node a random one of the unprivileged range, which launch tries
// again should the server find it taken.
func (s *Server) freePort() (int, error) {
	if s.node == nil {
		return freePort()
	}
	return 20000 + rand.IntN(30000), nil
}

// nodeDir makes a directory for a server of the run on its node, owned by
// user unless it is "".
func nodeDir(n Node, name, user string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	script := fmt.Sprintf("d=$(mktemp -d %s/%s-XXXXXX) && chmod 755 \"$d\"", quote(n.Dir()), name)
	if user != "" {
		script += " && chown " + quote(user) + ": \"$d\""
	}
	out, err := n.Run(ctx, script+` && echo "$d"`)
	if err != nil {
		return "", fmt.Errorf("%s: make its directory on node %s: %w: %s", name, n.Name(), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// lookOnNode runs script, which prints a path, on n; empty output is
// ErrMissing, with hint.
func lookOnNode(n Node, what, script, hint string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	out, _ := n.Run(ctx, script)
	p := strings.TrimSpace(string(out))
	if p == "" || strings.Contains(p, "\n") {
		return "", fmt.Errorf("%s on node %s: %w (%s)", what, n.Name(), ErrMissing, hint)
	}
	return p, nil
}

// StartRedisOnNode starts redis-server as StartRedisWith does, on the
// node n, from its own redis-server (and libfaketime for opt.FakeClock);
// opt.Host is not used.
func StartRedisOnNode(ctx context.Context, n Node, opt RedisOptions) (*Server, error) {
	bin, err := lookOnNode(n, "redis-server", "command -v redis-server", "on Debian: apt-get install redis-server")
	if err != nil {
		return nil, err
	}
	var wrap []string
	dir, err := nodeDir(n, "redis", "")
	if err != nil {
		return nil, err
	}
	s := &Server{name: "redis-server", node: n, bin: bin, dir: dir, log: path.Join(dir, "redis.log"),
		quit: syscall.SIGTERM, crash: syscall.SIGKILL}
	if opt.FakeClock {
		preload, err := lookOnNode(n, "libfaketimeMT.so.1",
			"for f in /usr/lib/*/faketime/libfaketimeMT.so.1 /usr/lib/faketime/libfaketimeMT.so.1 /usr/lib64/faketime/libfaketimeMT.so.1; do [ -f \"$f\" ] && { echo \"$f\"; break; }; done",
			"on Debian: apt-get install libfaketime")
		if err == nil {
			var libc string
			libc, err = lookOnNode(n, "libc.so.6",
				"for f in /lib/*/libc.so.6 /usr/lib/*/libc.so.6 /lib64/libc.so.6 /usr/lib64/libc.so.6; do [ -f \"$f\" ] && { echo \"$f\"; break; }; done", "the C library")
			preload += " " + libc
		}
		if err != nil {
			s.stopOnNode()
			return nil, fmt.Errorf("redis-server: %w", err)
		}
		s.clock = true
		if err := s.JumpClock(0); err != nil {
			s.stopOnNode()
			return nil, fmt.Errorf("redis-server: %w", err)
		}
		wrap = []string{"-u", "FAKETIME", "LD_PRELOAD=" + preload, "FAKETIME_TIMESTAMP_FILE=" + path.Join(dir, clockFile),
			"FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1", bin}
		s.bin = "env"
	}
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
	s, err = launch(ctx, s, func(port int) {
		addr = net.JoinHostPort(n.IP(), strconv.Itoa(port))
		s.URL, s.Addr = "redis://"+addr+"/0", addr
		s.args = append(append(wrap, "--port", strconv.Itoa(port), "--bind", n.IP(), "--protected-mode", "no",
			"--save", "", "--dir", dir, "--logfile", "", "--daemonize", "no"), persist...)
	})
	if err != nil {
		(&Server{name: "redis-server", node: n, dir: dir}).stopOnNode()
		return nil, err
	}
	return s, nil
}

// StartPostgresOnNode starts PostgreSQL as StartPostgresOn does, on the
// node n, from its own initdb and postgres: as the user postgres when
// hiatus logs in as root, with trust for every address.
func StartPostgresOnNode(ctx context.Context, n Node) (*Server, error) {
	bin, err := lookOnNode(n, "initdb and postgres",
		`if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; else ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; fi`,
		"on Debian: apt-get install postgresql")
	if err != nil {
		return nil, err
	}
	who, err := lookOnNode(n, "id", "id -un", "")
	if err != nil {
		return nil, err
	}
	user := ""
	if who == "root" {
		user = "postgres"
	}
	dir, err := nodeDir(n, "postgres", user)
	if err != nil {
		return nil, err
	}
	s := &Server{name: "postgres", node: n, user: user, bin: path.Join(bin, "postgres"), dir: dir,
		log: path.Join(dir, "postgres.log"), quit: syscall.SIGINT, crash: syscall.SIGQUIT}
	data := path.Join(dir, "data")
	initdb := fmt.Sprintf("%s -D %s -U postgres --auth=trust --encoding=UTF8 --no-sync --no-instructions && echo 'host all all 0.0.0.0/0 trust' >> %s/pg_hba.conf",
		quote(path.Join(bin, "initdb")), quote(data), quote(data))
	if user != "" {
		initdb = fmt.Sprintf("cd %s && setpriv --reuid=%s --regid=%s --init-groups sh -c %s", quote(dir), user, user, quote(initdb))
	}
	if _, err := s.onNode(initdb); err != nil {
		s.stopOnNode()
		return nil, fmt.Errorf("initdb: %w", err)
	}
	s.ready = s.postgresReady
	s, err = launch(ctx, s, func(port int) { s.postgresOn(n.IP(), port, data, dir) })
	if err != nil {
		(&Server{name: "postgres", node: n, dir: dir}).stopOnNode()
		return nil, err
	}
	return s, nil
}

// jumpOnNode writes the offset of the server's fake clock on its node, by
// a rename, so that libfaketime never reads it half written; through Do,
// so that the jump comes as its event says, not a new session later.
func (s *Server) jumpOnNode(offset time.Duration) error {
	sign := "+"
	if offset < 0 {
		sign, offset = "-", -offset
	}
	f := quote(path.Join(s.dir, clockFile))
	return s.node.Do(fmt.Sprintf("printf '%%s\\n' %s > %s.new && mv %s.new %s",
		quote(fmt.Sprintf("%s%d.%09d", sign, offset/time.Second, offset%time.Second)), f, f, f))
}

// quote quotes s for sh.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
