package topology_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/topology"
)

// helperEnv makes the test binary a helper process: echo, probe, relay,
// orphan or storm (see helper), its arguments after the program's name.
const helperEnv = "HIATUS_TOPOLOGY_HELPER"

// probeTimeout bounds a probe's dial and answer. A host that can be
// reached answers within milliseconds, so a probe that times out shows
// that packets are dropped: a refusal would show that they cross.
const probeTimeout = 300 * time.Millisecond

// TestMain runs the test binary as a helper process when started as one.
func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv(helperEnv); ok && len(os.Args) > 1 {
		code, err := helper(os.Args[1], os.Args[2:])
		if err != nil {
			fmt.Fprintf(os.Stderr, "helper %s: %v\n", os.Args[1], err)
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// helper is a process the tests start, often on a host. echo ADDR serves
// lines back on ADDR; probe ADDR... prints each ADDR and how a line sent to
// it came back (probeOne); relay ADDR dials ADDR, then copies stdin to it
// and it to stdout; orphan makes a Net for its parent to kill; storm makes
// and removes Nets under a storm of SIGINT (see storm). echo, relay and
// orphan print "ready" once set up.
func helper(mode string, args []string) (int, error) {
	switch mode {
	case "echo":
		ln, err := net.Listen("tcp", args[0])
		if err != nil {
			return 1, err
		}
		fmt.Println("ready")
		for {
			c, err := ln.Accept()
			if err != nil {
				return 1, err
			}
			go func() { _, _ = io.Copy(c, c) }()
		}
	case "probe":
		results := make([]string, len(args))
		var wg sync.WaitGroup
		for i, addr := range args {
			wg.Go(func() { results[i] = probeOne(addr) })
		}
		wg.Wait()
		for i, addr := range args {
			fmt.Println(addr, results[i])
		}
		return 0, nil
	case "relay":
		c, err := net.DialTimeout("tcp", args[0], patience)
		if err != nil {
			return 1, err
		}
		fmt.Println("ready")
		go func() { _, _ = io.Copy(c, os.Stdin) }()
		_, err = io.Copy(os.Stdout, c)
		return 1, err
	case "storm":
		return storm()
	case "orphan":
		ctx := context.Background()
		n, err := topology.NewNet(ctx, "orph")
		if err != nil {
			return 1, err
		}
		a, err := n.AddHost(ctx, "a")
		if err != nil {
			return 1, err
		}
		b, err := n.AddHost(ctx, "b")
		if err != nil {
			return 1, err
		}
		if err := a.Isolate(ctx, b, n.Root()); err != nil {
			return 1, err
		}
		fmt.Println("ready")
		select {} // until killed
	}
	return 1, fmt.Errorf("unknown mode")
}

// probeOne tells how a line sent to addr comes back: "ok", "timeout" when
// the dial or the answer takes more than probeTimeout, or the error.
func probeOne(addr string) string {
	c, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err == nil {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(probeTimeout))
		if _, err = c.Write([]byte("ping\n")); err == nil {
			var s string
			if s, err = bufio.NewReader(c).ReadString('\n'); err == nil && s != "ping\n" {
				err = fmt.Errorf("got %q back", s)
			}
		}
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return "timeout"
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// TestLocal: the machine itself cannot be isolated, and says why.
func TestLocal(t *testing.T) {
	var h topology.Host = topology.Local{}
	if err := h.Isolate(t.Context(), h); !errors.Is(err, topology.ErrNeedsNamespaces) {
		t.Errorf("Local.Isolate = %v, want ErrNeedsNamespaces", err)
	}
	if err := h.Heal(t.Context()); err != nil {
		t.Errorf("Local.Heal = %v", err)
	}
	if out, err := (topology.Local{}).Command("echo", "hi").Output(); err != nil || string(out) != "hi\n" {
		t.Errorf("Local.Command(echo hi) = %q, %v", out, err)
	}
}

// TestNetIsolate: hosts reach each other and the root namespace; Isolate
// cuts exactly the pairs asked, both ways, new connections timing out
// rather than refused, whoever isolates whom; each side's Heal restores
// only its own cuts; Isolate is idempotent and refuses hosts not on its
// Net.
func TestNetIsolate(t *testing.T) {
	n := newNet(t, "iso")
	a, b, c := addHost(t, n, "a"), addHost(t, n, "b"), addHost(t, n, "c")
	root := n.Root()
	hosts := []topology.Host{root, a, b, c}
	addrs := map[topology.Host]string{root: echoHere(t, root.IP())}
	for _, h := range hosts[1:] {
		addrs[h] = h.IP() + ":7000"
		start(t, h, "echo", addrs[h])
	}
	ctx := t.Context()
	steps := []struct {
		name string
		do   func() error
		cut  [][2]topology.Host
	}{
		{"at first", func() error { return nil }, nil},
		{"a isolated from b, twice, and from itself", func() error {
			return errors.Join(a.Isolate(ctx, b), a.Isolate(ctx, b, a, b))
		}, [][2]topology.Host{{a, b}}},
		{"root isolated from c", func() error { return root.Isolate(ctx, c) }, [][2]topology.Host{{a, b}, {root, c}}},
		{"b heals, a's cut stays", func() error { return b.Heal(ctx) }, [][2]topology.Host{{a, b}, {root, c}}},
		{"a heals", func() error { return a.Heal(ctx) }, [][2]topology.Host{{root, c}}},
		{"c isolated from root too, root heals: c's cut stays", func() error {
			return errors.Join(c.Isolate(ctx, root), root.Heal(ctx))
		}, [][2]topology.Host{{root, c}}},
		{"c heals", func() error { return c.Heal(ctx) }, nil},
		{"a isolated from b, c and root; heals b alone", func() error {
			return errors.Join(a.Isolate(ctx, b, c, root), a.Heal(ctx, b))
		}, [][2]topology.Host{{a, c}, {a, root}}},
		{"a heals root alone", func() error { return a.Heal(ctx, root) }, [][2]topology.Host{{a, c}}},
		{"root isolated from b and c, heals c alone", func() error {
			return errors.Join(root.Isolate(ctx, b, c), root.Heal(ctx, c))
		}, [][2]topology.Host{{a, c}, {root, b}}},
		{"a and root heal all", func() error { return errors.Join(a.Heal(ctx), root.Heal(ctx)) }, nil},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var wg sync.WaitGroup
		for _, from := range hosts {
			wg.Go(func() {
				var to []string
				for _, h := range hosts {
					if h != from {
						to = append(to, addrs[h])
					}
				}
				got := probe(from, to...)
				for _, h := range hosts {
					if h == from {
						continue
					}
					want := "ok"
					if slices.Contains(s.cut, [2]topology.Host{from, h}) || slices.Contains(s.cut, [2]topology.Host{h, from}) {
						want = "timeout"
					}
					if got[addrs[h]] != want {
						t.Errorf("%s: %s to %s: %s, want %s", s.name, from.Name(), h.Name(), got[addrs[h]], want)
					}
				}
			})
		}
		wg.Wait()
	}

	other := newNet(t, "other")
	stranger := addHost(t, other, "a")
	for _, peer := range []topology.Host{topology.Local{}, stranger, other.Root(), nil} {
		if err := a.Isolate(ctx, peer); err == nil {
			t.Errorf("a.Isolate(%v) = nil, want an error: not on its net", peer)
		}
		if err := root.Isolate(ctx, peer); err == nil {
			t.Errorf("root.Isolate(%v) = nil, want an error: not on its net", peer)
		}
	}
}

// TestNetIsolateEstablished: a connection open before Isolate stalls —
// what is sent does not arrive — and delivers it after Heal, TCP having
// retransmitted it: between two hosts, and between the root namespace and
// a host.
func TestNetIsolateEstablished(t *testing.T) {
	n := newNet(t, "est")
	a, b := addHost(t, n, "a"), addHost(t, n, "b")
	for _, h := range []topology.Host{a, b} {
		start(t, h, "echo", h.IP()+":7000")
	}
	ctx := t.Context()

	relay := start(t, b, "relay", a.IP()+":7000")
	tcp, err := net.DialTimeout("tcp", b.IP()+":7000", patience)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })
	for _, tc := range []struct {
		name  string
		w     io.Writer
		r     deadlineReader
		cut   topology.Host
		peers []topology.Host
	}{
		{"b to a, a isolated", relay.stdin, relay.stdout, a, []topology.Host{b}},
		{"root to b, root isolated", tcp, tcp, n.Root(), []topology.Host{b}},
		{"root to b, b isolated", tcp, tcp, b, []topology.Host{n.Root()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := bufio.NewReader(tc.r)
			roundTrip(t, tc.w, tc.r, rd, "before\n")
			if err := tc.cut.Isolate(ctx, tc.peers...); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(tc.w, "during\n"); err != nil {
				t.Fatal(err)
			}
			_ = tc.r.SetReadDeadline(time.Now().Add(quietCut))
			if s, err := rd.ReadString('\n'); err == nil || s != "" {
				t.Fatalf("while isolated, read %q, %v; want nothing", s, err)
			}
			start := time.Now()
			if err := tc.cut.Heal(ctx); err != nil {
				t.Fatal(err)
			}
			_ = tc.r.SetReadDeadline(time.Now().Add(patience))
			if s, err := rd.ReadString('\n'); s != "during\n" {
				t.Fatalf("after Heal, read %q, %v; want what was sent while isolated", s, err)
			}
			t.Logf("what was sent while isolated arrived %v after Heal", time.Since(start).Round(time.Millisecond))
			roundTrip(t, tc.w, tc.r, rd, "after\n")
		})
	}
}

// quietCut is how long a test watches a cut connection for bytes that must
// not come: longer than quiet, for TCP's first retransmission comes only
// after 200 ms.
const quietCut = 500 * time.Millisecond

type deadlineReader interface {
	io.Reader
	SetReadDeadline(time.Time) error
}

// roundTrip sends s and reads it back within patience.
func roundTrip(t *testing.T, w io.Writer, r deadlineReader, rd *bufio.Reader, s string) {
	t.Helper()
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatal(err)
	}
	_ = r.SetReadDeadline(time.Now().Add(patience))
	if got, err := rd.ReadString('\n'); got != s {
		t.Fatalf("sent %q, read %q, %v", s, got, err)
	}
}

