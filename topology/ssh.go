package topology

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/internal/shellquote"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/sys/unix"
)

// An SSHHost is a machine reached over SSH: a node of an Inventory. What
// a run starts there is tied to its connection. On connecting, it makes a
// directory of the run's on the node (Dir), inside a directory of the
// user hiatus logs in as (RunsDir), and starts a watchdog there: a shell
// that waits for its standard input to close — the run's Close, or the
// connection's loss when hiatus dies, even by SIGKILL — and then kills
// every process the run started on the node, removes the firewall rules
// its Isolate added and the directory. What a watchdog could not do (the
// node rebooted, say) the next run that connects to the node does first.
type SSHHost struct {
	node   Node
	tag    string // the run's: names its directory and its firewall chain and rules
	runs   Node   // the node, its Dir as the sweep resolved it, once known
	dir    string // the run's directory on the node, once known
	client *ssh.Client
	shells *shells // nil: a session is opened when it is needed

	watchIn   io.WriteCloser // closing it ends the run on the node
	watch     *ssh.Session
	watchConn *ssh.Client   // the watchdog's connection: the host's, or one shells added
	watchOut  *bufio.Reader // the watchdog's answers to the commands it runs
	ctlMu     sync.Mutex    // held through a command of the watchdog's

	mu       sync.Mutex
	cut      map[string]bool // the IPs Isolate cut the node from
	unsure   bool            // a rule change failed: the rules may differ from cut
	closed   bool
	closeErr error
}

// NewRunTag returns a tag for a run's things on its nodes: this process's
// PID and a random part, so that two runs of one machine, or of two, do
// not share one.
func NewRunTag() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("hs%d-%s", os.Getpid(), hex.EncodeToString(b))
}

// runTag is what NewRunTag makes; the sweep of a node (sweepScript) takes
// the run directories it finds there for runs' by it.
var runTag = regexp.MustCompile(`^hs[0-9]+-[0-9a-f]{6}$`)

// sshTimeout bounds the connection to a node and its first commands.
const sshTimeout = 15 * time.Second

// DialSSH connects to node for the run tagged tag (NewRunTag), removes
// what runs of the node that have ended left there, and makes the run's
// directory and watchdog. Its errors name the node.
func DialSSH(ctx context.Context, node Node, tag string) (*SSHHost, error) {
	fail := func(err error) (*SSHHost, error) {
		return nil, fmt.Errorf("node %s (%s): %w", node.Name, node.Addr, err)
	}
	if !runTag.MatchString(tag) {
		return fail(fmt.Errorf("run tag %q: want one of NewRunTag's", tag))
	}
	ctx, cancel := context.WithTimeout(ctx, sshTimeout)
	defer cancel()
	client, err := dial(ctx, node)
	if err != nil {
		return fail(err)
	}
	h := &SSHHost{node: node, tag: tag, client: client, shells: newShells(node, client)}
	if err := h.start(ctx); err != nil {
		h.client.Close()
		h.shells.close()
		return fail(err)
	}
	return h, nil
}

