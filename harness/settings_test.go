package harness_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/configgen"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
	"pgregory.net/rapid"
)

// TestConfigThroughRunDirectory: any valid Config, written to a run
// directory as a run writes it (test.edn, schedule.edn) and read back as a
// replay reads it, is the same configuration, resolved: nothing left out,
// nothing read another way. Only what a replay does not take differs: the
// name (NAME-replay), the store (the run's own) and the servers.
func TestConfigThroughRunDirectory(t *testing.T) {
	root := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		c := configgen.Config(rt)
		if c.Plan == nil {
			c.Plan = nemesis.Plan{} // a run directory always has a schedule
		}
		dir, err := os.MkdirTemp(root, "store-")
		if err != nil {
			rt.Fatal(err)
		}
		run := store.Run{Dir: filepath.Join(dir, c.Name, "20261202T000000.000Z")}
		if err := os.MkdirAll(run.Dir, 0o755); err != nil {
			rt.Fatal(err)
		}
		if err := run.WriteFile(store.Test, c.AppendEDN(nil)); err != nil {
			rt.Fatal(err)
		}
		if err := run.WriteFile(store.Schedule, c.Plan.AppendEDN(nil)); err != nil {
			rt.Fatal(err)
		}
		got, err := harness.ReplayConfig(run.Dir)
		if err != nil {
			rt.Fatalf("%v\n%s", err, c.AppendEDN(nil))
		}
		want := c.Resolved()
		want.Name, want.Store = c.Name+"-replay", dir
		if !reflect.DeepEqual(got, want) {
			rt.Fatalf("read back\n%#v\nwant\n%#v\ntest.edn: %s", got, want, c.AppendEDN(nil))
		}
		if err := got.Validate(); err != nil {
			rt.Fatalf("read back, it is not valid: %v", err)
		}
	})
}

// TestDelayKeptForEveryDelayFault: --delay survives resolving (what
// test.edn keeps and a replay reads back) for every fault it sets, as
// harness.DelayFaults derives them from the fault kinds; delay-redis-
// replies' was once dropped, by a list of the two faults before it.
func TestDelayKeptForEveryDelayFault(t *testing.T) {
	faults := harness.DelayFaults()
	if len(faults) < 3 {
		t.Fatalf("delay faults %v: want delay-redis, delay-redis-replies and delay-postgres at least", faults)
	}
	for _, k := range faults {
		cfg := harness.DefaultConfig()
		cfg.Nemesis, cfg.Delay = harness.Nemesis(k), 300*time.Millisecond
		if got := cfg.Resolved().Delay; got != cfg.Delay {
			t.Errorf("--nemesis %s --delay %v: resolved to %v", k, cfg.Delay, got)
		}
	}
}
