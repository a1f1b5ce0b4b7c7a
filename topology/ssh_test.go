package topology_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/internal/sshtest"
	"github.com/hiatus-dev/hiatus/topology"
	"golang.org/x/crypto/ssh"
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
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	node := topology.Node{Name: "mute", Addr: l.Addr().String(), User: "root", Dir: "/tmp",
		Key: filepath.Join(dir, "id"), KnownHosts: filepath.Join(dir, "known_hosts")}
	if err := errors.Join(os.WriteFile(node.Key, pem.EncodeToMemory(block), 0o600), os.WriteFile(node.KnownHosts, nil, 0o644)); err != nil {
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