// dial connects to node and logs in, the connection and the handshake
// bounded by ctx and by sshTimeout: a node that accepts and then says
// nothing must not hang the run.
func dial(ctx context.Context, node Node) (*ssh.Client, error) {
	cfg, err := clientConfig(node)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, sshTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", node.Addr)
	if err != nil {
		return nil, err
	}
	// The handshake ends with ctx: a close, not a deadline on conn, which
	// would have to be cleared after it and could fail it as ctx ends.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, node.Addr, cfg)
	if !stop() {
		conn.Close()
		return nil, fmt.Errorf("%w (ssh handshake: %v)", ctx.Err(), err)
	}
	if err != nil {
		conn.Close()
		return nil, loginRefused(node, err)
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// RunsDir is the directory on node that holds the runs of the user
// hiatus logs in as there, whose uid is uid: DIR/hiatus-UID, DIR being
// the node's Dir (a run's, its links resolved). hiatus makes it, mode 0711, and keeps a run there only
// while it is that user's own: a directory, not a link, owned by uid,
// that no one else may read or write in (others may pass through it, to
// reach a server's directory that runs as another user: PostgreSQL's).
// So nothing another user of the node made can pass for a run's: in a
// DIR anyone may write in (/tmp), a directory beside it is not looked at.
func RunsDir(node Node, uid int) string {
	return path.Join(node.Dir, "hiatus-"+strconv.Itoa(uid))
}

// RunDir is the directory on node of the run tagged tag (or, with a tag's
// beginning, what the names of those of runs whose tags begin so begin
// with), in RunsDir of uid: named after the node as well as the run, for
// nodes that share a file system (a test's) to tell theirs apart.
func RunDir(node Node, uid int, tag string) string {
	return path.Join(RunsDir(node, uid), "ssh-"+node.Name+"-"+tag)
}

// The bounds of the files a node's login reads: far above an OpenSSH
// key's few kilobytes, and a known_hosts of many thousand hosts.
const (
	KeyLimit        = 1 << 20
	KnownHostsLimit = 16 << 20
)

// clientConfig is how hiatus logs in to node: its key, and its host key
// checked against its known_hosts file. Both are read as regular files
// alone, to a limit: a named pipe would wait for a writer past any signal,
// /dev/zero would never end.
func clientConfig(node Node) (*ssh.ClientConfig, error) {
	b, err := files.ReadFile(node.Key, KeyLimit)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", node.Key, err)
	}
	hostKeys, err := knownHosts(node.KnownHosts)
	if err != nil {
		return nil, fmt.Errorf("known-hosts: %w", err)
	}
	return &ssh.ClientConfig{User: node.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: checkHostKey(node, hostKeys), Timeout: sshTimeout}, nil
}

// knownHosts is the host key check of the known_hosts file at path, read
// as files.ReadFile reads. knownhosts.New opens the files it is given by
// name, as they are, and reads them whole: it is given a private copy of
// what was read (a new temporary file of hiatus's, which nothing can have
// been planted at or swap), removed once read. Its errors would name the
// copy: the lines are checked first (checkKnownHosts), so that a mistake
// in one is told with path and its number.
func knownHosts(path string) (ssh.HostKeyCallback, error) {
	b, err := files.ReadFile(path, KnownHostsLimit)
	if err != nil {
		return nil, err
	}
	if err := checkKnownHosts(b); err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	f, err := os.CreateTemp("", "hiatus-known-hosts-")
	if err != nil {
		return nil, fmt.Errorf("%s: a private copy: %w", path, err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: a private copy: %w", path, err)
	}
	cb, err := knownhosts.New(f.Name())
	if err != nil {
		return nil, fmt.Errorf("%s (as copied to %s): %w", path, f.Name(), err)
	}
	return cb, nil
}

// checkKnownHosts refuses the first line of the known_hosts file b that is
// not one, or longer than knownhosts reads, its error beginning with the
// line's number.
func checkKnownHosts(b []byte) error {
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(line) >= bufio.MaxScanTokenSize {
			return fmt.Errorf("%d: a line of %d bytes, longer than knownhosts reads (%d)", i+1, len(line), bufio.MaxScanTokenSize-1)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if _, _, _, _, _, err := ssh.ParseKnownHosts(line); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%d: %w", i+1, err)
		}
	}
	return nil
}

// start removes what ended runs left on the node and starts the run's
// watchdog, which makes the run's directory.
func (h *SSHHost) start(ctx context.Context) error {
	out, err := h.Run(ctx, h.sweepScript())
	if err != nil {
		return fmt.Errorf("remove what ended runs left: %w: %s", err, out)
	}
	uid, dir, err := sweepAnswer(out)
	if err != nil {
		return err
	}
	// The run's directory is in DIR as the sweep found it, its links
	// resolved: a link among them, another user's, could be pointed
	// elsewhere since.
	h.runs = Node{Name: h.node.Name, Dir: dir}
	h.dir = RunDir(h.runs, uid, h.tag)
	sh, err := h.shell(ctx)
	if err != nil {
		return err
	}
	s, in, out2 := sh.s, sh.in, sh.out
	h.watchConn = sh.c
	var stderr strings.Builder
	// A shell of its own, whose command line holds the run's directory:
	// the one kept ready was started with none.
	if err := sh.run("exec sh -c "+shellquote.Quote(h.watchdogScript()), &stderr); err != nil {
		s.Close()
		return err
	}
	h.watchOut = bufio.NewReader(out2)
	line, err := readAfter(ctx, h.watchOut, markPrefix)
	if err == nil && line != strings.TrimPrefix(startMark, markPrefix) {
		err = refused(strings.TrimPrefix(markPrefix+line, refuseMark))
	}
	if err != nil {
		// The watchdog, its input closed, removes what it made (the
		// run's directory, once it is past the mark): waited for, as
		// Close waits, so that a set-up cut short leaves nothing.
		in.Close()
		_ = cleanedUp(s)
		s.Close()
		if errors.Is(err, ErrRunsDir) {
			return err
		}
		// ctx's end stays one: a set-up cut short is not told as a failure.
		return fmt.Errorf("make the run's directory %s: %w: %s", h.dir, err, strings.TrimSpace(stderr.String()))
	}
	h.watch, h.watchIn = s, in
	return nil
}

// watchdogScript is the watchdog's: it checks the runs' directory again
// (it is the user's own, and so cannot have changed but by the user's or
// root's doing since the sweep), makes the run's directory and, once
// its input closes, cleans up. Its command line holds the directory: a
// later run tells a live watchdog by it, not by a PID that may have been
// reused. It runs the commands it reads, a line each, and answers with
// their exit status: a signal sent through it takes no new session, which
// a loaded node's sshd may take a good part of a second to open. Its
// clean-up is in the script, as the sweep's is: no script on disk is run.
func (h *SSHHost) watchdogScript() string {
	return fmt.Sprintf(`umask 022
unset TMOUT 2>/dev/null
%s
hiatus_own %s || exit 0
d=%s
mkdir -- "$d" && echo $$ > "$d/watchdog" || exit 1
echo %s
while IFS= read -r c; do eval "$c" < /dev/null > /dev/null 2>&1; echo "$?"; done
hiatus_cleanup "$d" %s`, shellFuncs, shellquote.Quote(h.runs.Dir), shellquote.Quote(h.dir), startMark,
		shellquote.Quote(h.chain()))
}

// chain is the run's iptables chain on the node; its rules, and the jumps
// to it, carry its name as their comment too.
func (h *SSHHost) chain() string { return "hiatus-" + h.tag }

// ErrRunsDir is the error of a node whose directory for hiatus's runs
// (RunsDir) is not the own of the user hiatus logs in as.
var ErrRunsDir = errors.New("the node's directory for hiatus's runs is not hiatus's own")

// refused is the error of a refusal of the runs' directory, for reason.
func refused(reason string) error {
	return fmt.Errorf("%w: %s (hiatus keeps its runs in DIR/hiatus-UID: a directory, not a link, owned by the user it logs in as, that no one else may read or write in, in a DIR that, with each directory above it, is root's or that user's and that others may not write in unless it is sticky; docs/hosts.md)",
		ErrRunsDir, reason)
}

// shellFuncs are the shell functions of the sweep and the watchdog.
//
// hiatus_own DIR refuses, saying why on a line that begins with
// refuseMark, unless DIR/hiatus-UID (RunsDir; UID is the user's, in hu),
// made if missing, is the user's own; DIR's links resolved (in hr), so
// that what follows uses a path of directories alone, in p. DIR and each
// directory above it must be one others can neither replace nor put a
// directory of theirs in the place of what it holds, as sshd's
// StrictModes asks of a home: root's or the user's, and not writable by
// others unless sticky (/tmp).
//
// hiatus_cleanup RUNDIR CHAIN ends what a run started on the node: every
// process whose working directory is in the run's directory (a command
// line would not tell, for servers rewrite theirs), whatever its group —
// a child that left its leader's is found too — scanned again until none
// is left, for one may fork as it dies; then its firewall rules and the
// directory.
const shellFuncs = `hiatus_refuse() { echo "` + refuseMark + `$*"; }
hiatus_own() {
  hd=$1; hu=$(id -u) || return 1
  set -- $(LC_ALL=C ls -ldnL -- "$hd" 2>/dev/null)
  case $1 in
  d*) ;;
  '') hiatus_refuse "$hd does not exist"; return 1;;
  *) hiatus_refuse "$hd is not a directory"; return 1;;
  esac
  hr=$(cd -P -- "$hd" 2>/dev/null && pwd -P && echo .) || { hiatus_refuse "$hd cannot be entered"; return 1; }
  hr=${hr%.}; hr=${hr%?}
  case $hr in
  *"
"*|'') hiatus_refuse "$hd is a path hiatus does not take (a line break in it)"; return 1;;
  esac
  a=$hr
  while :; do
    set -- $(LC_ALL=C ls -ldn -- "$a" 2>/dev/null)
    w=$a; [ "$a" = "$hd" ] || w="$hd: $a"
    case $1 in
    d*) ;;
    *) hiatus_refuse "$w is not a directory"; return 1;;
    esac
    if [ "$3" != 0 ] && [ "$3" != "$hu" ]; then hiatus_refuse "$w is owned by uid $3, not by root or uid $hu, the user hiatus logs in as (another user could put a directory of theirs in the place of hiatus's)"; return 1; fi
    case $1 in
    d????????[tT]*|d????-??-*) ;;
    *) hiatus_refuse "$w has mode $1: others may write in it, and it is not sticky (another user could put a directory of theirs in the place of hiatus's)"; return 1;;
    esac
    [ "$a" = / ] && break
    a=${a%/*}; a=${a:-/}
  done
  case $hr in /) p=/hiatus-$hu;; *) p=$hr/hiatus-$hu;; esac
  [ -e "$p" ] || [ -L "$p" ] || mkdir -m 711 -- "$p" 2>/dev/null
  if [ -L "$p" ]; then hiatus_refuse "$p is a symbolic link"; return 1; fi
  set -- $(LC_ALL=C ls -ldn -- "$p" 2>/dev/null)
  case $1 in
  d*) ;;
  '') hiatus_refuse "$p cannot be made"; return 1;;
  *) hiatus_refuse "$p is not a directory"; return 1;;
  esac
  if [ "$3" != "$hu" ]; then hiatus_refuse "$p is owned by uid $3, not by uid $hu, the user hiatus logs in as"; return 1; fi
  case $1 in
  drwx--[-x]--[-x]|drwx--[-x]--[-x].) ;;
  *) hiatus_refuse "$p has mode $1: want drwx--x--x or drwx------"; return 1;;
  esac
}
hiatus_cleanup() {
  n=0
  while [ $n -lt 20 ]; do
    found=
    for q in /proc/[0-9]*; do
      case "$(readlink "$q"/cwd 2>/dev/null)" in
      "$1"|"$1"/*) kill -s KILL "${q#/proc/}" 2>/dev/null && found=1;;
      esac
    done
    [ -n "$found" ] || break
    n=$((n + 1)); sleep 0.1
  done
  if command -v iptables >/dev/null 2>&1; then
    for c in INPUT OUTPUT; do
      while iptables -w -D "$c" -j "$2" -m comment --comment "$2" 2>/dev/null; do :; done
    done
    iptables -w -F "$2" 2>/dev/null; iptables -w -X "$2" 2>/dev/null
  fi
  rm -rf -- "$1"
}`

// sweepScript checks the node's runs' directory (making it if missing),
// cleans up each run directory of the node there whose watchdog is gone,
// and says the user's uid and the node's DIR, its links resolved. It looks nowhere else: what is in the runs'
// directory only the user (or root) can have put there. The clean-up is
// made from the directory's name, the run's tag in it; nothing there is
// run.
func (h *SSHHost) sweepScript() string {
	return fmt.Sprintf(`%s
hiatus_own %s || exit 0
for d in "$p"/ssh-%[3]s-*; do
  [ -d "$d" ] && [ ! -L "$d" ] && [ -f "$d/watchdog" ] || continue
  t=${d##*/ssh-%[3]s-}; n=${t%%-*}; n=${n#hs}; r=${t##*-}
  case $n in ''|*[!0-9]*) continue;; esac
  case $r in ??????) ;; *) continue;; esac
  case $r in *[!0-9a-f]*) continue;; esac
  [ "$t" = "hs$n-$r" ] || continue
  w=; read -r w < "$d/watchdog"
  case $w in ''|*[!0-9]*) ;; *) grep -qaF "$d" /proc/"$w"/cmdline 2>/dev/null && continue;; esac
  hiatus_cleanup "$d" "hiatus-$t"
done
echo %[4]s"$hu $hr"`, shellFuncs, shellquote.Quote(path.Clean(h.node.Dir)), h.node.Name, uidMark)
}

// The lines of the sweep and the watchdog that say how they went; each
// begins with markPrefix.
const (
	markPrefix = "hiatus-ssh-"
	refuseMark = markPrefix + "refuse " // the runs' directory refused, and why
	uidMark    = markPrefix + "uid "    // the sweep done, and the user's uid
)

// sweepAnswer is the uid and the resolved DIR the sweep's output out
// says, or its refusal.
func sweepAnswer(out []byte) (int, string, error) {
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSuffix(line, "\n")
		if reason, ok := strings.CutPrefix(line, refuseMark); ok {
			return 0, "", refused(reason)
		}
		if rest, ok := strings.CutPrefix(line, uidMark); ok {
			u, dir, _ := strings.Cut(rest, " ")
			uid, err := strconv.Atoi(u)
			if err != nil || uid < 0 || !path.IsAbs(dir) {
				return 0, "", fmt.Errorf("the sweep said uid and directory %q", rest)
			}
			return uid, dir, nil
		}
	}
	return 0, "", fmt.Errorf("the sweep said nothing of the user's uid: %q", out)
}

