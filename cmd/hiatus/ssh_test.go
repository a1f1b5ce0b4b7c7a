package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/sshtest"
)

// TestKill9SSH: SIGKILL of `hiatus run --hosts ssh:FILE` while a worker's
// node is cut from the lock's, then one more run on the same nodes. No
// process, rule or file of the killed run is left on any node, as each
// node's own sshd shows it: the rule was there before the kill.
func TestKill9SSH(t *testing.T) {
	ctx := context.Background()
	sn := sshtest.StartT(t, sshtest.Lab)
	hosts := "ssh:" + sn.Inventory
	cmd, root := startRun(t, "--hosts", hosts, "--workers", "2", "--nemesis", "partition-redis",
		"--pause", "5s", "--interval", "200ms", "--time-limit", "30s")
	// Over SSH a run starts slower than the 20 s waitJournal allows a
	// loaded machine: it copies this binary to the workers' nodes.
	exited := make(chan error, 1)
	go func() { _, err := cmd.Process.Wait(); exited <- err }()
	waitJournalOps(t, root, func(ops []history.Op) bool {
		return slices.ContainsFunc(ops, func(o history.Op) bool { return o.Process == history.Nemesis && o.F == history.FStart })
	}, exited)
	tag := fmt.Sprintf("hs%d-", cmd.Process.Pid)
	rules := 0
	for _, n := range sshtest.Lab {
		out, err := sn.Run(ctx, n.Name, "iptables -S | grep -c -e 'hiatus-"+tag+"'; true")
		if err != nil {
			t.Fatal(err)
		}
		var k int
		fmt.Sscan(out, &k)
		rules += k
	}
	if rules == 0 {
		t.Fatal("no rule of the run's partition on any node: the test would prove nothing")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited

	if code, out, errOut := hiatus(t, "run", "--store", t.TempDir(), "--hosts", hosts, "--workers", "2",
		"--time-limit", "1s", "--nemesis", "none", "--lease", "10s"); code != exitValid { // no stall outlasts the lease
		t.Fatalf("the next run: exit %d\n%s%s", code, out, errOut)
	}
	for _, n := range sshtest.Lab {
		l, err := sn.Leftovers(ctx, n.Name, tag)
		if err != nil {
			t.Fatal(err)
		}
		if len(l) > 0 {
			t.Errorf("node %s holds what the killed run left: %v", n.Name, l)
		}
	}
}

// TestRunHostsSSHFiles: `hiatus run --hosts ssh:FILE` whose inventory, key
// or known_hosts is a named pipe with no writer (which hung the run past
// SIGTERM and SIGINT) or a device (/dev/zero: the run ran out of memory,
// exit 2), or whose node is at an address that is no node's, exits 254 at
// once, naming the file. No node is reached: the files come first.
func TestRunHostsSSHFiles(t *testing.T) {
	dir := t.TempDir()
	fifo, key, kh := filepath.Join(dir, "fifo"), filepath.Join(dir, "id"), filepath.Join(dir, "known_hosts")
	sshtest.NewKeyT(t, key)
	if err := errors.Join(syscall.Mkfifo(fifo, 0o600), os.WriteFile(kh, nil, 0o644)); err != nil {
		t.Fatal(err)
	}
	inventory := func(name, key, knownHosts, addr string) string {
		p := filepath.Join(dir, name)
		text := fmt.Sprintf("control 10.0.0.1\nkey %s\nknown-hosts %s\nnode w0 %s worker,redis,postgres\n", key, knownHosts, addr)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ name, inventory, says string }{
		{"inventory a pipe", fifo, "inventory: open " + fifo + ": it is a named pipe"},
		{"inventory a device", "/dev/zero", "inventory: open /dev/zero: it is a device"},
		{"key a pipe", inventory("key-fifo", fifo, kh, "127.0.0.1"), "node w0 (127.0.0.1:22): key: open " + fifo + ": it is a named pipe"},
		{"key a device", inventory("key-zero", "/dev/zero", kh, "127.0.0.1"), "node w0 (127.0.0.1:22): key: open /dev/zero: it is a device"},
		{"known-hosts a pipe", inventory("kh-fifo", key, fifo, "127.0.0.1"), "node w0 (127.0.0.1:22): known-hosts: open " + fifo + ": it is a named pipe"},
		{"node at 0.0.0.0", inventory("any", key, kh, "0.0.0.0"), "inventory " + filepath.Join(dir, "any") + ":4: node w0: address 0.0.0.0: the unspecified address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := hiatus(t, "run", "--store", t.TempDir(), "--hosts", "ssh:"+tc.inventory, "--time-limit", "1s")
			if code != exitUsage || !strings.Contains(stderr, tc.says) {
				t.Errorf("exit %d, want %d saying %q\n%s%s", code, exitUsage, tc.says, stdout, stderr)
			}
		})
	}
}