// TestNetClose: Close removes every namespace, link, address and route the
// Net made, rules included, and leaves the root namespace's firewall as it
// was; it may be called twice; the Net refuses work after it.
func TestNetClose(t *testing.T) {
	needNetns(t)
	before := firewall(t)
	ctx := t.Context()
	n, err := topology.NewNet(ctx, "close")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	a, err := n.AddHost(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.AddHost(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Isolate(ctx, b, n.Root()); err != nil {
		t.Fatal(err)
	}
	if err := n.Root().Isolate(ctx, b); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("hz%d-close", os.Getpid())
	rootIP := n.Root().IP()
	if len(namespaces(t, prefix)) != 3 || len(links(t, prefix)) != 1 || !strings.Contains(ip(t, "-4", "addr"), rootIP) {
		t.Fatalf("before Close: namespaces %v, links %v, want 3 and 1 and the address %s", namespaces(t, prefix), links(t, prefix), rootIP)
	}
	for range 2 {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if ns, ls := namespaces(t, prefix), links(t, prefix); len(ns) > 0 || len(ls) > 0 {
		t.Errorf("after Close: namespaces %v, links %v left", ns, ls)
	}
	subnet := strings.TrimSuffix(rootIP, ".1") + "."
	if s := ip(t, "-4", "addr") + ip(t, "-4", "route"); strings.Contains(s, subnet) {
		t.Errorf("after Close, an address or route of %s0/24 is left:\n%s", subnet, s)
	}
	if after := firewall(t); after != before {
		t.Errorf("the root namespace's firewall changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, err := n.AddHost(ctx, "c"); err == nil {
		t.Error("AddHost after Close = nil, want an error")
	}
	if err := a.Heal(ctx); err == nil {
		t.Error("Heal after Close = nil, want an error")
	}
}

// TestAddHostUndo: names that cannot be are refused before anything is
// made; an AddHost that fails midway removes what it made, so that the
// same name can be added once the cause is gone.
func TestAddHostUndo(t *testing.T) {
	ctx := t.Context()
	for _, name := range []string{"toolong", "A", "a-b"} { // "" picks a name
		if _, err := topology.NewNet(ctx, name); err == nil {
			t.Errorf("NewNet(%q) = nil error, want one", name)
		}
	}
	n := newNet(t, "undo")
	addHost(t, n, "a")
	for _, name := range []string{"", "A", "a_b", "root", "br0", "-a", "sixteen-chars-xx", "a"} {
		if _, err := n.AddHost(ctx, name); err == nil {
			t.Errorf("AddHost(%q) = nil error, want one", name)
		}
	}
	// Something named as b's port on the bridge fails AddHost(b) after its
	// namespace is made.
	sw := fmt.Sprintf("hz%d-undo", os.Getpid())
	ip(t, "-n", sw, "link", "add", "name", "b", "type", "bridge")
	_, err := n.AddHost(ctx, "b")
	if err == nil || !strings.Contains(err.Error(), "ip -n "+sw+" link add name b") {
		t.Fatalf("AddHost(b) with its port's name taken = %v, want the failing command named", err)
	}
	if ns := namespaces(t, sw+"-b"); len(ns) > 0 {
		t.Errorf("a failed AddHost left namespaces %v", ns)
	}
	ip(t, "-n", sw, "link", "del", "dev", "b")
	b := addHost(t, n, "b")
	start(t, b, "echo", b.IP()+":7000")
	if got := probe(n.Root(), b.IP()+":7000")[b.IP()+":7000"]; got != "ok" {
		t.Errorf("b, added again: a probe from the root namespace: %s", got)
	}
}

// TestRemoveOrphans: what the Net of a process killed with SIGKILL left is
// removed; a live process's Net is left alone.
func TestRemoveOrphans(t *testing.T) {
	live := newNet(t, "live")
	addHost(t, live, "a")
	mine := fmt.Sprintf("hz%d-live", os.Getpid())

	t.Cleanup(func() { _ = topology.RemoveOrphans() })
	child := start(t, topology.Local{}, "orphan").cmd
	theirs := fmt.Sprintf("hz%d-orph", child.Process.Pid)
	if ns, ls := namespaces(t, theirs), links(t, theirs); len(ns) != 3 || len(ls) != 1 {
		t.Fatalf("the child's Net: namespaces %v, links %v, want 3 and 1", ns, ls)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err == nil {
		t.Fatal("the child was not killed")
	}

	if err := topology.RemoveOrphans(); err != nil {
		t.Fatal(err)
	}
	if ns, ls := namespaces(t, theirs), links(t, theirs); len(ns) > 0 || len(ls) > 0 {
		t.Errorf("after RemoveOrphans: namespaces %v, links %v of the killed process left", ns, ls)
	}
	if ns, ls := namespaces(t, mine), links(t, mine); len(ns) != 2 || len(ls) != 1 {
		t.Errorf("after RemoveOrphans: the live Net has namespaces %v, links %v, want 2 and 1", ns, ls)
	}
}

// TestSigintStorm: a terminal's Ctrl-C, sent to hiatus's process group
// again and again while a Net is made and removed, ends none of the
// commands that make and undo it: each Net is made whole and removed
// whole (before caughtInFork, a third of those commands died of the
// SIGINT and a Net's namespaces were left).
func TestSigintStorm(t *testing.T) {
	needNetns(t)
	cmd := helperCmd(topology.Local{}, "storm")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its storm reaches its group alone
	t.Cleanup(func() { _ = topology.RemoveOrphans() })
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%v:\n%s", err, out)
	}
	prefix := fmt.Sprintf("hz%d-", cmd.Process.Pid)
	if ns, ls := namespaces(t, prefix), links(t, prefix); len(ns) > 0 || len(ls) > 0 {
		t.Errorf("left after the storm: namespaces %v, links %v", ns, ls)
	}
}

// storm makes and removes Nets of two hosts while it sends SIGINT to its
// own process group every millisecond, as a terminal does on each Ctrl-C
// (a hand does not press it that often); it takes the signals itself, as
// hiatus does.
func storm() (int, error) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-sigs:
			case <-tick.C:
				_ = syscall.Kill(0, syscall.SIGINT)
			}
		}
	}()
	ctx := context.Background()
	for range 5 {
		n, err := topology.NewNet(ctx, "st")
		if err != nil {
			return 1, err
		}
		for _, name := range []string{"a", "b"} {
			if _, err := n.AddHost(ctx, name); err != nil {
				return 1, errors.Join(err, n.Close())
			}
		}
		if err := n.Close(); err != nil {
			return 1, err
		}
	}
	return 0, nil
}