// Name is the node's name in the inventory.
func (h *SSHHost) Name() string { return h.node.Name }

// IP is the node's address, as the inventory gives it.
func (h *SSHHost) IP() string { return h.node.IP() }

// Dir is the run's directory on the node, removed when the run ends.
func (h *SSHHost) Dir() string { return h.dir }

// startMark is the line a command of hiatus prints before anything else:
// what the login shell's start-up files print (a .bashrc that sshd has
// bash read, a pyenv that cannot rehash) comes before it and is not the
// command's.
const startMark = "hiatus-ssh-start"

// afterMark is what follows the first line startMark in out, or all of
// out when no such line is there.
func afterMark(out []byte) []byte {
	if _, rest, ok := bytes.Cut(append([]byte("\n"), out...), []byte("\n"+startMark+"\n")); ok {
		return rest
	}
	return out
}

// Run runs script with sh on the node and returns what it printed on its
// standard output; what it printed on its standard error is in the error
// when it fails.
func (h *SSHHost) Run(ctx context.Context, script string) ([]byte, error) {
	sh, err := h.shell(ctx)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", h.node.Name, err)
	}
	s := sh.s
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	var stderr bytes.Buffer
	if err := sh.run("echo "+startMark+"\n"+script, &stderr); err != nil {
		return nil, fmt.Errorf("node %s: %w", h.node.Name, err)
	}
	sh.in.Close()
	stdout, _ := io.ReadAll(sh.out)
	err = s.Wait()
	out := afterMark(stdout)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		if e := strings.TrimSpace(stderr.String()); e != "" {
			err = fmt.Errorf("%w: %s", err, e)
		}
		return out, fmt.Errorf("node %s: %w", h.node.Name, err)
	}
	return out, nil
}

