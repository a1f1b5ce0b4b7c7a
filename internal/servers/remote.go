package servers

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/internal/shellquote"
	"github.com/hiatus-dev/hiatus/topology"
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
	s.started(p.Pid(), p.Signal, p.Wait)
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
	script := "rm -rf " + shellquote.Quote(s.dir)
	if s.keep != "" {
		script = "cat " + shellquote.Quote(s.log) + "; " + script
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
	out, err := s.onNode("tail -n 8 " + shellquote.Quote(s.log))
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
	script := fmt.Sprintf("d=$(mktemp -d %s/%s-XXXXXX) && chmod 755 \"$d\"", shellquote.Quote(n.Dir()), name)
	if user != "" {
		script += " && chown " + shellquote.Quote(user) + ": \"$d\""
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
		wrap = fakeClockArgs(preload, path.Join(dir, clockFile), bin)
		s.bin = "env"
	}
	// Its clients are on other machines, which protected mode would turn
	// away (it has no password); its log is its output, which Start
	// appends to s.log.
	s, err = launchRedis(ctx, s, n.IP(), opt, "", wrap, []string{"--protected-mode", "no"})
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
		shellquote.Quote(path.Join(bin, "initdb")), shellquote.Quote(data), shellquote.Quote(data))
	if user != "" {
		initdb = fmt.Sprintf("cd %s && setpriv --reuid=%s --regid=%s --init-groups sh -c %s", shellquote.Quote(dir), user, user, shellquote.Quote(initdb))
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
	f := shellquote.Quote(path.Join(s.dir, clockFile))
	return s.node.Do(fmt.Sprintf("printf '%%s\\n' %s > %s.new && mv %s.new %s", shellquote.Quote(clockOffset(offset)), f, f, f))
}
