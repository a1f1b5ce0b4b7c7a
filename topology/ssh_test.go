package topology_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/internal/sshtest"
	"github.com/hiatus-dev/hiatus/topology"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestSSHHost on two hosts, each reached only through its own sshd: a
// process started on one streams its output back and stops, resumes and
// dies by the signals sent to it; Isolate drops what crosses between the
// two until Heal, and refuses to cut a node from itself; and Close leaves
// no process, rule or file of the run on the node, as the connection's
// loss does.
func TestSSHHost(t *testing.T) {
	ctx := context.Background()
	sn := sshtest.StartT(t, []sshtest.Node{{Name: "a", Roles: "worker"}, {Name: "b", Roles: "redis"}})
	inv, err := topology.ReadInventory(sn.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	tag := topology.NewRunTag()
	a, err := topology.DialSSH(ctx, inv.Nodes[0], tag)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := topology.DialSSH(ctx, inv.Nodes[1], tag)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	var errOut bytes.Buffer
	p, err := a.Start(ctx, []string{"sh", "-c", "echo hello; echo oops >&2; read x; echo got $x; sleep 1000"}, "", &errOut)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := p.Stdout.Read(buf); err != nil || string(buf) != "hello\n" {
		t.Fatalf("read %q, %v; want hello", buf, err)
	}
	if err := p.SignalGroup(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The signal is sent when kill returns, and taken when the process is
	// next scheduled: its state is polled until it shows.
	if st := awaitState(t, sn, "a", p.Pid(), "T"); st != "T" {
		t.Errorf("after SIGSTOP the process is in state %q, want T", st)
	}
	if err := p.SignalGroup(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Stdin.Write([]byte("it\n")); err != nil {
		t.Fatal(err)
	}
	buf = make([]byte, 7)
	if _, err := p.Stdout.Read(buf); err != nil || string(buf) != "got it\n" {
		t.Fatalf("read %q, %v; want 'got it'", buf, err)
	}
	if err := p.SignalGroup(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ee *ssh.ExitError
	if err := p.Wait(); !errors.As(err, &ee) || ee.Signal() != "KILL" {
		t.Errorf("the killed process's end: %v, want a KILL", err)
	}
	// Its PID may be another process's now: it is signalled no more.
	for _, signal := range []func(syscall.Signal) error{p.Signal, p.SignalGroup} {
		if err := signal(syscall.SIGCONT); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("a signal to the exited process: %v, want os.ErrProcessDone", err)
		}
	}
	if !strings.Contains(errOut.String(), "oops") {
		t.Errorf("its standard error %q lacks oops", errOut.String())
	}

	// reach connects a to b's sshd within seconds: through a cut it must
	// fail in 1 s, which load cannot make pass; after a heal it may take
	// a loaded machine long.
	reach := func(seconds int) error {
		_, err := a.Run(ctx, "timeout "+strconv.Itoa(seconds)+" bash -c 'exec 3<>/dev/tcp/"+b.IP()+"/22'")
		return err
	}
	// A node cannot be cut from itself: a fault that asks it to fails,
	// rather than being recorded as done.
	if err := a.Isolate(ctx, b, a); err == nil {
		t.Error("a.Isolate(b, a) succeeded: a node cut from itself")
	}
	if err := a.Isolate(ctx, b); err != nil {
		t.Fatal(err)
	}
	if out, _ := sn.Run(ctx, "a", "iptables -S | grep -c hiatus-"+tag); strings.TrimSpace(out) == "0" {
		t.Errorf("no rule tagged with the run's tag on a: %s", out)
	}
	if err := reach(1); err == nil {
		t.Error("a reached b's sshd through the cut")
	}
	if err := a.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := reach(20); err != nil {
		t.Errorf("a cannot reach b after the heal: %v", err)
	}

	// Cut from the control machine, the node still runs what hiatus sends
	// it, over connections old and new, and reaches nothing else there.
	ln, err := net.Listen("tcp", net.JoinHostPort(inv.Control, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for c, err := ln.Accept(); err == nil; c, err = ln.Accept() {
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dialControl := func(seconds int) error {
		_, err := a.Run(ctx, "timeout "+strconv.Itoa(seconds)+" bash -c 'exec 3<>/dev/tcp/"+inv.Control+"/"+port+"'")
		return err
	}
	if err := dialControl(20); err != nil {
		t.Fatalf("a cannot reach the control machine before the cut: %v", err)
	}
	if err := a.Isolate(ctx, topology.NewPeer("control", inv.Control)); err != nil {
		t.Fatal(err)
	}
	var ee2 *ssh.ExitError
	if err := dialControl(1); err == nil || !errors.As(err, &ee2) {
		t.Errorf("a reached the control machine through the cut, or hiatus lost a: %v", err)
	}
	if _, err := a.Start(ctx, []string{"true"}, "", nil); err != nil {
		t.Errorf("a session cut from the control machine: %v", err)
	}
	if err := a.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dialControl(20); err != nil {
		t.Errorf("a cannot reach the control machine after the heal: %v", err)
	}

	// A process left running, with a child that left its group, and a
	// cut, which Close undoes.
	q, err := a.Start(ctx, []string{"sh", "-c", "setsid sh -c 'echo child; exec sleep 1001' & exec sleep 1000"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	buf = make([]byte, 6)
	if _, err := io.ReadFull(q.Stdout, buf); err != nil || string(buf) != "child\n" {
		t.Fatalf("read %q, %v; want child: the child is not in a session of its own", buf, err)
	}
	if err := a.Isolate(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.Done():
	case <-time.After(10 * time.Second):
		t.Error("the process outlived Close")
	}
	left(t, sn, "a", tag)

	// A run whose watchdog died without cleaning up (the node's sshd
	// killed, say) leaves its process, rule and directory: the next run
	// to reach the node removes them, and leaves a live run's alone.
	dead, live := topology.NewRunTag(), topology.NewRunTag()
	d, err := topology.DialSSH(ctx, inv.Nodes[0], dead)
	if err != nil {
		t.Fatal(err)
	}
	l, err := topology.DialSSH(ctx, inv.Nodes[0], live)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, h := range []*topology.SSHHost{d, l} {
		if _, err := h.Start(ctx, []string{"sleep", "1000"}, h.Dir()+"/sleep.log", nil); err != nil {
			t.Fatal(err)
		}
		if err := h.Isolate(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := sn.Run(ctx, "a", "kill -KILL $(cat "+d.Dir()+"/watchdog)"); err != nil {
		t.Fatalf("kill the watchdog: %v: %s", err, out)
	}
	_ = d.Close() // its watchdog is gone: nothing is undone
	if out, _ := sn.Run(ctx, "a", "iptables -S | grep -c hiatus-"+dead); strings.TrimSpace(out) == "0" {
		t.Fatal("the run whose watchdog died left no rule: the test would prove nothing")
	}
	next, err := topology.DialSSH(ctx, inv.Nodes[0], topology.NewRunTag())
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	left(t, sn, "a", dead)
	if out, _ := sn.Run(ctx, "a", "ls -d "+l.Dir()+"; iptables -S | grep -c hiatus-"+live); !strings.Contains(out, l.Dir()) || strings.HasSuffix(strings.TrimSpace(out), "\n0") {
		t.Errorf("the next run removed a live run's directory or rules: %s", out)
	}
}

// awaitState polls the state letter of pid on the host called name until
// it is want, for up to 10 s, and returns the last one.
func awaitState(t *testing.T, sn *sshtest.Net, name string, pid int, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		out, err := sn.Run(ctx, name, "ps -o stat= -p "+strconv.Itoa(pid))
		st := strings.TrimSpace(out)
		if err != nil || st == "" {
			t.Fatalf("ps: %v: %s", err, out)
		}
		if st[:1] == want || ctx.Err() != nil {
			return st[:1]
		}
	}
}

// left fails t if the host called name holds a file, rule or process of
// the run tagged tag, as its own sshd shows it.
func left(t *testing.T, sn *sshtest.Net, name, tag string) {
	t.Helper()
	l, err := sn.Leftovers(context.Background(), name, tag)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) > 0 {
		t.Errorf("%s holds what the run left: %v", name, l)
	}
}

// TestDialSilentNode: a node that takes the connection and never answers
// (a hung sshd) fails DialSSH and RunSSH with their context's end, rather
// than hanging the run. No sshd is needed: the node is a bare listener.
func TestDialSilentNode(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, silent
		}
	}()
	defer func() {
		l.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	}()
	dir := t.TempDir()
	node := topology.Node{Name: "mute", Addr: l.Addr().String(), User: "root", Dir: "/tmp",
		Key: filepath.Join(dir, "id"), KnownHosts: filepath.Join(dir, "known_hosts")}
	sshtest.NewKeyT(t, node.Key)
	if err := os.WriteFile(node.KnownHosts, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(context.Context) error{
		"DialSSH": func(ctx context.Context) error {
			_, err := topology.DialSSH(ctx, node, topology.NewRunTag())
			return err
		},
		"RunSSH": func(ctx context.Context) error { _, err := topology.RunSSH(ctx, node, "true"); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- f(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s to a silent node: %v, want its context's deadline", name, err)
			}
		case <-time.After(time.Minute): // far past the context's end: it hangs
			t.Errorf("%s to a silent node did not return when its context ended", name)
		}
		cancel()
	}
}

// TestSSHPlantedCleanup: what any user of a node may make where runs kept
// their directories before (DIR/hiatus-ssh-<node>-*, DIR being /tmp), a
// watchdog file naming a dead PID beside a cleanup.sh, is not run by the
// next run to reach the node, which runs as root: no script found on disk
// is ever run.
func TestSSHPlantedCleanup(t *testing.T) {
	ctx := context.Background()
	sn := sshtest.StartT(t, []sshtest.Node{{Name: "plant", Roles: "worker"}})
	inv, err := topology.ReadInventory(sn.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	node := inv.Nodes[0]
	planted, err := os.MkdirTemp(node.Dir, "hiatus-ssh-"+node.Name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(planted) })
	marker := filepath.Join(t.TempDir(), "ran")
	// PID 0x3fffffff is above pid_max: no such process.
	for name, text := range map[string]string{"watchdog": "1073741823\n", "cleanup.sh": "id > " + marker + "\n"} {
		if err := os.WriteFile(filepath.Join(planted, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := chownAll(planted, 65534); err != nil { // as nobody made it
		t.Fatal(err)
	}
	h, err := topology.DialSSH(ctx, node, topology.NewRunTag())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("the run ran the script planted in %s: it wrote %q", planted, b)
	}
}

// chownAll gives dir and what it holds to uid.
func chownAll(dir string, uid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// TestSSHRunsDir: a run keeps its directory on a node only in DIR/hiatus-UID
// of the user it logs in as, which it makes (mode 0711) or finds that
// user's own: a link there, a directory of another user's or one others
// may read or write in, a file, or a DIR where others could swap it is
// refused, naming the node and the path, and nothing is made in it.
func TestSSHRunsDir(t *testing.T) {
	ctx := context.Background()
	sn := sshtest.StartT(t, []sshtest.Node{{Name: "own", Roles: "worker"}})
	inv, err := topology.ReadInventory(sn.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	const uid = 0 // the test network's user is root
	mkdir := func(mode os.FileMode) func(string) error {
		return func(p string) error { return errors.Join(os.Mkdir(p, 0), os.Chmod(p, mode)) }
	}
	// other makes a directory of another user's, mode 0755, at p.
	other := func(p string) error { return errors.Join(mkdir(0o755)(p), os.Chown(p, 65534, 65534)) }
	for _, tc := range []struct {
		name    string
		dirMode os.FileMode            // DIR's
		make    func(own string) error // what is at DIR/hiatus-UID before the run
		// dir, when not nil, makes DIR in base (made by the test, 0700) and
		// returns its path: a DIR elsewhere than base.
		dir     func(base string) (string, error)
		refused string // what the error says; "" for none
	}{
		{name: "missing", dirMode: 0o700},
		{name: "own 0700", dirMode: 0o700, make: mkdir(0o700)},
		{name: "own 0711", dirMode: 0o700, make: mkdir(0o711)},
		{name: "in a sticky DIR", dirMode: 0o777 | os.ModeSticky},
		{name: "a link", dirMode: 0o700, make: func(p string) error {
			return errors.Join(mkdir(0o711)(p+"-target"), os.Symlink(p+"-target", p))
		}, refused: "is a symbolic link"},
		{name: "another user's", dirMode: 0o700, make: func(p string) error {
			return errors.Join(mkdir(0o711)(p), os.Chown(p, 65534, 65534))
		}, refused: "is owned by uid 65534"},
		{name: "group-readable", dirMode: 0o700, make: mkdir(0o751), refused: "has mode drwxr-x--x"},
		{name: "group-writable", dirMode: 0o700, make: mkdir(0o731), refused: "has mode drwx-wx--x"},
		{name: "world-writable", dirMode: 0o700, make: mkdir(0o777), refused: "has mode drwxrwxrwx"},
		{name: "a file", dirMode: 0o700, make: func(p string) error { return os.WriteFile(p, nil, 0o600) }, refused: "is not a directory"},
		{name: "a DIR others may write in", dirMode: 0o777, refused: "others may write in it, and it is not sticky"},
		{name: "a DIR of another user's", dirMode: 0o755, dir: func(base string) (string, error) {
			return base + "/other", other(base + "/other")
		}, refused: "is owned by uid 65534, not by root or uid 0"},
		{name: "a link to another user's DIR", dirMode: 0o755, dir: func(base string) (string, error) {
			return base + "/link", errors.Join(other(base+"/other"), os.Symlink(base+"/other", base+"/link"), os.Lchown(base+"/link", 65534, 65534))
		}, refused: "/other is owned by uid 65534"},
		{name: "a link to root's DIR", dirMode: 0o700, dir: func(base string) (string, error) {
			return base + "/link", errors.Join(mkdir(0o755)(base+"/mine"), os.Symlink(base+"/mine", base+"/link"))
		}},
		{name: "an ancestor others may write in", dirMode: 0o700, dir: func(base string) (string, error) {
			return base + "/open/dir", errors.Join(mkdir(0o777)(base+"/open"), mkdir(0o700)(base+"/open/dir"))
		}, refused: "/open has mode drwxrwxrwx: others may write in it, and it is not sticky"},
		{name: "an ancestor of another user's", dirMode: 0o700, dir: func(base string) (string, error) {
			return base + "/other/dir", errors.Join(other(base+"/other"), mkdir(0o700)(base+"/other/dir"))
		}, refused: "/other is owned by uid 65534"},
		{name: "in a sticky ancestor", dirMode: 0o700, dir: func(base string) (string, error) {
			return base + "/sticky/dir", errors.Join(mkdir(0o777|os.ModeSticky)(base+"/sticky"), mkdir(0o700)(base+"/sticky/dir"))
		}},
		// The inventory's dir= names a directory the node lacks: refused
		// before anything of the run is made there.
		{name: "a DIR that does not exist", dir: func(base string) (string, error) { return base + "/gone", nil },
			refused: "/gone does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := inv.Nodes[0]
			node.Dir = t.TempDir()
			if tc.dir != nil {
				var err error
				if node.Dir, err = tc.dir(node.Dir); err != nil {
					t.Fatal(err)
				}
			}
			resolved, err := filepath.EvalSymlinks(node.Dir)
			missing := errors.Is(err, fs.ErrNotExist)
			switch {
			case missing:
				resolved = node.Dir
			case err != nil:
				t.Fatal(err)
			}
			own := topology.RunsDir(topology.Node{Dir: resolved}, uid)
			if tc.make != nil {
				if err := tc.make(own); err != nil {
					t.Fatal(err)
				}
			}
			if !missing {
				if err := os.Chmod(node.Dir, tc.dirMode); err != nil {
					t.Fatal(err)
				}
				defer os.Chmod(node.Dir, 0o700)
			}
			h, err := topology.DialSSH(ctx, node, topology.NewRunTag())
			if tc.refused == "" {
				if err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Lstat(h.Dir()); err != nil || filepath.Dir(h.Dir()) != own {
					t.Errorf("the run's directory %s (%v), want one in %s", h.Dir(), err, own)
				} else if fi, err = os.Lstat(own); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o066 != 0 {
					t.Errorf("%s: %v, %v; want a directory no one else reads or writes in", own, fi.Mode(), err)
				}
				if err := h.Close(); err != nil {
					t.Fatal(err)
				}
				if es, err := os.ReadDir(own); err != nil || len(es) > 0 {
					t.Errorf("after Close %s holds %v (%v)", own, es, err)
				}
				return
			}
			if err == nil {
				h.Close()
				t.Fatalf("DialSSH succeeded; want it refused: %s", tc.refused)
			}
			if !errors.Is(err, topology.ErrRunsDir) || !strings.Contains(err.Error(), "node "+node.Name) ||
				!strings.Contains(err.Error(), node.Dir) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("error %q; want ErrRunsDir naming the node, the path, and %q", err, tc.refused)
			}

			if es, _ := os.ReadDir(own + "-target"); len(es) > 0 {
				t.Errorf("the run made %s through the link", es[0].Name())
			}
		})
	}
}

// TestDialFiles: a node's key or known_hosts file that is a named pipe (no
// writer: it would wait past any signal), a device (/dev/zero: it would
// fill the memory) or too large is refused at once, and one that is not a
// known_hosts file is refused naming its line; each error names the node
// and the file. The node's address is never reached: the files come first.
func TestDialFiles(t *testing.T) {
	dir := t.TempDir()
	key, kh, fifo := filepath.Join(dir, "id"), filepath.Join(dir, "known_hosts"), filepath.Join(dir, "fifo")
	large, bad, long := filepath.Join(dir, "large"), filepath.Join(dir, "bad_known_hosts"), filepath.Join(dir, "long_known_hosts")
	sshtest.NewKeyT(t, key)
	if err := errors.Join(os.WriteFile(kh, nil, 0o644),
		syscall.Mkfifo(fifo, 0o600), os.WriteFile(large, make([]byte, topology.KnownHostsLimit+1), 0o600),
		os.WriteFile(bad, []byte("# hosts\n10.0.0.2 ssh-ed25519 not-base64!\n"), 0o644),
		os.WriteFile(long, []byte("\n# "+strings.Repeat("x", 64<<10)+"\n"), 0o644)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, kh string
		err           error  // what the error is, or nil
		says          string // what it says
	}{
		{"key a pipe", fifo, kh, files.ErrNotRegular, "key: open " + fifo},
		{"key a device", "/dev/zero", kh, files.ErrNotRegular, "key: open /dev/zero"},
		{"key too large", large, kh, files.ErrTooLarge, "key: read " + large},
		{"known-hosts a pipe", key, fifo, files.ErrNotRegular, "known-hosts: open " + fifo},
		{"known-hosts a device", key, "/dev/zero", files.ErrNotRegular, "known-hosts: open /dev/zero"},
		{"known-hosts too large", key, large, files.ErrTooLarge, "known-hosts: read " + large},
		{"known-hosts not one", key, bad, nil, "known-hosts: " + bad + ":2: illegal base64"},
		{"known-hosts a long line", key, long, nil, "known-hosts: " + long + ":2: a line of 65538 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := topology.Node{Name: "files", Addr: "127.0.0.1:1", User: "root", Dir: "/tmp", Key: tc.key, KnownHosts: tc.kh}
			_, err := topology.DialSSH(context.Background(), node, topology.NewRunTag())
			if err == nil || tc.err != nil && !errors.Is(err, tc.err) ||
				!strings.Contains(err.Error(), "node files (127.0.0.1:1): "+tc.says) {
				t.Errorf("DialSSH: %v; want %v saying %q", err, tc.err, tc.says)
			}
		})
	}
}

// TestDialRefusals: a node whose host key its known_hosts file does not
// hold, or holds another for, or that refuses hiatus's key, is refused
// with what to do about it (the file, ssh-keyscan, ssh-keygen -R; the
// user and the key tried), on a real sshd.
func TestDialRefusals(t *testing.T) {
	sn := sshtest.StartT(t, []sshtest.Node{{Name: "a", Roles: "worker"}})
	inv, err := topology.ReadInventory(sn.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	node := inv.Nodes[0]
	dir := t.TempDir()
	empty, changed, key := filepath.Join(dir, "empty_known_hosts"), filepath.Join(dir, "changed_known_hosts"), filepath.Join(dir, "other_id")
	other := sshtest.NewKeyT(t, key) // a key no node knows, and no node's host key
	line := knownhosts.Line([]string{knownhosts.Normalize(node.Addr)}, other)
	if err := errors.Join(os.WriteFile(empty, nil, 0o644), os.WriteFile(changed, []byte("# a host\n"+line+"\n"), 0o644)); err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(node.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*topology.Node)
		says []string
	}{
		{"unknown host key", func(n *topology.Node) { n.KnownHosts = empty },
			[]string{"is not in known-hosts " + empty, fmt.Sprintf("ssh-keyscan -p %s -H %s >> %s", port, host, empty)}},
		{"changed host key", func(n *topology.Node) { n.KnownHosts = changed },
			[]string{"is not the one known-hosts " + changed + " holds for it at line 2", "ssh-keygen -R " + knownhosts.Normalize(node.Addr) + " -f " + changed, "ssh-keyscan -p " + port}},
		{"key refused", func(n *topology.Node) { n.Key = key },
			[]string{"unable to authenticate", "refused user root with key " + key}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node
			tc.edit(&n)
			_, err := topology.DialSSH(context.Background(), n, topology.NewRunTag())
			if err == nil {
				t.Fatal("DialSSH: no error")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("DialSSH: %v; want it to say %q", err, s)
				}
			}
		})
	}
}

// TestSSHManySessions: a node runs more processes of a run than one
// connection's sessions (sshd's MaxSessions, 10 by default) beside the
// watchdog and the shells kept ready: each starts, on a connection added
// when the first refuses a session, a command still runs, and Close ends
// them all and leaves nothing on the node.
func TestSSHManySessions(t *testing.T) {
	ctx := context.Background()
	sn, h := sshtest.NodeT(t, "a", "worker")
	const n = 14
	pids := map[int]bool{}
	for i := range n {
		p, err := h.Start(ctx, []string{"sleep", "1000"}, h.Dir()+"/sleep"+strconv.Itoa(i)+".log", nil)
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		pids[p.Pid()] = true
	}
	if len(pids) != n {
		t.Errorf("%d PIDs of %d processes", len(pids), n)
	}
	out, err := h.Run(ctx, "ls "+h.Dir()+" | grep -c '^sleep'")
	if err != nil || strings.TrimSpace(string(out)) != strconv.Itoa(n) {
		t.Errorf("the node's logs: %q, %v; want %d", out, err, n)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	left(t, sn, "a", fmt.Sprintf("hs%d-", os.Getpid())) // this process's runs'
}

// TestSSHWriteCutShort: a copy whose input fails half-way, or holds fewer
// bytes than it said, leaves no file at its path, nor a part of one; a
// whole one is put in place with its mode.
func TestSSHWriteCutShort(t *testing.T) {
	ctx := context.Background()
	_, h := sshtest.NodeT(t, "a", "worker")
	path := h.Dir() + "/copied"
	for _, tc := range []struct {
		name string
		r    io.Reader
	}{
		{"input fails", io.MultiReader(strings.NewReader("hello"), iotest.ErrReader(errors.New("disk gone")))},
		{"input short", strings.NewReader("hello")},
	} {
		if err := h.Write(ctx, path, 0o755, tc.r, 10); err == nil {
			t.Errorf("%s: the copy succeeded", tc.name)
		}
		if out, _ := h.Run(ctx, "ls -a "+h.Dir()); strings.Contains(string(out), "copied") {
			t.Errorf("%s: the node holds %q", tc.name, out)
		}
	}
	if err := h.Write(ctx, path, 0o750, strings.NewReader("0123456789"), 10); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Run(ctx, "stat -c %a "+path+" && cat "+path); err != nil || string(out) != "750\n0123456789" {
		t.Errorf("the copy: %q, %v", out, err)
	}
}