// shell returns a shell of the node's ready to run a script: one kept
// ready, or else a new one.
func (h *SSHHost) shell(ctx context.Context) (*shell, error) {
	if h.shells == nil {
		return openShell(h.client)
	}
	return h.shells.take(ctx)
}

// readAfter reads lines from r until one begins with prefix, and returns
// that line without it: the lines before it are the start-up files'.
func readAfter(ctx context.Context, r *bufio.Reader, prefix string) (string, error) {
	for {
		line, err := readLine(ctx, r)
		if err != nil {
			return "", err
		}
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSuffix(rest, "\n"), nil
		}
	}
}

// maxWriteOutput bounds what Write keeps of its command's output, for an
// error: the rest is dropped with the session.
const maxWriteOutput = 64 << 10

// Write writes the size bytes r holds to the file path on the node, with
// mode. The file is put in place only once all of them are there: a copy
// cut short (the connection lost, ctx ended) leaves no file at path.
func (h *SSHHost) Write(ctx context.Context, path string, mode os.FileMode, r io.Reader, size int64) error {
	sh, err := h.shell(ctx)
	if err != nil {
		return fmt.Errorf("node %s: %w", h.node.Name, err)
	}
	s := sh.s
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	p := shellquote.Quote(path)
	var stderr bytes.Buffer
	err = sh.run(fmt.Sprintf(`cat > %s.part && [ "$(wc -c < %s.part)" -eq %d ] && chmod %o %s.part && mv %s.part %s || { rm -f %s.part; exit 1; }`,
		p, p, size, mode, p, p, p, p), &stderr)
	if err != nil {
		return fmt.Errorf("node %s: write %s: %w", h.node.Name, path, err)
	}
	// A copy cut short still ends its input and waits for the node to
	// remove what it took.
	_, err = io.Copy(sh.in, io.LimitReader(r, size))
	sh.in.Close()
	out, _ := io.ReadAll(io.LimitReader(sh.out, maxWriteOutput)) // cat, chmod and mv say little
	werr := s.Wait()
	switch {
	case err != nil:
		return fmt.Errorf("node %s: write %s: %w", h.node.Name, path, err)
	case werr != nil:
		return fmt.Errorf("node %s: write %s: %w: %s%s", h.node.Name, path, werr, out, stderr.Bytes())
	}
	return nil
}

