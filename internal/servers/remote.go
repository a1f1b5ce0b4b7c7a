package servers

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/internal/shellquote"
	"github.com/hiatus-dev/hiatus/topology"
	"golang.org/x/sys/unix"
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
	if s.keep != "" {
		return s.keepOnNode()
	}
	if _, err := s.onNode("rm -rf " + shellquote.Quote(s.dir)); err != nil {
		return err
	}
	s.dir = ""
	return nil
}

// keepOnNode copies the server's log on its node to the file s.keep as it
// comes, and removes the server's directory: in one session, for a loaded
// node's sshd may take a good part of a second to open one, and one whose
// output is streamed, for a log may be larger than is worth holding in
// memory. The log is read only if it is a regular file and not a link,
// and no more than keptBytes of it: what is at its name was put there by
// the login user, who made the directory, but a link there would have
// the login user copy whatever it names into the run.
func (s *Server) keepOnNode() error {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	var stderr strings.Builder
	p, err := s.node.Start(ctx, []string{"sh", "-c", regularOnNode + ` && head -c ` + strconv.Itoa(keptBytes) + ` -- "$1"; c=$?; rm -rf -- "$2" && exit $c`,
		"sh", s.log, s.dir}, "", &stderr)
	if err != nil {
		return fmt.Errorf("keep %s's log: %w", s.name, err)
	}
	// The copy is bounded as the other commands on the node are.
	stop := context.AfterFunc(ctx, func() { _ = p.SignalGroup(syscall.SIGKILL) })
	defer stop()
	w, kept := files.Create(s.keep)
	if kept == nil {
		if _, kept = io.Copy(w, p.Stdout); kept != nil {
			w.Abort()
		}
	}
	if kept != nil {
		_, _ = io.Copy(io.Discard, p.Stdout) // for the command to end
	}
	if err := p.Wait(); err != nil {
		if kept == nil {
			w.Abort()
		}
		return fmt.Errorf("keep %s's log on node %s: %w: %s", s.name, s.node.Name(), err, strings.TrimSpace(stderr.String()))
	}
	s.dir = ""
	if kept == nil {
		kept = w.Close()
	}
	if kept != nil {
		return fmt.Errorf("keep %s's log: %w", s.name, kept)
	}
	return nil
}

// regularOnNode is sh that succeeds if "$1" is a regular file and not a
// link, and says on its standard error why not if not.
const regularOnNode = `{ [ ! -L "$1" ] && [ -f "$1" ] || { echo "$1 is a link or not a regular file: not read" >&2; false; }; }`

// tailOnNode is tail of the server's log on its node, read only if it is
// a regular file and not a link, as keepOnNode reads it.
func (s *Server) tailOnNode() string {
	// No more than the log's last tailBytes: a line may be long.
	out, err := s.onNode(fmt.Sprintf("set -- %s; %s && tail -c %d -- \"$1\" | tail -n 8", shellquote.Quote(s.log), regularOnNode, tailBytes))
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
	return nodePort(), nil
}

// nodePort is a port of a node's unprivileged range, at random: a node's
// free ports cannot be asked for from here.
func nodePort() int { return 20000 + rand.IntN(30000) }

