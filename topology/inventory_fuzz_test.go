package topology_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/hiatus-dev/hiatus/topology"
)

// FuzzInventory feeds arbitrary bytes to ReadInventory: it never panics
// or hangs, and what it accepts is an inventory a run can use: a control
// address and node addresses that are IPs of a machine (not unspecified,
// broadcast or multicast, by net.IP's own tests, apart from the reader's),
// ports in range, names and roles as the grammar says, settings that hold
// no control character nor '#', and which reads back the same when
// written out again.
//
//	go test ./topology -run '^$' -fuzz FuzzInventory -fuzztime 10m -parallel 1
func FuzzInventory(f *testing.F) {
	for _, seed := range []string{
		"# lab\ncontrol 10.0.0.1\nuser root\nkey keys/id\nknown-hosts /etc/kh\ndir /tmp\n" +
			"node w0 10.0.0.11 worker\nnode db 10.0.0.31:2222 redis,postgres user=admin key=/k/db dir=/srv  # two roles\n",
		"control fd00::1\nkey /k\nknown-hosts /kh\nnode a fd00::2 worker\nnode b [fd00::3]:2222 redis\n",
		"control 10.0.0.1\r\nkey\t/k\r\nknown-hosts /kh\r\nnode w0 10.0.0.2 worker,redis,postgres known-hosts=kh2 dir=/\r\n",
		"control 10.0.0.1\nnode w0 10.0.0.2 worker key=/k known-hosts=/kh\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\nnode w0 0.0.0.0 worker\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\nnode w0 [::]:22 worker\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\nnode w0 [::ffff:0.0.0.0]:2222 worker\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\nnode w0 255.255.255.255 worker\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\nnode w0 224.0.0.1:22 redis\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\nnode w0 ff02::1 worker\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\nnode w0 ::ffff:239.1.2.3 worker\n",
		"control 0.0.0.0\nkey /k\nknown-hosts /kh\nnode w0 10.0.0.2 worker\n",
		"control ff05::2\nkey /k\nknown-hosts /kh\nnode w0 10.0.0.2 worker\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\nnode w0 10.0.0.2 workers\nnode w0 10.0.0.3 worker\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\nnode W0 10.0.0.2:70000 worker port=2 dir=tmp\n",
		"control 10.0.0.1\nkey /k#comment\nknown-hosts /kh\nnode w0 10.0.0.2 worker user=\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\nnode w0 10.0.0.2 worker dir=/tmp/\x00x\n",
		"control 10.0.0.1\nkey /k\nknown-hosts /kh\n# " + strings.Repeat("x", topology.LineLimit) + "\nnode w0 10.0.0.2 worker\n",
		"nodes w0\ncontrol\ncontrol 1 2\n",
		"# nothing but a comment\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "inventory")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		inv, err := topology.ReadInventory(path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "inventory ") {
				t.Fatalf("error %q does not name the inventory", err)
			}
			return
		}
		checkInventory(t, inv)
		// Written out again, it reads back the same.
		if err := os.WriteFile(path, []byte(writeInventory(inv)), 0o644); err != nil {
			t.Fatal(err)
		}
		again, err := topology.ReadInventory(path)
		if err != nil || !reflect.DeepEqual(again, inv) {
			t.Fatalf("read %+v\nwritten out and read again: %+v, %v", inv, again, err)
		}
	})
}

var (
	fuzzName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,14}$`)
	fuzzRole = map[topology.Role]bool{topology.RoleWorker: true, topology.RoleRedis: true, topology.RolePostgres: true}
)

// checkInventory fails t unless inv is one a run can use.
func checkInventory(t *testing.T, inv topology.Inventory) {
	t.Helper()
	if why := machineIP(inv.Control); why != "" {
		t.Fatalf("control %q accepted: %s", inv.Control, why)
	}
	if len(inv.Nodes) == 0 {
		t.Fatal("accepted with no node")
	}
	var names []string
	for _, n := range inv.Nodes {
		host, port, err := net.SplitHostPort(n.Addr)
		if err != nil {
			t.Fatalf("node %s: address %q accepted: %v", n.Name, n.Addr, err)
		}
		if why := machineIP(host); why != "" || n.IP() != host {
			t.Fatalf("node %s: address %q accepted: %s (IP %q)", n.Name, n.Addr, why, n.IP())
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			t.Fatalf("node %s: port %q accepted", n.Name, port)
		}
		if !fuzzName.MatchString(n.Name) || slices.Contains(names, n.Name) {
			t.Fatalf("node name %q accepted (names before: %v)", n.Name, names)
		}
		names = append(names, n.Name)
		if len(n.Roles) == 0 {
			t.Fatalf("node %s accepted with no role", n.Name)
		}
		for _, r := range n.Roles {
			if !fuzzRole[r] {
				t.Fatalf("node %s: role %q accepted", n.Name, r)
			}
		}
		for k, v := range map[string]string{"user": n.User, "key": n.Key, "known-hosts": n.KnownHosts, "dir": n.Dir} {
			if v == "" || strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) || r == '#' }) {
				t.Fatalf("node %s: %s %q accepted", n.Name, k, v)
			}
		}
		if !filepath.IsAbs(n.Dir) {
			t.Fatalf("node %s: dir %q accepted", n.Name, n.Dir)
		}
	}
}

// machineIP says why s is not the IP of a machine, by net.IP's tests, or
// "" if it is.
func machineIP(s string) string {
	ip := net.ParseIP(s)
	switch {
	case ip == nil:
		return "not an IP"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.Equal(net.IPv4bcast):
		return "broadcast"
	case ip.IsMulticast():
		return "multicast"
	}
	return ""
}

// writeInventory writes inv as an inventory file, each node's settings on
// its own line.
func writeInventory(inv topology.Inventory) string {
	var b strings.Builder
	fmt.Fprintf(&b, "control %s\n", inv.Control)
	for _, n := range inv.Nodes {
		roles := make([]string, len(n.Roles))
		for i, r := range n.Roles {
			roles[i] = string(r)
		}
		fmt.Fprintf(&b, "node %s %s %s user=%s key=%s known-hosts=%s dir=%s\n",
			n.Name, n.Addr, strings.Join(roles, ","), n.User, n.Key, n.KnownHosts, n.Dir)
	}
	return b.String()
}
