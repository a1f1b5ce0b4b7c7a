package topology

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// What a Net makes is named after the process that made it: its switch
// namespace and the root namespace's end of its link are "hz<pid>-<net>",
// its hosts' namespaces "hz<pid>-<net>-<host>". So RemoveOrphans can tell
// what a killed run left, and the names fit IFNAMSIZ: "hz" and a PID of up
// to 7 digits, "-" and a net name of up to 5 make 15.
const (
	bridge   = "br0"    // the bridge, in the switch namespace
	rootPort = "root"   // the bridge's port towards the root namespace
	hostLink = "eth0"   // a host's end of its link into the bridge
	chain    = "HIATUS" // a host's iptables chain, which Isolate rewrites
	netnsDir = "/var/run/netns"
	// cleanupTimeout bounds what undoes a Net, which runs whatever the
	// caller's context.
	cleanupTimeout = 30 * time.Second
)

// subnets holds the Nets' /24s: 10.74.0.0/16, clear of the ranges that
// clouds (10.0, 10.1, GCP's 10.128.0.0/9), Kubernetes (10.42, 10.43,
// 10.96.0.0/12, 10.244), podman (10.88, 10.89) and OpenVPN (10.8) take by
// default. NewNet skips any /24 that an address or route of the machine
// overlaps.
var subnets = netip.MustParsePrefix("10.74.0.0/16")

