package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
)

// ReplayConfig reads a run directory back into the Config that made it
// (test.edn) with the faults its nemesis injected as Plan (schedule.edn):
// a replay of the run, into the same store, under the name NAME-replay.
// Server URLs are not taken (test.edn hides their passwords): a replay
// starts throwaway servers unless the caller sets them.
func ReplayConfig(dir string) (Config, error) {
	b, err := history.ReadRegular(filepath.Join(dir, store.Test))
	if err != nil {
		return Config{}, &SetupError{Err: fmt.Errorf("%s is no run directory: %w", dir, err)}
	}
	v, err := history.ParseValue(string(b))
	t, ok := v.(map[history.Keyword]any)
	if err != nil || !ok {
		return Config{}, setupErrorf("%s: not a map of settings: %v", filepath.Join(dir, store.Test), err)
	}
	cfg := DefaultConfig()
	ms := func(k string, d *time.Duration) {
		if n, ok := history.Int(t[history.Keyword(k)]); ok {
			*d = time.Duration(n) * time.Millisecond
		}
	}
	num := func(k string) int64 { n, _ := history.Int(t[history.Keyword(k)]); return n }
	word := func(k string) string {
		switch x := t[history.Keyword(k)].(type) {
		case history.Keyword:
			return string(x)
		case string:
			return x
		}
		return ""
	}
	cfg.Name = strings.TrimSuffix(word("name"), "-replay") + "-replay"
	cfg.Workers, cfg.InjectEvery, cfg.Seed = int(num("workers")), int(num("inject-every")), num("seed")
	cfg.CounterID = num("counter-id")
	ms("time-limit-ms", &cfg.TimeLimit)
	ms("lease-ms", &cfg.Lease)
	ms("work-ms", &cfg.Work)
	ms("retry-ms", &cfg.Retry)
	ms("op-timeout-ms", &cfg.OpTimeout)
	ms("pause-ms", &cfg.Pause)
	ms("interval-ms", &cfg.Interval)
	for k, v := range map[string]*string{"nemesis": &cfg.Nemesis, "pause-kind": &cfg.PauseKind, "lock": &cfg.Lock} {
		if w := word(k); w != "" {
			*v = w
		}
	}
	// The settings of the faults and locks a run has; refused without them.
	if cfg.faultIn([]string{"clock"}) {
		ms("clock-jump-ms", &cfg.ClockJump)
		ms("clock-strobe-ms", &cfg.ClockStrobe)
	}
	if cfg.faultIn([]string{"delay-redis", "delay-postgres"}) {
		ms("delay-ms", &cfg.Delay)
	}
	if cfg.Lock == "redlock" {
		cfg.Nodes = int(num("lock-nodes"))
	}
	if h := word("hosts"); h != "" {
		cfg.Hosts = h
	}
	cfg.Fenced = t["fenced?"] == true
	if g := word("guard"); g != "" { // runs before --guard have only :fenced?
		cfg.Fenced, cfg.Guard = false, client.Guard(g)
	}
	real, err := filepath.EvalSymlinks(dir) // store/latest is a link to STORE/NAME/START
	if err != nil {
		return Config{}, &SetupError{Err: err}
	}
	cfg.Store = filepath.Dir(filepath.Dir(real))
	sched, err := history.ReadRegular(filepath.Join(dir, store.Schedule))
	if err != nil {
		return Config{}, setupErrorf("%s: %v", dir, missingSchedule(dir, err))
	}
	if cfg.Plan, err = nemesis.ParsePlan(string(sched)); err != nil {
		return Config{}, setupErrorf("%s: %v", filepath.Join(dir, store.Schedule), err)
	}
	return cfg, nil // Run validates it, with the caller's Locks
}

// missingSchedule says why the run in dir has no schedule to replay: err
// is what reading it said.
func missingSchedule(dir string, err error) error {
	_, herr := os.Lstat(filepath.Join(dir, store.History))
	_, jerr := os.Lstat(filepath.Join(dir, store.Journal))
	switch {
	case !errors.Is(err, fs.ErrNotExist):
		return err
	case herr != nil && jerr == nil:
		return fmt.Errorf("no %s: the run ended before it wrote one (killed?), leaving only its %s, which hiatus check %s reads; its faults cannot be replayed",
			store.Schedule, store.Journal, dir)
	}
	return fmt.Errorf("no %s: a run made before schedules were kept", store.Schedule)
}

// Violated names the checks a run directory's results.edn found invalid:
// the violation a replay must show again.
func Violated(dir string) ([]string, error) {
	b, err := history.ReadRegular(filepath.Join(dir, store.Results))
	if err != nil {
		return nil, err
	}
	v, err := history.ParseValue(string(b))
	m, ok := v.(map[history.Keyword]any)
	if err != nil || !ok {
		return nil, fmt.Errorf("%s: not a map of results: %v", filepath.Join(dir, store.Results), err)
	}
	var names []string
	for k, x := range m {
		if c, ok := x.(map[history.Keyword]any); ok && c["valid?"] == false {
			names = append(names, string(k))
		}
	}
	slices.Sort(names)
	return names, nil
}

// Recurs reports whether a replay's results show one of the violations
// named: a check invalid again.
func Recurs(violated []string, replay checker.Results) bool {
	for _, r := range replay.Checks {
		if r.Valid == checker.Invalid && slices.Contains(violated, r.Name) {
			return true
		}
	}
	return false
}
