// Package sshtest makes a test network of machines reached only over SSH:
// hosts of a topology.Net, each running its own sshd (Debian's
// openssh-server) with a host key made for the test, which trusts a key
// made for the test; and the inventory (--hosts ssh:FILE) that names them.
package sshtest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/topology"
	"golang.org/x/crypto/ssh"
)

// Sshd is Debian's sshd, which scripts/setup --tests installs.
const Sshd = "/usr/sbin/sshd"

// A Node is what the network's inventory says of a host: its name and
// roles ("worker", "redis,postgres"); and programs its sessions do not
// find (Hide: "redis-server"), as on a node that lacks them.
type Node struct {
	Name, Roles string
	Hide        []string
}

// A Net is the test network.
type Net struct {
	Inventory string // the inventory file
	Key       string // the private key that logs in to every host as root
	Hosts     []*topology.NetnsHost
	net       *topology.Net
	sshds     []*exec.Cmd
	logs      []*bytes.Buffer
	bashrc    string // root's .bashrc on every host
}

// Lab is the test network of the --hosts ssh runs of the tests: two
// workers' nodes, the lock's Redis node (and etcd's and ZooKeeper's, for
// a lock on them) and PostgreSQL's.
var Lab = []Node{{Name: "w0", Roles: "worker"}, {Name: "w1", Roles: "worker"},
	{Name: "n0", Roles: "redis,etcd,zookeeper"}, {Name: "pg", Roles: "postgres"}}

// StartT starts a Net of nodes for the test t, until t ends; it skips t,
// saying so, without root.
func StartT(t testing.TB, nodes []Node) *Net {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("NOT RUN: the SSH test network needs root (CI runs as root)")
	}
	sn, err := Start(context.Background(), t.TempDir(), nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sn.Close(); err != nil {
			t.Error(err)
		}
	})
	return sn
}

// NodeT is a one-node Net, its node called name with roles, connected for
// a run of its own (topology.DialSSH), until t ends; it skips t without
// root, as StartT does.
func NodeT(t testing.TB, name, roles string) (*Net, *topology.SSHHost) {
	t.Helper()
	sn := StartT(t, []Node{{Name: name, Roles: roles}})
	inv, err := topology.ReadInventory(sn.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	h, err := topology.DialSSH(context.Background(), inv.Nodes[0], topology.NewRunTag())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return sn, h
}

// Start makes a Net of nodes, its files in dir, and waits until each sshd
// listens. Its error wraps topology.ErrNeedsNamespaces without root.
func Start(ctx context.Context, dir string, nodes []Node) (_ *Net, err error) {
	if _, err := os.Stat(Sshd); err != nil {
		return nil, fmt.Errorf("sshtest: %w (scripts/setup --tests installs openssh-server)", err)
	}
	tn, err := topology.NewNet(ctx, "")
	if err != nil {
		return nil, err
	}
	n := &Net{net: tn, Key: filepath.Join(dir, "id_ed25519")}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	// sshd refuses to start without its privilege separation directory,
	// which the package's service would make.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, err
	}
	pub, err := newKey(n.Key)
	if err != nil {
		return nil, err
	}
	auth := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(auth, ssh.MarshalAuthorizedKey(pub), 0o600); err != nil {
		return nil, err
	}
	home, err := n.makeHome(dir)
	if err != nil {
		return nil, err
	}
	var known, inv bytes.Buffer
	fmt.Fprintf(&inv, "# made by sshtest\ncontrol %s\nuser root\nkey %s\nknown-hosts %s\n", tn.Root().IP(), n.Key, filepath.Join(dir, "known_hosts"))
	for _, node := range nodes {
		h, err := tn.AddHost(ctx, node.Name)
		if err != nil {
			return nil, err
		}
		n.Hosts = append(n.Hosts, h)
		hostKey := filepath.Join(dir, "host-"+node.Name)
		hpub, err := newKey(hostKey)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&known, "%s %s", h.IP(), ssh.MarshalAuthorizedKey(hpub))
		fmt.Fprintf(&inv, "node %s %s %s\n", node.Name, h.IP(), node.Roles)
		conf := filepath.Join(dir, "sshd-"+node.Name+".conf")
		env, err := node.env(dir)
		if err != nil {
			return nil, err
		}
		if err := writeSshdConfig(conf, h.IP(), hostKey, auth, home, env...); err != nil {
			return nil, err
		}
		cmd := h.Command(Sshd, "-D", "-e", "-f", conf)
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("sshtest: start sshd on %s: %w", node.Name, err)
		}
		n.sshds, n.logs = append(n.sshds, cmd), append(n.logs, &log)
	}
	if err := os.WriteFile(filepath.Join(dir, "known_hosts"), known.Bytes(), 0o644); err != nil {
		return nil, err
	}
	n.Inventory = filepath.Join(dir, "inventory")
	if err := os.WriteFile(n.Inventory, inv.Bytes(), 0o644); err != nil {
		return nil, err
	}
	for i, h := range n.Hosts {
		if err := listening(ctx, h.IP()+":22"); err != nil {
			return nil, fmt.Errorf("sshtest: sshd on %s: %w: %s", h.Name(), err, n.logs[i])
		}
	}
	return n, nil
}

