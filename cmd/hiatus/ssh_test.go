package main

import (
	"context"
	"fmt"
	"slices"
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