var (
	netName   = regexp.MustCompile(`^[a-z0-9]{1,5}$`)
	hostName  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,14}$`)
	ownedName = regexp.MustCompile(`^hz([0-9]+)-`)
)

// MaxHosts is how many hosts a Net holds: its /24 but the network, the
// root namespace's .1 and the broadcast.
const MaxHosts = 253

// A Net is a private bridge with hosts on it: each a network namespace
// with a veth pair into the bridge and an address in a /24 of subnets that
// exists only on this machine. The root namespace — this process, and what
// runs on Local — is on the bridge too, at .1 (Root), so it reaches every
// host. Hosts reach each other and .1, nothing else: they have no default
// route. The bridge lives in a namespace of its own, so traffic between
// hosts never crosses the machine's firewall, whatever br_netfilter does.
type Net struct {
	name   string
	ns     string // the switch namespace, which holds the bridge
	link   string // the root namespace's end of its veth into the bridge
	subnet netip.Prefix
	root   *rootHost

	mu     sync.Mutex // held through every command that changes the Net
	hosts  []*NetnsHost
	closed bool
}

// NewNet creates a bridge with no host on it yet; it needs root (else the
// error wraps ErrNeedsNamespaces). name, 1 to 5 lower-case letters or
// digits, tells apart the Nets of one process; "" picks one no other Net
// of the process has. It first removes what killed runs left
// (RemoveOrphans).
func NewNet(ctx context.Context, name string) (*Net, error) {
	if name != "" && !netName.MatchString(name) {
		return nil, fmt.Errorf("topology: net name %q: want 1 to 5 lower-case letters or digits", name)
	}
	if err := needNamespaces(); err != nil {
		return nil, err
	}
	if err := RemoveOrphans(); err != nil {
		return nil, err
	}
	n, err := addSwitch(ctx, name)
	if err != nil {
		return nil, err
	}
	linked := false
	err = func() error {
		if err := run(ctx, nil, "ip", "link", "add", "name", n.link, "type", "veth", "peer", "name", rootPort, "netns", n.ns); err != nil {
			return err
		}
		linked = true
		if err := ipBatch(ctx, n.ns,
			"link add name "+bridge+" up type bridge",
			"link set dev "+rootPort+" master "+bridge+" up"); err != nil {
			return err
		}
		return n.claimSubnet(ctx)
	}()
	if err != nil {
		return nil, errors.Join(err, n.teardown(linked))
	}
	n.root = &rootHost{n: n}
	return n, nil
}

// addSwitch makes the switch namespace of the Net called name, or of the
// first of n0, n1, … that no Net of this process has when name is "".
func addSwitch(ctx context.Context, name string) (*Net, error) {
	for i := 0; ; i++ {
		try := name
		if name == "" {
			try = fmt.Sprintf("n%d", i)
		}
		id := fmt.Sprintf("hz%d-%s", os.Getpid(), try)
		err := run(ctx, nil, "ip", "netns", "add", id)
		if err == nil {
			return &Net{name: try, ns: id, link: id}, nil
		}
		if _, serr := os.Stat(filepath.Join(netnsDir, id)); name != "" || serr != nil || i >= 9999 {
			return nil, err
		}
	}
}

// claimSubnet gives the root namespace's end of the link the .1 of the
// first /24 of subnets that no address or route of the machine overlaps.
// The /24's route is the claim: the kernel refuses a second route to the
// same prefix, so two runs that pick a /24 at once do not both get it.
func (n *Net) claimSubnet(ctx context.Context) error {
	base := subnets.Addr().As4()
	for y := range 1 << (24 - subnets.Bits()) {
		base[2] = subnets.Addr().As4()[2] + byte(y)
		p := netip.PrefixFrom(netip.AddrFrom4(base), 24)
		used, err := usedPrefixes()
		if err != nil {
			return err
		}
		if slices.ContainsFunc(used, func(u owned) bool { return u.prefix.Overlaps(p) }) {
			continue
		}
		err = ipBatch(ctx, "",
			"link set dev "+n.link+" up",
			"route add "+p.String()+" dev "+n.link,
			"addr add "+netip.PrefixFrom(p.Addr().Next(), 24).String()+" dev "+n.link+" noprefixroute")
		if err == nil {
			n.subnet = p
			return nil
		}
		// Another run's route to p may have come first.
		used, uerr := usedPrefixes()
		if uerr != nil || !slices.ContainsFunc(used, func(u owned) bool { return u.prefix == p && u.iface != n.link }) {
			return err
		}
	}
	return fmt.Errorf("topology: no /24 of %s is free on this machine", subnets)
}

// An owned prefix is an address's or a route's, and its interface's name.
type owned struct {
	prefix netip.Prefix
	iface  string
}

// usedPrefixes returns the IPv4 prefixes of the root namespace's addresses
// and of its main table's routes but the default.
func usedPrefixes() ([]owned, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("topology: interfaces: %w", err)
	}
	var used []owned
	for _, i := range ifaces {
		addrs, err := i.Addrs()
		if err != nil {
			return nil, fmt.Errorf("topology: addresses of %s: %w", i.Name, err)
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || ipn.IP.To4() == nil {
				continue
			}
			ones, _ := ipn.Mask.Size()
			addr, _ := netip.AddrFromSlice(ipn.IP.To4())
			used = append(used, owned{netip.PrefixFrom(addr, ones).Masked(), i.Name})
		}
	}
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("topology: routes: %w", err)
	}
	// Iface Destination Gateway Flags RefCnt Use Metric Mask ..., the
	// addresses in hex, in the kernel's (little-endian) byte order.
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dest, err1 := strconv.ParseUint(f[1], 16, 32)
		mask, err2 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil || mask == 0 {
			continue
		}
		addr := netip.AddrFrom4([4]byte{byte(dest), byte(dest >> 8), byte(dest >> 16), byte(dest >> 24)})
		m := net.IPv4Mask(byte(mask), byte(mask>>8), byte(mask>>16), byte(mask>>24))
		ones, _ := m.Size()
		used = append(used, owned{netip.PrefixFrom(addr, ones).Masked(), f[0]})
	}
	return used, nil
}

// Root is the root namespace as a host of n: at the .1 of n's /24, its
// commands run plainly on this machine. A server there that hosts must
// reach listens on Root().IP() or on all addresses, not on 127.0.0.1. Its
// Isolate acts from the peers' side, for the root namespace's firewall is
// the machine's, which a Net never touches.
func (n *Net) Root() Host { return n.root }

// AddHost adds a host: a namespace with lo up and a link into the bridge,
// at the next free address of n's /24. name, of lower-case letters, digits
// and "-", up to 15, tells it apart from n's other hosts. If it fails, it
// leaves nothing behind.
func (n *Net) AddHost(ctx context.Context, name string) (*NetnsHost, error) {
	if !hostName.MatchString(name) || name == rootPort || name == bridge {
		return nil, fmt.Errorf("topology: host name %q: want up to 15 lower-case letters, digits or '-', not %q or %q", name, rootPort, bridge)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, n.errClosed()
	}
	if slices.ContainsFunc(n.hosts, func(h *NetnsHost) bool { return h.name == name }) {
		return nil, fmt.Errorf("topology: net %s has a host %s already", n.name, name)
	}
	if len(n.hosts) >= MaxHosts {
		return nil, fmt.Errorf("topology: net %s is full: %d hosts", n.name, len(n.hosts))
	}
	a := n.subnet.Addr().As4()
	a[3] = byte(len(n.hosts) + 2)
	h := &NetnsHost{n: n, name: name, ns: n.ns + "-" + name, ip: netip.AddrFrom4(a).String()}
	if err := run(ctx, nil, "ip", "netns", "add", h.ns); err != nil {
		return nil, err
	}
	linked := false
	err := func() error {
		if err := run(ctx, nil, "ip", "-n", n.ns, "link", "add", "name", name, "up", "master", bridge,
			"type", "veth", "peer", "name", hostLink, "netns", h.ns); err != nil {
			return err
		}
		linked = true
		return ipBatch(ctx, h.ns,
			"link set dev lo up",
			"addr add "+h.ip+"/24 dev "+hostLink,
			"link set dev "+hostLink+" up")
	}()
	if err != nil {
		return nil, errors.Join(err, h.remove(linked))
	}
	n.hosts = append(n.hosts, h)
	return h, nil
}

// remove undoes a host that AddHost could not finish. Its link goes first:
// a namespace's links vanish with it only later, and the bridge's end
// would keep the name a retry needs.
func (h *NetnsHost) remove(linked bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	if linked {
		errs = append(errs, run(ctx, nil, "ip", "-n", h.n.ns, "link", "del", "dev", h.name))
	}
	errs = append(errs, run(ctx, nil, "ip", "netns", "del", h.ns))
	return errors.Join(errs...)
}

// Close removes every namespace and link of n, and with them every rule
// Isolate made. Processes still running on a host keep its namespace until
// they end, cut off from every other. It may be called more than once.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	return n.teardown(true)
}

// teardown removes n's link to the root namespace, if linked, and its
// namespaces, even when one of them fails. The link goes first: it would
// otherwise vanish only later, with the switch namespace, holding its
// name and its route meanwhile.
func (n *Net) teardown(linked bool) error {
	var lines []string
	if linked {
		lines = append(lines, "link del dev "+n.link)
	}
	for _, h := range n.hosts {
		lines = append(lines, "netns del "+h.ns)
	}
	lines = append(lines, "netns del "+n.ns)
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	return run(ctx, lines, "ip", "-force", "-batch", "-")
}

func (n *Net) errClosed() error { return fmt.Errorf("topology: net %s is closed", n.name) }

// members returns the hosts of n among peers, leaving self out, and
// whether the root namespace is among them; it fails on a peer not on n.
func (n *Net) members(self Host, peers []Host) (hosts []*NetnsHost, root bool, err error) {
	for _, p := range peers {
		on := false
		switch p := p.(type) {
		case *NetnsHost:
			on = p.n == n
			if on && Host(p) != self {
				hosts = append(hosts, p)
			}
		case *rootHost:
			on = p.n == n
			root = root || on && Host(p) != self
		}
		if !on {
			name := "nil"
			if p != nil {
				name = p.Name()
			}
			return nil, false, fmt.Errorf("topology: %s cannot be isolated from %s, which is not on net %s", self.Name(), name, n.name)
		}
	}
	return hosts, root, nil
}

// RemoveOrphans removes the namespaces and links that Nets of processes
// now gone left: what a run killed with SIGKILL leaves. Those of live
// processes stay.
func RemoveOrphans() error {
	var lines []string
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("topology: interfaces: %w", err)
	}
	for _, i := range ifaces {
		if orphan(i.Name) {
			lines = append(lines, "link del dev "+i.Name)
		}
	}
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("topology: network namespaces: %w", err)
	}
	for _, e := range entries {
		if orphan(e.Name()) {
			lines = append(lines, "netns del "+e.Name())
		}
	}
	if len(lines) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	err = run(ctx, lines, "ip", "-force", "-batch", "-")
	if err != nil && !orphansLeft() {
		return nil // another process removed them first
	}
	return err
}

// orphansLeft tells whether an orphan may still be there.
func orphansLeft() bool {
	ifaces, err1 := net.Interfaces()
	entries, err2 := os.ReadDir(netnsDir)
	return err1 != nil || err2 != nil ||
		slices.ContainsFunc(ifaces, func(i net.Interface) bool { return orphan(i.Name) }) ||
		slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return orphan(e.Name()) })
}

// orphan tells whether name is of a Net whose process is gone.
func orphan(name string) bool {
	m := ownedName.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil || pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// A NetnsHost is a host of a Net: a network namespace of its own.
type NetnsHost struct {
	n        *Net
	name, ns string
	ip       string

	// Guarded by n.mu: the IPs the host's own Isolate cut it from, those
	// Root's Isolate did, and whether its filter table may differ from
	// what they say (a rewrite failed).
	cut, cutByRoot map[string]bool
	unsure         bool
}

// Name is the name given to AddHost.
func (h *NetnsHost) Name() string { return h.name }

// IP is the host's address on the bridge.
func (h *NetnsHost) IP() string { return h.ip }

// Command runs name in the host's namespace, through `ip netns exec`,
// which execs it in place.
func (h *NetnsHost) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.ns, name}, args...)...)
}

// Isolate drops, in the host's namespace, every packet from or to peers,
// which must be on the host's Net (its hosts or Root).
func (h *NetnsHost) Isolate(ctx context.Context, peers ...Host) error {
	hosts, root, err := h.n.members(h, peers)
	if err != nil {
		return err
	}
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	if h.n.closed {
		return h.n.errClosed()
	}
	cut := maps.Clone(h.cut)
	if cut == nil {
		cut = map[string]bool{}
	}
	for _, p := range hosts {
		cut[p.ip] = true
	}
	if root {
		cut[h.n.root.IP()] = true
	}
	return h.setRules(ctx, cut, h.cutByRoot)
}

// Heal removes the rules of the host's own Isolate calls, between it and
// peers or, with none, all of them; not those of Root's.
func (h *NetnsHost) Heal(ctx context.Context, peers ...Host) error {
	hosts, root, err := h.n.members(h, peers)
	if err != nil {
		return err
	}
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	if h.n.closed {
		return h.n.errClosed()
	}
	var cut map[string]bool
	if len(peers) > 0 {
		cut = maps.Clone(h.cut)
		for _, p := range hosts {
			delete(cut, p.ip)
		}
		if root {
			delete(cut, h.n.root.IP())
		}
	}
	return h.setRules(ctx, cut, h.cutByRoot)
}

// setRules rewrites the host's filter table, whole and at once, to drop
// what crosses between it and the IPs of cut and cutByRoot, unless it does
// already. Rules go in chain HIATUS, jumped to from INPUT and OUTPUT for
// every interface but lo; the namespace's firewall is the Net's alone.
// n.mu is held.
func (h *NetnsHost) setRules(ctx context.Context, cut, cutByRoot map[string]bool) error {
	if !h.unsure && maps.Equal(cut, h.cut) && maps.Equal(cutByRoot, h.cutByRoot) {
		return nil
	}
	ips := slices.Sorted(maps.Keys(cut))
	for ip := range cutByRoot {
		if !cut[ip] {
			ips = append(ips, ip)
		}
	}
	slices.Sort(ips)
	table := []string{
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		":" + chain + " - [0:0]",
		"-A INPUT ! -i lo -j " + chain,
		"-A OUTPUT ! -o lo -j " + chain,
	}
	for _, ip := range ips {
		table = append(table, "-A "+chain+" -s "+ip+" -j DROP", "-A "+chain+" -d "+ip+" -j DROP")
	}
	table = append(table, "COMMIT")
	if err := run(ctx, table, "ip", "netns", "exec", h.ns, "iptables-restore", "-w"); err != nil {
		h.unsure = true // iptables-restore is atomic, but a cancel may come after its commit
		return err
	}
	h.cut, h.cutByRoot, h.unsure = cut, cutByRoot, false
	return nil
}

// A rootHost is the root namespace as a host of a Net.
type rootHost struct{ n *Net }

func (r *rootHost) Name() string { return "root" }

func (r *rootHost) IP() string { return r.n.subnet.Addr().Next().String() }

func (r *rootHost) Command(name string, args ...string) *exec.Cmd {
	return exec.Command(name, args...)
}

// Isolate drops, in each peer's namespace, every packet from or to the
// root namespace.
func (r *rootHost) Isolate(ctx context.Context, peers ...Host) error {
	hosts, _, err := r.n.members(r, peers)
	if err != nil {
		return err
	}
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	if r.n.closed {
		return r.n.errClosed()
	}
	var errs []error
	for _, h := range hosts {
		errs = append(errs, h.setRules(ctx, h.cut, map[string]bool{r.IP(): true}))
	}
	return errors.Join(errs...)
}

// Heal removes the rules of Root's Isolate calls, in peers or, with none
// named, in every host.
func (r *rootHost) Heal(ctx context.Context, peers ...Host) error {
	hosts, _, err := r.n.members(r, peers)
	if err != nil {
		return err
	}
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	if r.n.closed {
		return r.n.errClosed()
	}
	if len(peers) == 0 {
		hosts = r.n.hosts
	}
	var errs []error
	for _, h := range hosts {
		errs = append(errs, h.setRules(ctx, h.cut, nil))
	}
	return errors.Join(errs...)
}

// needNamespaces tells why this process cannot make a Net, if it cannot.
func needNamespaces() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("%w: running as uid %d, not root", ErrNeedsNamespaces, uid)
	}
	for _, name := range []string{"ip", "iptables-restore"} {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Errorf("%w: %w", ErrNeedsNamespaces, err)
		}
	}
	return nil
}

// ipBatch runs lines as `ip -batch -`, in namespace ns unless it is "";
// it stops at the first line that fails.
func ipBatch(ctx context.Context, ns string, lines ...string) error {
	args := []string{"-batch", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	return run(ctx, lines, "ip", args...)
}

// run runs a command, input lines on its stdin; its error names the
// command, its input and its output. A command killed by a terminal's
// signal is run again (see caughtInFork).
func run(ctx context.Context, input []string, name string, args ...string) error {
	for try := 1; ; try++ {
		cmd := exec.CommandContext(ctx, name, args...)
		// A group of its own, as the servers': a terminal's Ctrl-C reaches
		// hiatus alone, which then undoes the Net whole; killed with it,
		// this command would leave its work half done.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if len(input) > 0 {
			cmd.Stdin = strings.NewReader(strings.Join(input, "\n") + "\n")
		}
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		if ctx.Err() == nil && caughtInFork(err) && try < maxForkRetries {
			continue
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		what := strings.Join(cmd.Args, " ")
		if len(input) > 0 {
			what += " <<< " + strings.Join(input, "; ")
		}
		return fmt.Errorf("topology: %s: %w: %s", what, err, bytes.TrimSpace(out))
	}
}

// maxForkRetries bounds the runs of a command that signals keep ending, in
// case what sends them is not a terminal.
const maxForkRetries = 100

// caughtInFork tells whether a command ended by SIGINT, SIGTERM or SIGHUP:
// one sent to this process's group (a terminal's Ctrl-C) while the child,
// forked but not yet in a group of its own, still belonged to it. Go's
// fork blocks signals until after setpgid, and the child then takes the
// pending one by default, before it runs the command, so the command did
// nothing and is run again. (Under a storm of SIGINT to the group, a third
// of such children died so: a Net's teardown among them, leaving its
// namespaces behind.)
func caughtInFork(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return false
	}
	switch ws.Signal() {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP:
		return true
	}
	return false
}