// nodeDir makes a directory for a server of the run on its node, the
// login user's, as every file in it is, which no one else may write in:
// with a subdirectory data that is user's, unless user is "", which
// user may pass through the directory to (0711) but not plant a link
// where the login user opens a file (the server's log, its
// configuration). As tempDir does on this machine.
func nodeDir(n Node, name, user string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	script := fmt.Sprintf("d=$(mktemp -d %s/%s-XXXXXX) && chmod 711 \"$d\"", shellquote.Quote(n.Dir()), name)
	if user != "" {
		script += " && mkdir -m 700 \"$d/data\" && chown " + shellquote.Quote(user) + ": \"$d/data\""
	}
	out, err := n.Run(ctx, script+` && echo "$d"`)
	if err != nil {
		return "", fmt.Errorf("%s: make its directory on node %s: %w: %s", name, n.Name(), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// A Need is what a server needs of its node: a program or a library, and
// how a shell there finds it (Script prints its path, or a word when what
// it asks is so; nothing when it is missing), and what to do when it is.
type Need struct {
	What, Script, Hint string
}

// The needs of the servers hiatus starts on a node. The run asks a node
// for those of its roles (RedisNeeds, PostgresNeeds) before it starts
// anything (a pre-flight); a server looks up those it runs as it starts.
var (
	needRedis    = Need{"redis-server", "command -v redis-server", "on Debian: apt-get install redis-server"}
	needPostgres = Need{"initdb and postgres",
		`if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; else ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; fi`,
		"on Debian: apt-get install postgresql"}
	// needPostgresUser: logged in as root, hiatus runs PostgreSQL as the
	// user postgres (initdb and postgres refuse root), through setpriv.
	needPostgresUser = Need{"the user postgres and setpriv (hiatus logs in as root, and runs PostgreSQL as postgres)",
		`if [ "$(id -u)" != 0 ]; then echo ok; elif command -v setpriv >/dev/null 2>&1 && id -u postgres >/dev/null 2>&1; then echo ok; fi`,
		"on Debian: apt-get install postgresql util-linux, which make both"}
	needEtcd    = Need{"etcd", "command -v etcd", "on Debian: apt-get install etcd-server"}
	needJava    = Need{"java", "command -v java", "on Debian: apt-get install zookeeper"}
	needZooJars = Need{"ZooKeeper's jars (" + strings.Join(zooJars, ", ") + ")",
		`for j in ` + strings.Join(zooJars, " ") + `; do [ -f "$j" ] || exit 0; done; echo ok`, "on Debian: apt-get install zookeeper"}
	needFaketime = Need{"libfaketimeMT.so.1",
		"for f in /usr/lib/*/faketime/libfaketimeMT.so.1 /usr/lib/faketime/libfaketimeMT.so.1 /usr/lib64/faketime/libfaketimeMT.so.1; do [ -f \"$f\" ] && { echo \"$f\"; break; }; done",
		"on Debian: apt-get install libfaketime"}
	needLibc = Need{"libc.so.6",
		"for f in /lib/*/libc.so.6 /usr/lib/*/libc.so.6 /lib64/libc.so.6 /usr/lib64/libc.so.6; do [ -f \"$f\" ] && { echo \"$f\"; break; }; done", "the C library"}
)

// RedisNeeds are what a Redis node of a run needs; with fakeClock, the
// clock a fault steps.
func RedisNeeds(fakeClock bool) []Need {
	if fakeClock {
		return []Need{needRedis, needFaketime}
	}
	return []Need{needRedis}
}

// ZooKeeperNeeds are what a ZooKeeper server's node of a run needs.
func ZooKeeperNeeds() []Need { return []Need{needJava, needZooJars} }

// EtcdNeeds are what the etcd lock's node of a run needs.
func EtcdNeeds() []Need { return []Need{needEtcd} }

// PostgresNeeds are what PostgreSQL's node of a run needs.
func PostgresNeeds() []Need { return []Need{needPostgres, needPostgresUser} }

// lookOnNode runs need's script on n and returns the path it prints;
// none is ErrMissing, with the need's hint.
func lookOnNode(n Node, need Need) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	out, _ := n.Run(ctx, need.Script)
	p := strings.TrimSpace(string(out))
	if p == "" || strings.Contains(p, "\n") {
		return "", fmt.Errorf("%s on node %s: %w (%s)", need.What, n.Name(), ErrMissing, need.Hint)
	}
	return p, nil
}

// StartRedisOnNode starts redis-server as StartRedisWith does, on the
// node n, from its own redis-server (and libfaketime for opt.FakeClock);
// opt.Host is not used.
func StartRedisOnNode(ctx context.Context, n Node, opt RedisOptions) (*Server, error) {
	bin, err := lookOnNode(n, needRedis)
	if err != nil {
		return nil, err
	}
	extra, err := replicaArgs(opt)
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
		preload, err := lookOnNode(n, needFaketime)
		if err == nil {
			var libc string
			libc, err = lookOnNode(n, needLibc)
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
	s, err = launchRedis(ctx, s, n.IP(), opt, "", wrap, append(extra, "--protected-mode", "no"))
	if err != nil {
		(&Server{name: "redis-server", node: n, dir: dir}).stopOnNode()
		return nil, err
	}
	return s, nil
}

// StartPostgresOnNode starts PostgreSQL as StartPostgresOn does, on the
// node n, from its own initdb and postgres: as the user postgres when
// hiatus logs in as root, with a password of its own for every address.
func StartPostgresOnNode(ctx context.Context, n Node) (*Server, error) {
	bin, err := lookOnNode(n, needPostgres)
	if err != nil {
		return nil, err
	}
	who, err := lookOnNode(n, Need{"id", "id -un", ""})
	if err != nil {
		return nil, err
	}
	user := ""
	if who == "root" {
		user = "postgres"
	}
	password, verifier, err := newPassword()
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	dir, err := nodeDir(n, "postgres", user)
	if err != nil {
		return nil, err
	}
	s := &Server{name: "postgres", node: n, user: user, bin: path.Join(bin, "postgres"), dir: dir,
		log: path.Join(dir, "postgres.log"), quit: syscall.SIGINT, crash: syscall.SIGQUIT}
	data, hba := path.Join(dir, "data"), path.Join(dir, hbaFile)
	if _, err := s.onNode(initdbOnNode(bin, dir, data, hba, verifier, user)); err != nil {
		s.stopOnNode()
		return nil, fmt.Errorf("initdb: %w", err)
	}
	s.ready = s.postgresReady
	s, err = launch(ctx, s, func(port int) { s.postgresOn(n.IP(), port, data, hba, password) })
	if err != nil {
		(&Server{name: "postgres", node: n, dir: dir}).stopOnNode()
		return nil, err
	}
	return s, nil
}

// initdbOnNode is the script that writes the server's pg_hba.conf (hba),
// as the login user, and makes its data in data as user ("" for the login
// user) and gives the superuser the password whose verifier is verifier,
// as initdb does on this machine. The verifier is on the command line,
// which other users of the node may read: it lets no one log in.
func initdbOnNode(bin, dir, data, hba, verifier, user string) string {
	q := shellquote.Quote
	initdb := fmt.Sprintf("%s -D %s -U postgres --auth=reject --encoding=UTF8 --no-sync --no-instructions < /dev/null && "+
		"printf %%s %s | %s --single -D %s -c exit_on_error=on -c fsync=off postgres",
		q(path.Join(bin, "initdb")), q(data), q(passwordSQL(verifier)), q(path.Join(bin, "postgres")), q(data))
	if user != "" {
		initdb = fmt.Sprintf("setpriv --reuid=%s --regid=%s --init-groups sh -c %s", user, user, q(initdb))
	}
	// noclobber: the file is made, not written through what is there.
	return fmt.Sprintf("set -C && printf %%s %s > %s && cd %s && %s", q(hbaConf), q(hba), q(dir), initdb)
}

// jumpOnNode writes the offset of the server's fake clock on its node, by
// a rename, so that libfaketime never reads it half written; through Do,
// so that the jump comes as its event says, not a new session later.
func (s *Server) jumpOnNode(offset time.Duration) error {
	f := shellquote.Quote(path.Join(s.dir, clockFile))
	return s.node.Do(fmt.Sprintf("printf '%%s\\n' %s > %s.new && mv %s.new %s", shellquote.Quote(clockOffset(offset)), f, f, f))
}

// SignalTree sends sig to the server's process on its node and to that
// process's children there: a PostgreSQL postmaster and its backends,
// each of which leads a session of its own (a signal to the postmaster's
// group reaches none of them). A stop reaches the server first, which
// then forks no more; a resume, its children first, while their parent
// is still there to find them by. A child gone meanwhile is no error; the
// server gone is, and a server that has exited is not signalled (its PID
// may be another process's). The children are read from the node's
// /proc with one grep, which reads on past a process that exits as it
// looks (awk stopped there, a grep each took seconds).
func (s *Server) SignalTree(sig syscall.Signal) error {
	s.mu.Lock()
	pid, done := s.pid, s.done
	s.mu.Unlock()
	if s.node == nil || pid <= 1 || done == nil {
		return fmt.Errorf("%s: no process on a node to signal", s.name)
	}
	select {
	case <-done:
		return fmt.Errorf("%s on node %s: pid %d: %w", s.name, s.node.Name(), pid, os.ErrProcessDone)
	default:
	}
	name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
	self := fmt.Sprintf("kill -s %s %d", name, pid)
	children := fmt.Sprintf(`for f in $(grep -l -s -x "PPid:[[:space:]]*%d" /proc/[0-9]*/status); do p=${f#/proc/}; kill -s %s "${p%%/status}" 2>/dev/null; done; true`, pid, name)
	line := fmt.Sprintf("(%s && { %s; })", self, children)
	if sig == syscall.SIGCONT {
		line = fmt.Sprintf("(kill -0 %d && { %s; } && %s)", pid, children, self)
	}
	return s.node.Do(line)
}
