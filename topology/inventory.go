package topology

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// An Inventory is the machines of --hosts ssh:FILE: where this machine is
// reached from them, and each node with the parts of a run it holds. Its
// file is read by ReadInventory; docs/hosts.md describes it.
type Inventory struct {
	// Control is the address the nodes reach this machine at: the run's
	// own Redis (the history's clock, the fences) is offered to the
	// workers there.
	Control string
	Nodes   []Node
}

// A Node is one machine of an Inventory.
type Node struct {
	Name       string // as the run's log and history name it
	Addr       string // its sshd, host:port
	User       string // who hiatus logs in as; root, for iptables and signals to servers
	Key        string // the private key file hiatus logs in with
	KnownHosts string // the known_hosts file that holds the node's host key
	// Dir is where runs keep their files on the node (a directory of
	// their own each, removed when the run ends).
	Dir   string
	Roles []Role
}

// A Role is a part of a run that a node may hold.
type Role string

// The roles of a node.
const (
	RoleWorker   Role = "worker"   // workers, from a copy of hiatus's binary
	RoleRedis    Role = "redis"    // the lock's Redis nodes, from the node's redis-server
	RolePostgres Role = "postgres" // the run's PostgreSQL, from the node's initdb and postgres
)

// Has reports whether the node holds role r.
func (n Node) Has(r Role) bool { return slices.Contains(n.Roles, r) }

// IP is the host part of n's address.
func (n Node) IP() string {
	host, _, err := net.SplitHostPort(n.Addr)
	if err != nil {
		return n.Addr
	}
	return host
}

// With returns the nodes of inv that hold role r, in the file's order.
func (inv Inventory) With(r Role) []Node {
	var out []Node
	for _, n := range inv.Nodes {
		if n.Has(r) {
			out = append(out, n)
		}
	}
	return out
}

// ReadInventory reads the inventory file at path: a line a setting, "#"
// beginning a comment.
//
//	control 10.0.0.1            # the address the nodes reach this machine at
//	user root                   # defaults for every node
//	key /root/.ssh/id_ed25519
//	known-hosts /root/.ssh/known_hosts
//	dir /tmp
//	node w0 10.0.0.2 worker     # name, IP[:port], roles (comma-separated)
//	node db 10.0.0.9:2222 redis,postgres user=admin key=/keys/db
//
// Relative file names are relative to the inventory's directory. Its
// errors name the file and the line.
func ReadInventory(path string) (Inventory, error) {
	f, err := os.Open(path)
	if err != nil {
		return Inventory{}, fmt.Errorf("inventory: %w", err)
	}
	defer f.Close()
	inv := Inventory{}
	defaults := Node{User: "root", Dir: "/tmp"}
	type pending struct {
		n    Node
		set  map[string]bool
		line int
	}
	var nodes []pending
	sc := bufio.NewScanner(f)
	base := filepath.Dir(path)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("inventory %s:%d: %s", path, line, fmt.Sprintf(format, a...))
		}
		switch f[0] {
		case "control", "user", "key", "known-hosts", "dir":
			if len(f) != 2 {
				return Inventory{}, bad("%s takes one value, not %d", f[0], len(f)-1)
			}
			switch f[0] {
			case "control":
				if net.ParseIP(f[1]) == nil {
					return Inventory{}, bad("control %q: want an IP address", f[1])
				}
				inv.Control = f[1]
			default:
				if err := setField(&defaults, f[0], keyPath(base, f[0], f[1])); err != nil {
					return Inventory{}, bad("%v", err)
				}
			}
		case "node":
			n, set, err := parseNode(f, base)
			if err != nil {
				return Inventory{}, bad("%v", err)
			}
			if slices.ContainsFunc(nodes, func(p pending) bool { return p.n.Name == n.Name }) {
				return Inventory{}, bad("node %s named twice", n.Name)
			}
			nodes = append(nodes, pending{n, set, line})
		default:
			return Inventory{}, bad("unknown setting %q: want control, user, key, known-hosts, dir or node", f[0])
		}
	}
	if err := sc.Err(); err != nil {
		return Inventory{}, fmt.Errorf("inventory %s: %w", path, err)
	}
	for _, p := range nodes {
		n := p.n
		for _, k := range []string{"user", "key", "known-hosts", "dir"} {
			if !p.set[k] {
				v, _ := field(&defaults, k)
				_ = setField(&n, k, *v)
			}
		}
		if n.Key == "" || n.KnownHosts == "" {
			return Inventory{}, fmt.Errorf("inventory %s:%d: node %s: no key or no known-hosts file: set them for it or for every node", path, p.line, n.Name)
		}
		inv.Nodes = append(inv.Nodes, n)
	}
	switch {
	case len(inv.Nodes) == 0:
		return Inventory{}, fmt.Errorf("inventory %s: no node", path)
	case inv.Control == "":
		return Inventory{}, fmt.Errorf("inventory %s: no control address (the address the nodes reach this machine at)", path)
	}
	return inv, nil
}