// TestNetTiming reports how long a Net of 8 hosts takes to set up, to
// partition, to heal and to remove. It asserts nothing.
func TestNetTiming(t *testing.T) {
	needNetns(t)
	ctx := t.Context()
	t0 := time.Now()
	n, err := topology.NewNet(ctx, "time")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	t1 := time.Now()
	var hosts []topology.Host
	for i := range 8 {
		h, err := n.AddHost(ctx, fmt.Sprintf("h%d", i))
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	t2 := time.Now()
	for _, h := range hosts[:4] {
		if err := h.Isolate(ctx, hosts[4:]...); err != nil {
			t.Fatal(err)
		}
	}
	t3 := time.Now()
	for _, h := range hosts[:4] {
		if err := h.Heal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t4 := time.Now()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	t5 := time.Now()
	ms := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	t.Logf("8 hosts: NewNet %s, 8 AddHost %s (setup %s); halves partitioned (4 Isolate) %s, healed (4 Heal) %s; Close %s",
		ms(t1.Sub(t0)), ms(t2.Sub(t1)), ms(t2.Sub(t0)), ms(t3.Sub(t2)), ms(t4.Sub(t3)), ms(t5.Sub(t4)))
}

// needNetns skips a test that needs network namespaces where they cannot
// be made.
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	for _, name := range []string{"ip", "iptables-restore", "iptables-save"} {
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("network namespaces need %s: %v", name, err)
		}
	}
}

