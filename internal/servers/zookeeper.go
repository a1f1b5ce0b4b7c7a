package servers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/internal/shellquote"
)

// The jars of Debian's zookeeper package (3.8): the server's own, whose
// manifest names the libraries it needs, and slf4j-simple (libslf4j-java,
// which it depends on), through which the server logs to its standard
// error, the server's log file. Without a binding slf4j would log nothing.
var zooJars = []string{"/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"}

// ZooKeeperTick is the throwaway servers' tickTime: the unit of
// ZooKeeper's timings. The shortest session a server grants is two ticks
// (minSessionTimeout), a session expires on the first tick boundary past its
// timeout, and a follower that the leader has not heard for syncLimit ticks
// is dropped. 100 ms gives sessions as short as the pause test's 200 ms
// lease while a follower is given a second.
const ZooKeeperTick = 100 * time.Millisecond

// A ZooKeeper is a throwaway ZooKeeper ensemble: one server (standalone),
// or several that elect a leader among them and commit each write on a
// majority. Each is a Server of its own (its own JVM, directory, ports and
// log), which the nemesis can pause, crash and restart; a restarted server
// keeps its directory, so its znodes and sessions survive (ZooKeeper logs
// and fsyncs each transaction before it acknowledges it).
type ZooKeeper struct {
	Servers []*Server
}

// StartZooKeeper starts an ensemble of n servers (1: a standalone one) on
// free loopback ports, each in a private temporary directory.
func StartZooKeeper(ctx context.Context, n int) (*ZooKeeper, error) {
	return StartZooKeeperOn(ctx, make([]Host, n))
}

// StartZooKeeperOn starts an ensemble of a server on each of hosts (nil
// for this machine), and waits until each serves clients: until a leader is
// elected and each has joined it.
func StartZooKeeperOn(ctx context.Context, hosts []Host) (_ *ZooKeeper, err error) {
	if len(hosts) == 0 {
		return nil, errors.New("zookeeper: an ensemble needs at least one server")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("zookeeper: java: %w (on Debian: apt-get install zookeeper)", ErrMissing)
	}
	for _, j := range zooJars {
		if _, err := os.Stat(j); err != nil {
			return nil, fmt.Errorf("zookeeper: %s: %w (on Debian: apt-get install zookeeper)", j, ErrMissing)
		}
	}
	return tryEnsemble(ctx, func() (*ZooKeeper, error) { return startEnsemble(ctx, java, hosts) })
}