// A Proc is a process started on a node.
type Proc struct {
	h      *SSHHost
	pid    int
	Stdin  io.WriteCloser // its standard input
	Stdout io.Reader      // its standard output, unless it went to a log
	done   chan struct{}
	err    error
}

// Start starts argv on the node, as the leader of a process group of its
// own, in the run's directory. With log set, its output is appended to
// that file of the node, else it comes on Proc.Stdout; what it writes on
// its standard error goes to stderr, unless that is nil. Its life is the
// run's: the watchdog kills its group when the run ends.
func (h *SSHHost) Start(ctx context.Context, argv []string, log string, stderr io.Writer) (*Proc, error) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("node %s: closed", h.node.Name)
	}
	sh, err := h.shell(ctx)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", h.node.Name, err)
	}
	s, out := sh.s, sh.out
	p := &Proc{h: h, done: make(chan struct{}), Stdin: sh.in}
	fail := func(err error) (*Proc, error) {
		s.Close()
		return nil, fmt.Errorf("node %s: start %s: %w", h.node.Name, argv[0], err)
	}
	var q []string
	for _, a := range argv {
		q = append(q, shellquote.Quote(a))
	}
	redirect := ""
	if log != "" {
		redirect = " >> " + shellquote.Quote(log) + " 2>&1 < /dev/null"
	}
	// sshd makes the shell a session's leader: its PID, which exec hands
	// on, is its group's. Its working directory, the run's, is how the
	// watchdog and a later run find it and what it starts.
	cmd := fmt.Sprintf("cd %s && echo %s $$ && exec %s%s", shellquote.Quote(h.dir), startMark, strings.Join(q, " "), redirect)
	if err := sh.run(cmd, stderr); err != nil {
		return fail(err)
	}
	r := bufio.NewReader(out)
	line, err := readAfter(ctx, r, startMark+" ")
	if err == nil {
		p.pid, err = strconv.Atoi(strings.TrimSpace(line))
	}
	if err != nil {
		return fail(fmt.Errorf("read its PID: %w", err))
	}
	p.Stdout = r
	go func() {
		p.err = s.Wait()
		s.Close()
		close(p.done)
	}()
	return p, nil
}

