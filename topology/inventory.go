package topology

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hiatus-dev/hiatus/internal/files"
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
	RoleWorker    Role = "worker"    // workers, from a copy of hiatus's binary
	RoleRedis     Role = "redis"     // the lock's Redis nodes, from the node's redis-server
	RolePostgres  Role = "postgres"  // the run's PostgreSQL, from the node's initdb and postgres
	RoleEtcd      Role = "etcd"      // the etcd lock's server, from the node's etcd
	RoleZooKeeper Role = "zookeeper" // the ZooKeeper lock's servers, from the node's java and zookeeper
	RoleSentinel  Role = "sentinel"  // the sentinels of a replicated Redis, from the node's redis-server
)

// Roles are the roles a node may hold.
func Roles() []Role {
	return []Role{RoleWorker, RoleRedis, RolePostgres, RoleEtcd, RoleZooKeeper, RoleSentinel}
}

// roleNames are the roles' names, for an error.
func roleNames() string {
	var names []string
	for _, r := range Roles() {
		names = append(names, string(r))
	}
	return strings.Join(names, ", ")
}

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
// errors name the file and the line. Only a regular file is read, of no
// more than InventoryLimit bytes, in lines of no more than LineLimit.
func ReadInventory(path string) (Inventory, error) {
	b, err := files.ReadFile(path, InventoryLimit)
	if err != nil {
		return Inventory{}, fmt.Errorf("inventory: %w", err)
	}
	r := &inventoryReader{path: path, base: filepath.Dir(path), defaults: Node{User: "root", Dir: "/tmp"}}
	for i, text := range strings.Split(string(b), "\n") {
		if err := r.line(i+1, text); err != nil {
			return Inventory{}, err
		}
	}
	return r.finish()
}

// The bounds of an inventory: far above one of thousands of nodes.
const (
	InventoryLimit = 1 << 20  // bytes in the file
	LineLimit      = 16 << 10 // bytes in a line: a node's line with its settings' paths
)

// An inventoryReader is an inventory being read, line by line.
type inventoryReader struct {
	path, base string // the file, and its directory
	inv        Inventory
	defaults   Node
	nodes      []pendingNode
}

// A pendingNode is a node read, which takes the defaults of the whole
// file for what it does not set itself.
type pendingNode struct {
	n    Node
	set  map[string]bool
	line int
}

// line reads the line numbered line, text.
func (r *inventoryReader) line(line int, text string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("inventory %s:%d: %s", r.path, line, fmt.Sprintf(format, a...))
	}
	if len(text) > LineLimit {
		return bad("a line of %d bytes, longer than %d", len(text), LineLimit)
	}
	if i := strings.IndexFunc(text, isControl); i >= 0 {
		c, _ := utf8.DecodeRuneInString(text[i:])
		return bad("a control character (%U) in column %d", c, i+1)
	}
	text, _, _ = strings.Cut(text, "#")
	f := strings.Fields(text)
	if len(f) == 0 {
		return nil
	}
	switch f[0] {
	case "control", "user", "key", "known-hosts", "dir":
		if len(f) != 2 {
			return bad("%s takes one value, not %d", f[0], len(f)-1)
		}
		if f[0] != "control" {
			if err := setField(&r.defaults, f[0], keyPath(r.base, f[0], f[1])); err != nil {
				return bad("%v", err)
			}
			return nil
		}
		ip := net.ParseIP(f[1])
		if ip == nil {
			return bad("control %q: want an IP address", f[1])
		}
		if why := unusable(ip); why != "" {
			return bad("control %s: %s", f[1], why)
		}
		r.inv.Control = f[1]
	case "node":
		n, set, err := parseNode(f, r.base)
		if err != nil {
			return bad("%v", err)
		}
		if slices.ContainsFunc(r.nodes, func(p pendingNode) bool { return p.n.Name == n.Name }) {
			return bad("node %s named twice", n.Name)
		}
		r.nodes = append(r.nodes, pendingNode{n, set, line})
	default:
		return bad("unknown setting %q: want control, user, key, known-hosts, dir or node", f[0])
	}
	return nil
}

// isControl says whether c is a control character, which no setting
// holds: tabs and a line's closing carriage return are space.
func isControl(c rune) bool {
	return c != '\t' && c != '\r' && unicode.IsControl(c)
}

// finish gives each node the defaults it did not set, and checks what
// the whole file must have.
func (r *inventoryReader) finish() (Inventory, error) {
	for _, p := range r.nodes {
		n := p.n
		for _, k := range []string{"user", "key", "known-hosts", "dir"} {
			if !p.set[k] {
				v, _ := field(&r.defaults, k)
				_ = setField(&n, k, *v)
			}
		}
		if n.Key == "" || n.KnownHosts == "" {
			return Inventory{}, fmt.Errorf("inventory %s:%d: node %s: no key or no known-hosts file: set them for it or for every node", r.path, p.line, n.Name)
		}
		r.inv.Nodes = append(r.inv.Nodes, n)
	}
	switch {
	case len(r.inv.Nodes) == 0:
		return Inventory{}, fmt.Errorf("inventory %s: no node", r.path)
	case r.inv.Control == "":
		return Inventory{}, fmt.Errorf("inventory %s: no control address (the address the nodes reach this machine at)", r.path)
	}
	return r.inv, nil
}

// unusable says why ip can be neither a node's address nor the control
// machine's, or "" if it can be: an unspecified address is any of the
// machine that dials it (0.0.0.0:22 is this machine's sshd), a broadcast
// or multicast address none. The inventory knows no prefix, so a
// subnet's broadcast address is not told from a host's.
func unusable(ip net.IP) string {
	a, _ := netip.AddrFromSlice(ip)
	a = a.Unmap()
	switch {
	case a.IsUnspecified():
		return "the unspecified address, which stands for any address of the machine that uses it, not a node's (0.0.0.0:22 is this machine's sshd)"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address, not a node's"
	case a.IsMulticast():
		return "a multicast address, not a node's"
	}
	return ""
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
	if why := unusable(net.ParseIP(host)); why != "" {
		return n, nil, fmt.Errorf("node %s: address %s: %s", n.Name, f[2], why)
	}
	for _, r := range strings.Split(f[3], ",") {
		if !slices.Contains(Roles(), Role(r)) {
			return n, nil, fmt.Errorf("node %s: role %q: want one of %s", n.Name, r, roleNames())
		}
		n.Roles = append(n.Roles, Role(r))
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