// tryEnsemble starts an ensemble with start, up to three times: a try
// that failed because another process took one of its ports between their
// choice and the server's bind starts again, every port afresh.
func tryEnsemble(ctx context.Context, start func() (*ZooKeeper, error)) (*ZooKeeper, error) {
	var last error
	for range 3 {
		z, err := start()
		if err == nil {
			return z, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// zooPorts are one server's ports: clients', and the ensemble's (quorum and
// leader election) when it has more than one server.
type zooPorts struct{ client, quorum, election int }

// startEnsemble makes each server's directory and configuration, starts
// them all (a member of an ensemble answers only once a quorum is up), and
// waits for each.
func startEnsemble(ctx context.Context, java string, hosts []Host) (_ *ZooKeeper, err error) {
	z := &ZooKeeper{}
	defer func() {
		if err != nil {
			z.Stop()
		}
	}()
	// The kernel may offer a port again once its listener is closed: each
	// of the ensemble's is distinct.
	ports := make([]zooPorts, len(hosts))
	taken := map[int]bool{}
	for i := range ports {
		for _, p := range []*int{&ports[i].client, &ports[i].quorum, &ports[i].election} {
			for *p == 0 || taken[*p] {
				if *p, err = freePort(); err != nil {
					return nil, fmt.Errorf("zookeeper: %w", err)
				}
			}
			taken[*p] = true
		}
	}
	for i, h := range hosts {
		s, err := newZooServer(java, h, i, hosts, ports)
		if err != nil {
			return nil, err
		}
		z.Servers = append(z.Servers, s)
	}
	for _, s := range z.Servers {
		if err := s.start(); err != nil {
			return nil, err
		}
	}
	for i, s := range z.Servers {
		if err := s.wait(ctx); err != nil {
			return nil, fmt.Errorf("zookeeper server %d: %w", i, err)
		}
	}
	return z, nil
}

// newZooServer makes server i of the ensemble: its directory, its myid and
// zoo.cfg, and the command that starts it.
func newZooServer(java string, h Host, i int, hosts []Host, ports []zooPorts) (*Server, error) {
	d, err := tempDir("hiatus-zookeeper-", nil)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: %w", err)
	}
	dir := d.Path()
	s := &Server{name: "zookeeper", host: h, bin: java, dir: dir, home: d, log: d.Join("zookeeper.log"),
		quit: syscall.SIGTERM, crash: syscall.SIGKILL}
	s.Addr = net.JoinHostPort(s.ip(), strconv.Itoa(ports[i].client))
	s.URL = "zookeeper://" + s.Addr
	ips := make([]string, len(hosts))
	for j, h := range hosts {
		ips[j] = "127.0.0.1"
		if h != nil {
			ips[j] = h.IP()
		}
	}
	cfg := zooConfig(dir, i, ips, ports)
	if err := writeZooConfig(d, i, cfg); err != nil {
		removeDir(d)
		return nil, fmt.Errorf("zookeeper: %w", err)
	}
	zooArgs(s, filepath.Join(dir, "zoo.cfg"))
	return s, nil
}

// zooArgs sets the arguments of the server s, its configuration at cfg,
// and its readiness.
func zooArgs(s *Server, cfg string) {
	s.args = []string{
		// A small heap and the serial collector: the ensemble is three
		// JVMs on a small machine beside the rest of the run, and a
		// server's pauses should be the nemesis's, not its collector's.
		"-Xms64m", "-Xmx256m", "-XX:+UseSerialGC",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-cp", strings.Join(zooJars, ":"),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg,
	}
	addr := s.Addr
	s.ready = func(ctx context.Context) error { return zooServing(ctx, addr) }
}

// StartZooKeeperOnNodes starts an ensemble of a server on each of nodes
// (one node may hold several), from each node's java and Debian's
// zookeeper jars there, on ports free of the node's range, and waits until
// each serves clients.
func StartZooKeeperOnNodes(ctx context.Context, nodes []Node) (_ *ZooKeeper, err error) {
	if len(nodes) == 0 {
		return nil, errors.New("zookeeper: an ensemble needs at least one server")
	}
	javas := make([]string, len(nodes))
	for i, n := range nodes {
		if javas[i], err = lookOnNode(n, needJava); err == nil {
			_, err = lookOnNode(n, needZooJars)
		}
		if err != nil {
			return nil, fmt.Errorf("zookeeper: %w", err)
		}
	}
	return tryEnsemble(ctx, func() (*ZooKeeper, error) { return startEnsembleOnNodes(ctx, javas, nodes) })
}

// startEnsembleOnNodes is startEnsemble's on nodes: each server's
// directory on its node, its myid and zoo.cfg written there, on ports
// drawn at random from the node's range, distinct on each node.
func startEnsembleOnNodes(ctx context.Context, javas []string, nodes []Node) (_ *ZooKeeper, err error) {
	z := &ZooKeeper{}
	defer func() {
		if err != nil {
			z.Stop()
		}
	}()
	ports := make([]zooPorts, len(nodes))
	ips := make([]string, len(nodes))
	taken := map[string]bool{}
	for i, n := range nodes {
		ips[i] = n.IP()
		for _, p := range []*int{&ports[i].client, &ports[i].quorum, &ports[i].election} {
			for *p == 0 || taken[ips[i]+":"+strconv.Itoa(*p)] {
				*p = nodePort()
			}
			taken[ips[i]+":"+strconv.Itoa(*p)] = true
		}
	}
	for i, n := range nodes {
		dir, err := nodeDir(n, "zookeeper", "")
		if err != nil {
			return nil, err
		}
		s := &Server{name: "zookeeper", node: n, bin: javas[i], dir: dir, log: path.Join(dir, "zookeeper.log"),
			quit: syscall.SIGTERM, crash: syscall.SIGKILL}
		z.Servers = append(z.Servers, s)
		s.Addr = net.JoinHostPort(n.IP(), strconv.Itoa(ports[i].client))
		s.URL = "zookeeper://" + s.Addr
		q := shellquote.Quote
		if _, err := s.onNode(fmt.Sprintf("cd %s && printf '%%s\n' %d > myid && printf %%s %s > zoo.cfg",
			q(dir), i+1, q(zooConfig(dir, i, ips, ports)))); err != nil {
			return nil, err
		}
		zooArgs(s, path.Join(dir, "zoo.cfg"))
	}
	for _, s := range z.Servers {
		if err := s.start(); err != nil {
			return nil, err
		}
	}
	for i, s := range z.Servers {
		if err := s.wait(ctx); err != nil {
			return nil, fmt.Errorf("zookeeper server %d, on node %s: %w", i, nodes[i].Name(), err)
		}
	}
	return z, nil
}

// zooConfig is server i's zoo.cfg. The admin server (an HTTP server on
// port 8080 by default) is off, as every listener but the client's and the
// ensemble's on ports of their own. Three four-letter words are allowed:
// srvr, which the readiness check asks, mntr, whose count of the sessions
// the server expired the lock server's record reads, and conf, whose
// tickTime it reads (a session outlives its timeout by up to a tick).
func zooConfig(dir string, i int, ips []string, ports []zooPorts) string {
	tick := int(ZooKeeperTick / time.Millisecond)
	lines := []string{
		"tickTime=" + strconv.Itoa(tick),
		"initLimit=50", // ticks: 5 s for a follower to catch up with the leader
		"syncLimit=10", // ticks: 1 s of silence before a follower is dropped
		"minSessionTimeout=" + strconv.Itoa(2*tick),
		"maxSessionTimeout=600000",
		// The server's own directory: its myid is there, and the server
		// keeps its snapshots and transaction log in version-2/ beside it.
		"dataDir=" + dir,
		"clientPort=" + strconv.Itoa(ports[i].client),
		"clientPortAddress=" + ips[i],
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,mntr,conf",
		// Every write is fsynced before it is acknowledged (the default,
		// said here because a restart's survival rests on it).
		"forceSync=yes",
		"autopurge.purgeInterval=0",
	}
	if len(ips) > 1 {
		for j, ip := range ips {
			lines = append(lines, fmt.Sprintf("server.%d=%s:%d:%d", j+1, ip, ports[j].quorum, ports[j].election))
		}
		lines = append(lines, "quorumListenOnAllIPs=false", "reconfigEnabled=false", "standaloneEnabled=false")
	}
	return strings.Join(lines, "\n") + "\n"
}

// writeZooConfig writes zoo.cfg and myid (the server's number in the
// ensemble, from 1) in dir, the server's own os.MkdirTemp directory and
// data directory.
func writeZooConfig(d *files.Dir, i int, cfg string) error {
	if err := d.WriteFile("myid", []byte(strconv.Itoa(i+1)+"\n")); err != nil {
		return err
	}
	return d.WriteFile("zoo.cfg", []byte(cfg))
}

// zooServing asks the server at addr srvr, whose answer names its mode
// (standalone, leader or follower) only once it serves clients: a member
// of an ensemble without a leader answers "This ZooKeeper instance is not
// currently serving requests".
func zooServing(ctx context.Context, addr string) error {
	mode, err := ZooKeeperMode(ctx, addr)
	if err != nil {
		return err
	}
	if mode == "" {
		return fmt.Errorf("zookeeper at %s: not serving requests yet", addr)
	}
	return nil
}

// ZooKeeperMode asks the server at addr (host:port) its srvr four-letter
// word and returns its Mode: standalone, leader or follower; "" for one
// that does not serve requests (an ensemble's member without a quorum).
func ZooKeeperMode(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", sc.Err()
}

// ConnectString is the ensemble's client addresses, host:port, comma
// separated, as ZooKeeper's clients take them.
func (z *ZooKeeper) ConnectString() string { return strings.Join(z.Addrs(), ",") }

// Addrs are the servers' client addresses, host:port.
func (z *ZooKeeper) Addrs() []string {
	var out []string
	for _, s := range z.Servers {
		out = append(out, s.Addr)
	}
	return out
}

// KeepLogs has Stop copy each server's log to dir, as zookeeper-I.log.
func (z *ZooKeeper) KeepLogs(dir string) {
	for i, s := range z.Servers {
		s.KeepLog(filepath.Join(dir, fmt.Sprintf("zookeeper-%d.log", i)))
	}
}

// Stop stops every server and removes its directory. It may be called on
// a nil ZooKeeper, and more than once.
func (z *ZooKeeper) Stop() error {
	if z == nil {
		return nil
	}
	var errs []error
	for _, s := range z.Servers {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}