// readLine reads a line from r, unless ctx ends first.
func readLine(ctx context.Context, r *bufio.Reader) (string, error) {
	type result struct {
		line string
		err  error
	}
	c := make(chan result, 1)
	go func() {
		l, err := r.ReadString('\n')
		c <- result{l, err}
	}()
	select {
	case res := <-c:
		return res.line, res.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Pid is the process's PID on its node.
func (p *Proc) Pid() int { return p.pid }

// Signal sends sig to the process alone; once it has exited, the error
// is os.ErrProcessDone (its PID may be another process's by then).
func (p *Proc) Signal(sig syscall.Signal) error {
	if err := p.exited(); err != nil {
		return err
	}
	return p.h.kill(sig, strconv.Itoa(p.pid))
}

// SignalGroup sends sig to the process's group: it and what it started;
// once it has exited, the error is os.ErrProcessDone, as Signal's.
func (p *Proc) SignalGroup(sig syscall.Signal) error {
	if err := p.exited(); err != nil {
		return err
	}
	return p.h.kill(sig, "-"+strconv.Itoa(p.pid))
}

// exited is os.ErrProcessDone, naming the node and PID, once the process
// has exited; nil before.
func (p *Proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("node %s: pid %d: %w", p.h.node.Name, p.pid, os.ErrProcessDone)
	default:
		return nil
	}
}

// Wait waits for the process to exit; a signal's end is an
// *ssh.ExitError whose Signal names it.
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// signalTimeout bounds a kill on a node: a fault's begin or end.
const signalTimeout = 10 * time.Second

// kill runs kill(1) with sig on the node for target, a PID or -PGID,
// through the watchdog. (dash's kill takes a group as "-s SIG -- -PGID",
// not as "-SIG -- -PGID".)
func (h *SSHHost) kill(sig syscall.Signal, target string) error {
	name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
	if err := h.do(fmt.Sprintf("kill -s %s -- %s", name, target)); err != nil {
		return fmt.Errorf("node %s: kill -%s %s: %w", h.node.Name, name, target, err)
	}
	return nil
}

// Do has the run's watchdog on the node run cmd, one line of sh, and fails
// unless it exits 0; its output is not kept. It acts at once, where Run's
// new session may take a loaded node's sshd a good part of a second to
// open: a fault's action (a signal, a rule, a clock's file) must not lag
// its event in the history.
func (h *SSHHost) Do(cmd string) error {
	if err := h.do(cmd); err != nil {
		return fmt.Errorf("node %s: %w", h.node.Name, err)
	}
	return nil
}

// ErrExitStatus is the error of a command Do ran that exited other than
// 0: the command said no, where another error says it was not asked.
var ErrExitStatus = errors.New("exit status")

// do is Do, its error not naming the node.
func (h *SSHHost) do(cmd string) error {
	if strings.ContainsAny(cmd, "\n\r") {
		return errors.New("a command for the watchdog must be one line")
	}
	h.ctlMu.Lock()
	defer h.ctlMu.Unlock()
	status, err := h.control(cmd)
	if err == nil && status != "0" {
		err = fmt.Errorf("%w %s", ErrExitStatus, status)
	}
	return err
}

// control has the watchdog run cmd, a line, and returns its exit status;
// h.ctlMu is held.
func (h *SSHHost) control(cmd string) (string, error) {
	if _, err := io.WriteString(h.watchIn, cmd+"\n"); err != nil {
		return "", err
	}
	type answer struct {
		line string
		err  error
	}
	c := make(chan answer, 1)
	go func() {
		l, err := h.watchOut.ReadString('\n')
		c <- answer{strings.TrimSpace(l), err}
	}()
	select {
	case a := <-c:
		return a.line, a.err
	case <-time.After(signalTimeout):
		// The answer, should it come, is lost with the connection.
		h.watchConn.Close()
		return "", errors.New("no answer in time")
	}
}

// Isolate drops, in the node's firewall, every packet from or to peers,
// by rules in a chain of the run's own, each with a comment that names
// the run; the connections of hiatus's to the node's sshd stay. A peer at
// the node's own address is an error, not skipped: the
// node cannot be cut from itself, and a fault that asked for it must not
// be recorded as done.
func (h *SSHHost) Isolate(ctx context.Context, peers ...Host) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	cut := maps.Clone(h.cut)
	if cut == nil {
		cut = map[string]bool{}
	}
	for _, p := range peers {
		if p == nil {
			continue
		}
		if p.IP() == h.IP() {
			return fmt.Errorf("node %s: cannot be cut from %s, at its own address %s", h.node.Name, p.Name(), h.IP())
		}
		cut[p.IP()] = true
	}
	return h.setRules(ctx, cut)
}