// parseNode reads the fields f of a node line, key files found from base,
// and says which settings it set of its own.
func parseNode(f []string, base string) (Node, map[string]bool, error) {
	if len(f) < 4 {
		return Node{}, nil, errors.New("want node NAME IP[:PORT] ROLES [user=U] [key=FILE] [known-hosts=FILE] [dir=DIR]")
	}
	n := Node{Name: f[1], Addr: f[2]}
	if !hostName.MatchString(n.Name) {
		return n, nil, fmt.Errorf("node name %q: want up to 15 lower-case letters, digits or '-'", n.Name)
	}
	if _, _, err := net.SplitHostPort(n.Addr); err != nil {
		n.Addr = net.JoinHostPort(n.Addr, "22")
	}
	// An IP, not a name: the servers bind to it, and the partitions' rules
	// on the other nodes match it.
	host, port, err := net.SplitHostPort(n.Addr)
	if p, perr := strconv.Atoi(port); err != nil || net.ParseIP(host) == nil || perr != nil || p < 1 || p > 65535 {
		return n, nil, fmt.Errorf("node %s: address %q: want an IP address, with :PORT or not", n.Name, f[2])
	}
	for _, r := range strings.Split(f[3], ",") {
		switch Role(r) {
		case RoleWorker, RoleRedis, RolePostgres:
			n.Roles = append(n.Roles, Role(r))
		default:
			return n, nil, fmt.Errorf("node %s: role %q: want worker, redis or postgres", n.Name, r)
		}
	}
	set := map[string]bool{}
	for _, kv := range f[4:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			return n, nil, fmt.Errorf("node %s: %q: want KEY=VALUE", n.Name, kv)
		}
		if err := setField(&n, k, keyPath(base, k, v)); err != nil {
			return n, nil, fmt.Errorf("node %s: %v", n.Name, err)
		}
		set[k] = true
	}
	return n, set, nil
}

// keyPath is the value p of setting k, a key file's path found from the
// inventory's directory base; the run's directory is the node's own.
func keyPath(base, k, p string) string {
	if (k != "key" && k != "known-hosts") || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(base, p)
}

// field returns the setting k of n.
func field(n *Node, k string) (*string, bool) {
	switch k {
	case "user":
		return &n.User, true
	case "key":
		return &n.Key, true
	case "known-hosts":
		return &n.KnownHosts, true
	case "dir":
		return &n.Dir, true
	}
	return nil, false
}

func setField(n *Node, k, v string) error {
	p, ok := field(n, k)
	if !ok {
		return fmt.Errorf("unknown setting %q: want user, key, known-hosts or dir", k)
	}
	if k == "dir" && !filepath.IsAbs(v) {
		return fmt.Errorf("dir %q: want an absolute path on the node", v)
	}
	*p = v
	return nil
}