// newNet makes a Net that the test closes when it ends.
func newNet(t *testing.T, name string) *topology.Net {
	t.Helper()
	needNetns(t)
	n, err := topology.NewNet(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

func addHost(t *testing.T, n *topology.Net, name string) *topology.NetnsHost {
	t.Helper()
	h, err := n.AddHost(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// helperCmd is the command that runs the test binary as a helper on h.
func helperCmd(h topology.Host, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	// The hosts of this machine all have a Command.
	cmd := h.(interface {
		Command(string, ...string) *exec.Cmd
	}).Command(exe, args...)
	// Built with -race, a process sleeps a second before it exits, unless
	// told not to.
	cmd.Env = append(os.Environ(), helperEnv+"=1", "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	return cmd
}

// A process is a helper started by start, with its stdin and stdout.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File // a pipe, so reads take a deadline
}

// start runs a helper on h until the test ends, once it says it is ready.
func start(t *testing.T, h topology.Host, args ...string) process {
	t.Helper()
	cmd := helperCmd(h, args...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		r.Close()
	})
	_ = r.SetReadDeadline(time.Now().Add(patience))
	var b [len("ready\n")]byte
	if _, err := io.ReadFull(r, b[:]); err != nil || string(b[:]) != "ready\n" {
		t.Fatalf("%s on %s: said %q, %v", args, h.Name(), b, err)
	}
	return process{cmd: cmd, stdin: stdin, stdout: r}
}

// echoHere serves lines back on ip in this process until the test ends,
// and returns its address.
func echoHere(t *testing.T, ip string) string {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// probe tells how lines sent from host from to each of addrs come back:
// "ok", "timeout", or the error; all at once, by one helper on from.
func probe(from topology.Host, addrs ...string) map[string]string {
	out, err := helperCmd(from, append([]string{"probe"}, addrs...)...).Output()
	got := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if addr, result, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			got[addr] = result
		}
	}
	for _, addr := range addrs {
		if _, ok := got[addr]; !ok {
			got[addr] = fmt.Sprintf("no result: %v", err)
		}
	}
	return got
}

// ip runs ip with args and returns its output.
func ip(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// namespaces lists the network namespaces whose names start with prefix.
func namespaces(t *testing.T, prefix string) []string {
	var names []string
	for line := range strings.Lines(ip(t, "netns", "list")) {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			names = append(names, f[0])
		}
	}
	return names
}

// links lists the root namespace's links whose names start with prefix.
func links(t *testing.T, prefix string) []string {
	var names []string
	for line := range strings.Lines(ip(t, "-o", "link", "show")) {
		// "3: name@peer: <FLAGS> ..."
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	return names
}

// counters matches the packet and byte counts of iptables-save's chains
// and nft's counters.
var counters = regexp.MustCompile(`\[\d+:\d+\]|packets \d+ bytes \d+`)

// firewall is the root namespace's firewall, as iptables-save (and nft,
// when installed) show it, without the times and counters that change.
func firewall(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"iptables-save"}, {"nft", "list", "ruleset"}} {
		if _, err := exec.LookPath(args[0]); err != nil {
			continue
		}
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		for line := range strings.Lines(string(out)) {
			if !strings.HasPrefix(line, "#") {
				b.WriteString(counters.ReplaceAllString(line, "[]"))
			}
		}
	}
	return b.String()
}

// TestNetNamesItself: Nets made at once with no name each get one of
// their own, and a /24 of their own.
func TestNetNamesItself(t *testing.T) {
	needNetns(t)
	nets := make([]*topology.Net, 3)
	errs := make([]error, len(nets))
	var wg sync.WaitGroup
	for i := range nets {
		wg.Go(func() { nets[i], errs[i] = topology.NewNet(t.Context(), "") })
	}
	wg.Wait()
	ips := map[string]bool{}
	for i, n := range nets {
		if errs[i] != nil {
			t.Fatalf("net %d: %v", i, errs[i])
		}
		t.Cleanup(func() { n.Close() })
		if ip := n.Root().IP(); ips[ip] {
			t.Errorf("two nets at %s", ip)
		} else {
			ips[ip] = true
		}
		addHost(t, n, "h") // the same host name on each: their namespaces differ
	}
}