// Heal removes the rules of the node's Isolate calls between it and peers
// or, with none named, all of them.
func (h *SSHHost) Heal(ctx context.Context, peers ...Host) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var cut map[string]bool
	if len(peers) > 0 {
		cut = maps.Clone(h.cut)
		for _, p := range peers {
			if p != nil {
				delete(cut, p.IP())
			}
		}
	}
	return h.setRules(ctx, cut)
}

// setRules makes the run's chain drop what crosses between the node and
// the IPs of cut, unless it does already. h.mu is held.
func (h *SSHHost) setRules(ctx context.Context, cut map[string]bool) error {
	if h.closed {
		return fmt.Errorf("node %s: closed", h.node.Name)
	}
	if !h.unsure && maps.Equal(cut, h.cut) {
		return nil
	}
	ch := shellquote.Quote(h.chain())
	// One line, which the watchdog runs at once: a new session would cost
	// a loaded node's sshd a good part of a second, by which the cut
	// would lag its event in the history.
	cmds := []string{fmt.Sprintf("{ iptables -w -N %s 2>/dev/null || iptables -w -F %s; }", ch, ch)}
	for _, c := range []string{"INPUT", "OUTPUT"} {
		rule := fmt.Sprintf("%s -j %s -m comment --comment %[2]s", c, ch)
		cmds = append(cmds, fmt.Sprintf("{ iptables -w -C %s 2>/dev/null || iptables -w -I %s; }", rule, rule))
	}
	// The connection hiatus runs the node through stays, as a worker's
	// pipe to hiatus does on hosts of this machine: what isolates the node
	// from the control machine cuts the rest of what they say to each
	// other. sshd's own view of the connection names it: an address
	// hiatus would take (the inventory's, a NAT's) need not be the one
	// the node sees. Its port is sshd's, which a connection of the node's
	// own to the control machine cannot take as its source (Linux picks
	// no port a listener has bound), so the rules let through sshd's
	// connections alone. (Matching the connections' direction in
	// conntrack instead hung TestSSHHost: a node's conntrack picks up a
	// connection it was not tracking by whichever packet comes first.)
	if len(cut) > 0 {
		cmds = append(cmds, `c=$SSH_CONNECTION`, `[ -n "$c" ]`, `ip=${c%% *}`, `port=${c##* }`)
		for _, rule := range []string{`-s "$ip" --dport "$port"`, `-d "$ip" --sport "$port"`} {
			cmds = append(cmds, fmt.Sprintf("iptables -w -A %[1]s -p tcp %s -j ACCEPT -m comment --comment %[1]s", ch, rule))
		}
	}
	for _, ip := range slices.Sorted(maps.Keys(cut)) {
		for _, dir := range []string{"-s", "-d"} {
			cmds = append(cmds, fmt.Sprintf("iptables -w -A %[1]s %s %s -j DROP -m comment --comment %[1]s", ch, dir, shellquote.Quote(ip)))
		}
	}
	if err := h.do(strings.Join(cmds, " && ")); err != nil {
		h.unsure = true
		return fmt.Errorf("node %s: iptables (root must be able to add rules to the node's firewall): %w", h.node.Name, err)
	}
	h.cut, h.unsure = cut, false
	return nil
}

