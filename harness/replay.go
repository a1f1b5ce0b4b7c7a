package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hiatus-dev/hiatus/checker"
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
	cfg, err := ParseConfig(b)
	if err != nil {
		return Config{}, setupErrorf("%s: %v", filepath.Join(dir, store.Test), err)
	}
	cfg.Name = strings.TrimSuffix(cfg.Name, "-replay") + "-replay"
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
