package topology_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/topology"
)

// TestReadInventory: an inventory's defaults apply to every node unless
// the node sets its own, relative key files are the inventory's
// directory's, and each mistake is refused with its file and line.
func TestReadInventory(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "inv")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inv, err := topology.ReadInventory(write(`# lab
control 10.0.0.1
key keys/id
known-hosts /etc/kh
node w0 10.0.0.11 worker
node db 10.0.0.31:2222 redis,postgres user=admin key=/k/db dir=/srv  # two roles
`))
	if err != nil {
		t.Fatal(err)
	}
	want := topology.Inventory{Control: "10.0.0.1", Nodes: []topology.Node{
		{Name: "w0", Addr: "10.0.0.11:22", User: "root", Key: filepath.Join(dir, "keys/id"), KnownHosts: "/etc/kh", Dir: "/tmp",
			Roles: []topology.Role{topology.RoleWorker}},
		{Name: "db", Addr: "10.0.0.31:2222", User: "admin", Key: "/k/db", KnownHosts: "/etc/kh", Dir: "/srv",
			Roles: []topology.Role{topology.RoleRedis, topology.RolePostgres}},
	}}
	if !reflect.DeepEqual(inv, want) {
		t.Errorf("got %+v\nwant %+v", inv, want)
	}
	if got := inv.With(topology.RolePostgres); len(got) != 1 || got[0].Name != "db" || got[0].IP() != "10.0.0.31" {
		t.Errorf("With(postgres) = %+v", got)
	}

	head := "control 10.0.0.1\nkey /k\nknown-hosts /kh\n"
	for _, tc := range []struct{ text, err string }{
		{head + "node w0 10.0.0.2 workers\n", `inv:4: node w0: role "workers"`},
		{head + "node W0 10.0.0.2 worker\n", `inv:4: node name "W0"`},
		{head + "node w0 10.0.0.2\n", `inv:4: want node NAME`},
		{head + "node w0 10.0.0.2 worker\nnode w0 10.0.0.3 worker\n", `inv:5: node w0 named twice`},
		{head + "node w0 10.0.0.2 worker port=2\n", `inv:4: node w0: unknown setting "port"`},
		{head + "node w0 10.0.0.2 worker dir=tmp\n", `inv:4: node w0: dir "tmp": want an absolute path`},
		{head + "nodes w0\n", `inv:4: unknown setting "nodes"`},
		{head + "node w0 lab-w0.example worker\n", `inv:4: node w0: address "lab-w0.example": want an IP address`},
		{head + "node w0 lab-w0.example:2222 worker\n", `inv:4: node w0: address "lab-w0.example:2222": want an IP address`},
		{head + "node w0 10.0.0.2:ssh worker\n", `inv:4: node w0: address "10.0.0.2:ssh": want an IP address`},
		{head + "node w0 10.0.0.2:70000 worker\n", `inv:4: node w0: address "10.0.0.2:70000"`},
		{head + "node w0 10.0.0.300 worker\n", `inv:4: node w0: address "10.0.0.300"`},
		{"control somewhere\n", `inv:1: control "somewhere": want an IP address`},
		{head + "node w0 0.0.0.0 worker\n", `inv:4: node w0: address 0.0.0.0: the unspecified address`},
		{head + "node w0 0.0.0.0:2222 worker\n", `inv:4: node w0: address 0.0.0.0:2222: the unspecified address`},
		{head + "node w0 :: worker\n", `inv:4: node w0: address ::: the unspecified address`},
		{head + "node w0 [::ffff:0.0.0.0]:22 worker\n", `inv:4: node w0: address [::ffff:0.0.0.0]:22: the unspecified address`},
		{head + "node w0 255.255.255.255 worker\n", `inv:4: node w0: address 255.255.255.255: the broadcast address`},
		{head + "node w0 224.0.0.1 worker\n", `inv:4: node w0: address 224.0.0.1: a multicast address`},
		{head + "node w0 239.255.255.250:1900 worker\n", `inv:4: node w0: address 239.255.255.250:1900: a multicast address`},
		{head + "node w0 ff02::1 worker\n", `inv:4: node w0: address ff02::1: a multicast address`},
		{head + "node w0 ::ffff:224.0.0.251 worker\n", `inv:4: node w0: address ::ffff:224.0.0.251: a multicast address`},
		{"control 0.0.0.0\n", `inv:1: control 0.0.0.0: the unspecified address`},
		{"control ::\n", `inv:1: control ::: the unspecified address`},
		{"control 255.255.255.255\n", `inv:1: control 255.255.255.255: the broadcast address`},
		{"control 224.0.0.251\n", `inv:1: control 224.0.0.251: a multicast address`},
		{"control ff05::2\n", `inv:1: control ff05::2: a multicast address`},
		{head + "# " + strings.Repeat("x", 200<<10) + "\nnode w0 10.0.0.2 worker\n", `inv:4: a line of 204802 bytes, longer than`},
		{head + "node w0 10.0.0.2 worker dir=/tmp/\x00x\n", `inv:4: a control character (U+0000) in column 34`},
		{"key /k\nknown-hosts /kh\nnode w0 10.0.0.2 worker\n", "no control address"},
		{"control 10.0.0.1\nnode w0 10.0.0.2 worker\n", "inv:2: node w0: no key or no known-hosts file"},
		{head, "no node"},
	} {
		_, err := topology.ReadInventory(write(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%.80q: error %v, want one with %q", tc.text, err, tc.err)
		}
	}
	if _, err := topology.ReadInventory(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing inventory: %v", err)
	}
}

// TestReadInventoryFiles: only a regular file is read as an inventory, at
// once, and only to InventoryLimit: a named pipe with no writer, which
// would have hung the run past any signal, a device, which would have
// filled its memory, and a file too large are refused, each named.
func TestReadInventoryFiles(t *testing.T) {
	dir := t.TempDir()
	fifo, large := filepath.Join(dir, "fifo"), filepath.Join(dir, "large")
	if err := errors.Join(syscall.Mkfifo(fifo, 0o644),
		os.WriteFile(large, bytes.Repeat([]byte("# a comment\n"), topology.InventoryLimit/12+1), 0o644)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		err  error
	}{{fifo, files.ErrNotRegular}, {"/dev/zero", files.ErrNotRegular}, {dir, files.ErrNotRegular}, {large, files.ErrTooLarge}} {
		_, err := topology.ReadInventory(tc.path)
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "inventory: ") || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: %v, want %v naming it", tc.path, err, tc.err)
		}
	}
}

// TestReadInventoryIPv6: a node's IPv6 address, bare or bracketed with a
// port, is its IP, on port 22 unless one is given.
func TestReadInventoryIPv6(t *testing.T) {
	p := filepath.Join(t.TempDir(), "inv")
	if err := os.WriteFile(p, []byte("control fd00::1\nkey /k\nknown-hosts /kh\nnode a fd00::2 worker\nnode b [fd00::3]:2222 redis\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := topology.ReadInventory(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ addr, ip string }{{"[fd00::2]:22", "fd00::2"}, {"[fd00::3]:2222", "fd00::3"}} {
		if n := inv.Nodes[i]; n.Addr != want.addr || n.IP() != want.ip {
			t.Errorf("node %s: address %q, IP %q; want %q, %q", n.Name, n.Addr, n.IP(), want.addr, want.ip)
		}
	}
}