// makeHome makes root's home of every host in dir, with its .bashrc.
func (n *Net) makeHome(dir string) (string, error) {
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		return "", err
	}
	n.bashrc = filepath.Join(home, ".bashrc")
	return home, os.WriteFile(n.bashrc, []byte(noisyBashrc), 0o644)
}

// SlowStartup has root's .bashrc on every host, which sshd has bash read
// before each session's command, sleep d, as a node's start-up files (a
// pyenv or conda set-up) take their time.
func (n *Net) SlowStartup(d time.Duration) error {
	f, err := os.OpenFile(n.bashrc, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "sleep %.3f\n", d.Seconds())
	if err := errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("sshtest: %s: %w", n.bashrc, err)
	}
	return nil
}

// noisyBashrc is the .bashrc of the test's root on every host: sshd has
// bash read it before a session's command, and it prints on both streams,
// as a node's may (the CI machine's ran pyenv, which could not rehash and
// said so); hiatus must not take that for its commands' output.
const noisyBashrc = `echo "sshtest: a start-up file's line on standard output"
echo "sshtest: a start-up file's line on standard error" >&2
`

// env is the node's sessions' environment beside HOME (NAME=VALUE): a
// PATH without what it hides, made in dir.
func (node Node) env(dir string) ([]string, error) {
	if len(node.Hide) == 0 {
		return nil, nil
	}
	bin := filepath.Join(dir, "bin-"+node.Name)
	if err := pathWithout(bin, node.Hide); err != nil {
		return nil, err
	}
	return []string{"PATH=" + bin}, nil
}

// pathWithout makes bin a directory of links to every program of the
// machine's PATH directories but those of hide: a PATH of it alone finds
// all the others.
func pathWithout(bin string, hide []string) error {
	if err := os.Mkdir(bin, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		es, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range es {
			link := filepath.Join(bin, e.Name())
			if slices.Contains(hide, e.Name()) {
				continue
			}
			if _, err := os.Lstat(link); err == nil {
				continue // an earlier directory's comes first, as on PATH
			}
			if err := os.Symlink(filepath.Join(d, e.Name()), link); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeSshdConfig writes to file the configuration of an sshd on ip, with
// its host key and the test's authorized keys: root by key alone, in home
// (the machine's own root's start-up files are not the test's), with the
// sessions' environment env (NAME=VALUE) besides.
func writeSshdConfig(file, ip, hostKey, auth, home string, env ...string) error {
	return os.WriteFile(file, []byte(strings.Join([]string{
		"SetEnv HOME=" + home + " " + strings.Join(env, " "),
		"ListenAddress " + ip + ":22",
		"HostKey " + hostKey,
		"AuthorizedKeysFile " + auth,
		"PermitRootLogin prohibit-password",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"StrictModes no",
		"PidFile none",
		"LogLevel ERROR",
		"",
	}, "\n")), 0o644)
}

// listening waits until addr accepts a connection, for at most 30 s.
func listening(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// newKey writes a new ed25519 private key to path, readable by its owner
// alone (as sshd wants its host keys), and returns its public key.
func newKey(path string) (ssh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "hiatus test")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	return ssh.NewPublicKey(pub)
}

// NewKeyT writes a new ed25519 private key to path for the test t, as
// newKey does, and returns its public key; a failure fails t.
func NewKeyT(t testing.TB, path string) ssh.PublicKey {
	t.Helper()
	pub, err := newKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// Run runs script on the host called name through its own sshd, as root,
// and returns its output.
func (n *Net) Run(ctx context.Context, name, script string) (string, error) {
	node, err := n.node(name)
	if err != nil {
		return "", err
	}
	return topology.RunSSH(ctx, node, script)
}

// node is the host called name, as the inventory says it.
func (n *Net) node(name string) (topology.Node, error) {
	inv, err := topology.ReadInventory(n.Inventory)
	if err != nil {
		return topology.Node{}, err
	}
	for _, node := range inv.Nodes {
		if node.Name == name {
			return node, nil
		}
	}
	return topology.Node{}, fmt.Errorf("sshtest: no host %s", name)
}

// Leftovers lists, as the host called name shows them through its own
// sshd, what runs whose tags begin with tag left there: their directories,
// their firewall rules, and the processes working in those directories (a
// server may rewrite its command line, not its working directory). The
// test's hosts share one file system and PID namespace: only what is in
// the host's own run directories is its.
func (n *Net) Leftovers(ctx context.Context, name, tag string) ([]string, error) {
	node, err := n.node(name)
	if err != nil {
		return nil, err
	}
	dir := topology.RunDir(node, 0, tag) // the network's user is root
	out, err := n.Run(ctx, name, `ls -d `+dir+`* 2>/dev/null
iptables -S | grep -e 'hiatus-`+tag+`'
for p in /proc/[0-9]*; do
  case "$(readlink "$p"/cwd 2>/dev/null)" in
  `+dir+`*) echo "process ${p#/proc/}: $(tr '\0' ' ' < "$p"/cmdline 2>/dev/null)";;
  esac
done
true`)
	if err != nil {
		return nil, err
	}
	var left []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			left = append(left, l)
		}
	}
	return left, nil
}

// Close ends every sshd and removes the network.
func (n *Net) Close() error {
	for _, c := range n.sshds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	n.sshds = nil
	return n.net.Close()
}
