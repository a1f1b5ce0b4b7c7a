package harness_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
)

// TestRunHostsNetns runs the workers each in a network namespace and cuts
// one off at a time (--hosts netns --nemesis isolate): the faults are in
// the history; the cut worker completes nothing while it is cut (its
// requests wait in the kernel); the run is checked; and no namespace or
// interface of the run is left.
func TestRunHostsNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("NOT RUN: --hosts netns needs root (CI runs as root)")
	}
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		t.Fatalf("iptables-restore is missing: scripts/setup installs iptables: %v", err)
	}
	cfg := harness.DefaultConfig()
	cfg.Store, cfg.Name, cfg.Seed = t.TempDir(), "netns", 1
	cfg.Hosts, cfg.Nemesis, cfg.TimeLimit = "netns", "isolate", 4*time.Second
	cfg.Pause, cfg.Interval = 4*cfg.Lease, cfg.Lease // cut for four leases: a holder's lease runs out in it
	res, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Results.Valid == checker.Unknown {
		t.Errorf("the run was not checked: %v", res.Results)
	}
	ops := readOps(t, res.Dir)
	type window struct {
		proc       history.Process
		start, end int64
	}
	var cuts []window
	open := map[int64]window{}
	for _, o := range ops {
		v, _ := o.Value.(map[history.Keyword]any)
		if o.Process != history.Nemesis || v["kind"] != history.Keyword("isolate") {
			continue
		}
		if _, failed := v["error"]; failed {
			t.Errorf("isolate failed: %v", v)
			continue
		}
		p, _ := history.Int(v["process"])
		switch o.F {
		case history.FStart:
			open[p] = window{proc: history.Process(p), start: o.Time}
		case history.FStop:
			w := open[p]
			w.end = o.Time
			cuts = append(cuts, w)
		}
	}
	if len(cuts) == 0 {
		t.Fatal("no isolate fault in the history")
	}
	// A margin for the stamps: a cut worker's clock is extrapolated from
	// its last reading of the run's Redis (it is cut off from it too),
	// after a TIME that waited its 100 ms bound: an op that completed just
	// before the cut can be stamped well after it on a loaded machine. A
	// lease of margin leaves the middle half of the cut to check.
	margin := int64(cfg.Lease)
	for _, c := range cuts {
		for _, o := range ops {
			if o.Process == c.proc && o.Type != history.Invoke && o.Time > c.start+margin && o.Time < c.end-margin {
				t.Errorf("process %d was cut off from %d to %d ns, yet completed op %d at %d", c.proc, c.start, c.end, o.Index, o.Time)
			}
		}
	}
	test, err := os.ReadFile(filepath.Join(res.Dir, store.Test))
	if err != nil || !strings.Contains(string(test), ":hosts :netns") {
		t.Errorf("test.edn does not say :hosts :netns: %v", err)
	}
	if left := namespacesLeft("hz" + strconv.Itoa(os.Getpid())); left != "" {
		t.Error(left)
	}
}

// TestRunServersOnHosts runs with every server on a host of its own
// (--hosts netns): the lock's Redis node, PostgreSQL, etcd, the replicated
// Redis and its sentinels. The run's log names each host; a partition is a
// rule in the worker's filter, which holds its requests until the heal as
// the proxy's cut does; a failover is the primary's host cut off from the
// replica's and the sentinels', and they promote the replica. No process,
// namespace or interface is left.
func TestRunServersOnHosts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("NOT RUN: --hosts netns needs root (CI runs as root)")
	}
	before := listenersT(t)
	hosts := func(c *harness.Config) { c.Hosts = "netns" }
	cases := []struct {
		faultCase
		on []string // what the log must say runs on a host of its own
	}{
		{faultCase{name: "netns-partition-redis", edit: func(c *harness.Config) {
			hosts(c)
			drawn(c, "partition-redis")
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.cutOff(t, w) })
		}}, []string{"the lock's Redis node 0", "PostgreSQL", "worker 2"}},
		{faultCase{name: "netns-partition-postgres", edit: func(c *harness.Config) {
			hosts(c)
			aimPostgresTwice(c, "partition-postgres")
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.cutOff(t, w) })
			lost(t, r)
		}}, []string{"PostgreSQL"}},
		{faultCase{name: "netns-etcd", edit: func(c *harness.Config) {
			hosts(c)
			aimPostgres(c, "partition-postgres")
			c.Lock, c.Lease = "etcd", 2*time.Second // etcd's shortest
		}, effect: func(t *testing.T, r faultRun) {
			r.eachWhole(t, r.kind(), func(w window) { r.cutOff(t, w) })
		}}, []string{"etcd", "PostgreSQL"}},
		// One failover, for twice what the sentinels take to promote
		// (about 2.3 s), which a loaded machine slows; a second, soon
		// after, would find them still settling the first. Its end (the
		// sentinels asked who is primary, the old one let back) took
		// 2.1 s beside two CPU burners, past a 7 s run's end: the run
		// goes on 3.5 s after the fault's planned end.
		{faultCase{name: "netns-failover", edit: func(c *harness.Config) {
			hosts(c)
			c.Nemesis, c.Lease, c.TimeLimit = "failover", 4*time.Second, 9*time.Second
			c.Pause = 5 * time.Second
			c.Plan = nemesis.Plan{{Kind: nemesis.KindFailover, At: 500 * time.Millisecond, Length: c.Pause}}
		}, effect: func(t *testing.T, r faultRun) {
			// faultWindows has failed the test if it promoted no one.
			w := r.windows[0]
			if n := count(r.ops, func(o history.Op) bool {
				return o.F == history.FAcquire && o.Type == history.Ok && o.Time > w.end.Time
			}); n == 0 {
				t.Errorf("no lock granted after the failover (from %d ns)", w.end.Time)
			}
		}}, []string{"the replicated Redis's node 1", "sentinel 2"}},
	}
	t.Run("runs", func(t *testing.T) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r := runFault(t, tc.faultCase, harness.Config{}, int64(i+1))
				tc.effect(t, r)
				log, err := os.ReadFile(filepath.Join(r.res.Dir, store.Log))
				if err != nil {
					t.Fatal(err)
				}
				for _, what := range tc.on {
					if !regexp.MustCompile(`host [a-z0-9]+ at 10\.74\.[0-9.]+: ` + regexp.QuoteMeta(what) + `\n`).Match(log) {
						t.Errorf("the run's log does not put %s on a host of its own:\n%s", what, log)
					}
				}
				r.logFailed(t)
			})
		}
	})
	noLeftovers(t, before)
}