// Close ends the run on the node: the watchdog kills what the run started
// there, removes its rules and directory, and the connection closes. It
// may be called more than once.
func (h *SSHHost) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return h.closeErr
	}
	h.closed = true
	h.ctlMu.Lock()
	h.watchIn.Close()
	h.ctlMu.Unlock()
	err := cleanedUp(h.watch)
	if err != nil {
		err = fmt.Errorf("node %s: clean up %s: %w", h.node.Name, h.dir, err)
	}
	h.client.Close()
	h.shells.close()
	h.closeErr = err
	return err
}

// cleanedUp waits for the watchdog s, its input closed, to end its clean-up
// and exit, for cleanupTimeout at most.
func cleanedUp(s *ssh.Session) error {
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(cleanupTimeout):
		return errors.New("its clean-up did not finish in time")
	}
}

// RunSSH runs script with sh on node over a connection of its own, outside
// any run, and returns what it printed: to look at a node.
func RunSSH(ctx context.Context, node Node, script string) (string, error) {
	client, err := dial(ctx, node)
	if err != nil {
		return "", fmt.Errorf("node %s: %w", node.Name, err)
	}
	h := &SSHHost{node: node, client: client}
	defer h.client.Close()
	out, err := h.Run(ctx, script)
	return string(out), err
}
