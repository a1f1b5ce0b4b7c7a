package harness

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRedact: no password of a server's address reaches a log or a message,
// whichever way the address gives it.
func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://:secret@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"postgres://postgres:secret@127.0.0.1/postgres?sslmode=disable", "postgres://postgres:xxxxx@127.0.0.1/postgres?sslmode=disable"},
		{"postgres://postgres@127.0.0.1/postgres?password=secret", "postgres://postgres@127.0.0.1/postgres?password=xxxxx"},
		{"host=127.0.0.1 port=5432 user=postgres password=secret dbname=postgres", "host=127.0.0.1 port=5432 user=postgres password=xxxxx dbname=postgres"},
		{"host=127.0.0.1 password='se cret' user=postgres", "host=127.0.0.1 password=xxxxx user=postgres"},
	} {
		if got := Redact(tc.in); got != tc.want || strings.Contains(got, "secret") || strings.Contains(got, "cret") {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestReplayConfigKeepsTopology: test.edn gives a replay the settings of
// the new faults and locks back: redlock's nodes, the hosts, the clock
// jump and the delay — and not the sizes of faults the run did not have,
// which Validate would refuse.
func TestReplayConfigKeepsTopology(t *testing.T) {
	for _, c := range []Config{
		{Lock: "redlock", Nodes: 3, Nemesis: "partition-redis+clock", ClockJump: 2 * time.Second, Hosts: "netns"},
		{Lock: "setnx", Nemesis: "clock", ClockJump: -time.Second, ClockStrobe: 100 * time.Millisecond},
		{Lock: "setnx", Nemesis: "delay-postgres", Delay: 300 * time.Millisecond},
		{Lock: "setnx", Nemesis: "sigstop"},
	} {
		cfg := DefaultConfig()
		cfg.Lock, cfg.Nodes, cfg.Nemesis, cfg.ClockJump, cfg.Delay, cfg.Hosts = c.Lock, c.Nodes, c.Nemesis, c.ClockJump, c.Delay, c.Hosts
		cfg.ClockStrobe = c.ClockStrobe
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "test.edn"), testEDN(cfg.runPlan(), time.Now()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "schedule.edn"), []byte("{:faults []}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReplayConfig(dir)
		if err != nil {
			t.Fatalf("%s: %v", c.Nemesis, err)
		}
		if got.nodes() != cfg.nodes() || got.Hosts != cmp.Or(c.Hosts, "local") || got.ClockJump != c.ClockJump || got.Delay != c.Delay || got.ClockStrobe != c.ClockStrobe {
			t.Errorf("%s: replayed nodes %d, hosts %q, jump %v, delay %v; want %d, %q, %v, %v", c.Nemesis,
				got.nodes(), got.Hosts, got.ClockJump, got.Delay, cfg.nodes(), cmp.Or(c.Hosts, "local"), c.ClockJump, c.Delay)
		}
		if err := got.validate(); err != nil {
			t.Errorf("%s: the replay's config is refused: %v", c.Nemesis, err)
		}
	}
}

// TestPlanKeepsFaults: a plan's faults are those its Config validated
// with. A random nemesis re-read after the run filled in its throwaway
// servers' URLs lost the faults that want a throwaway server, or a given
// one's PID (kill-postgres, pause-postgres): every random run with the
// servers hiatus starts left them out, though it said it allowed them.
func TestPlanKeepsFaults(t *testing.T) {
	c := DefaultConfig()
	c.Nemesis = Random
	p := c.runPlan()
	p.RedisURL, p.PostgresURL = "redis://127.0.0.1:1", "postgres://127.0.0.1:1/postgres" // as startEnv fills them in
	for _, k := range []string{"kill-postgres", "pause-postgres"} {
		if !slices.Contains(p.FaultNames(), k) || !slices.Contains(p.parts, k) {
			t.Errorf("the plan's faults lost %s: %v", k, p.FaultNames())
		}
		if d := p.Describe(); !strings.Contains(d, k) {
			t.Errorf("the run's description lost %s: %s", k, d)
		}
		if edn := string(testEDN(p, time.Now())); !strings.Contains(edn, k) {
			t.Errorf("test.edn lost %s: %s", k, edn)
		}
		if slices.Contains(p.Config.FaultNames(), k) {
			t.Errorf("re-read from the Config with its URLs given, random still allows %s: this test no longer shows what it guards", k)
		}
	}
}