// namespacesLeft says which network namespaces and interfaces named with
// prefix are still on the machine, or "".
func namespacesLeft(prefix string) string {
	var out []string
	for _, args := range [][]string{{"netns", "list"}, {"-o", "link"}} {
		b, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			out = append(out, fmt.Sprintf("ip %v: %v: %s", args, err, b))
		} else if strings.Contains(string(b), prefix) {
			out = append(out, fmt.Sprintf("ip %v shows what the runs left:\n%s", args, b))
		}
	}
	return strings.Join(out, "\n")
}

// TestRunRefusesTopology: settings that would start a run that does not
// do what it says are refused before anything starts: isolate without
// namespaces, a fault of the run's Redis where the lock is on a host of its
// own, a failover too
// short for the sentinels, a fault of the run's Redis where the lock is
// not, sizes of faults the run does not have, a sequence with a part whose
// events are not :start and :stop.
func TestRunRefusesTopology(t *testing.T) {
	for _, tc := range []struct {
		hosts              harness.Hosts
		nemesis            harness.Nemesis
		lock               string
		pause, jump, delay time.Duration
		workers            int
	}{
		{hosts: "netns", nemesis: "none", lock: "setnx", workers: 252}, // and the lock's node and PostgreSQL: 254 hosts
		{nemesis: "partition-redis+drop-redis", lock: "redlock"},
		{hosts: "local", nemesis: "isolate", lock: "setnx"},
		{hosts: "vm", nemesis: "none", lock: "setnx"},
		{hosts: "netns", nemesis: "pause-redis,restart", lock: "setnx"}, // restart puts the lock on a host of its own
		{nemesis: "failover", lock: "setnx", pause: 2 * time.Second},
		{nemesis: "kill-redis", lock: "redlock"},
		{nemesis: "pause-redis,clock", lock: "setnx"},
		{nemesis: "sigstop", lock: "setnx", jump: time.Second},
		{nemesis: "sigstop", lock: "setnx", jump: -time.Second},
		{nemesis: "partition-postgres", lock: "setnx", delay: time.Second},
		{nemesis: "sigstop+clock", lock: "redlock"},
		{nemesis: "partition-redis+clokc", lock: "redlock"},
		{nemesis: "clock", lock: "pg-advisory"},
	} {
		cfg := harness.DefaultConfig()
		cfg.Store, cfg.Hosts, cfg.Nemesis, cfg.Lock = t.TempDir(), tc.hosts, tc.nemesis, tc.lock
		cfg.ClockJump, cfg.Delay = tc.jump, tc.delay
		if tc.workers > 0 {
			cfg.Workers = tc.workers
		}
		if tc.pause > 0 {
			cfg.Pause, cfg.TimeLimit = tc.pause, 2*tc.pause
		}
		if err := cfg.Validate(); err == nil {
			t.Errorf("--hosts %s --nemesis %s --lock %s --pause %v --clock-jump %v --delay %v: no error",
				tc.hosts, tc.nemesis, tc.lock, cfg.Pause, tc.jump, tc.delay)
		}
	}
}
