package compare

import (
	"context"
	"fmt"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
)

// A Plan is a comparison to make: its rows, and what every run shares.
type Plan struct {
	Kind    string // reference, grid or sweep
	Setups  []Setup
	Runs    int            // runs of each row
	Base    harness.Config // each run's configuration, but for what its Setup says
	Name    string         // the comparison goes to Base.Store/Name/START-TIME/
	Command string         // the command line that asked for it, for the table's caption
}

// Config is the configuration of run i of the row s: the base, with the
// setup's lock, lease, fencing and pauses, and seed Base.Seed+i, so that
// run i of every row sees the same nemesis choices.
func (p Plan) Config(s Setup, i int) harness.Config {
	cfg := p.Base
	cfg.Name = p.Name + "-" + s.Slug()
	cfg.Lock, cfg.Lease, cfg.Guard, cfg.Pause, cfg.Interval = s.Lock, s.Lease, client.GuardOf(s.Fenced), s.PauseLen, s.Interval
	cfg.Seed = p.Base.Seed + int64(i)
	cfg.Nemesis, cfg.InjectEvery, cfg.PauseKind = "none", 0, harness.DefaultPauseKind
	switch s.Pause {
	case PauseSigStop:
		cfg.Nemesis = harness.Nemesis(nemesis.KindSigStop)
	case PauseSleep, PauseStop, PauseStopWaiters:
		cfg.InjectEvery, cfg.PauseKind = s.Every, history.Keyword(s.Pause)
	}
	if s.Scenario != "" {
		cfg.Guard, cfg.ExtendBeforeWrite, cfg.NodeAOF = s.Guard, s.Extend, s.NodeAOF
		if s.Nemesis != "" {
			cfg.Nemesis = harness.Nemesis(s.Nemesis) // a finding's may have none but its in-section pauses
		}
		if s.Work > 0 {
			cfg.Work = s.Work
		}
		if s.Limit > 0 {
			cfg.TimeLimit = s.Limit
		}
		if s.Workers > 0 {
			cfg.Workers = s.Workers
		}
		if s.Nodes > 0 {
			cfg.Nodes = s.Nodes
		}
		if s.AdapterStore != "" {
			cfg.AdapterStore = s.AdapterStore
		}
		if s.Delay > 0 {
			cfg.Delay = s.Delay
		}
		if s.Retry > 0 {
			cfg.Retry = s.Retry
		}
	}
	return cfg
}

// Validate checks the configuration of every run, so that a bad setting
// stops a comparison before its first run rather than in the middle.
func (p Plan) Validate() error {
	if p.Runs < 1 {
		return fmt.Errorf("--runs must be at least 1, not %d", p.Runs)
	}
	for _, s := range p.Setups {
		if err := p.Config(s, 0).Validate(); err != nil {
			return fmt.Errorf("%s: %w", s.Short(), err)
		}
	}
	return nil
}

// A Watch follows a comparison being made.
type Watch struct {
	// Started is told where the comparison goes and how long it should
	// take, once its directory exists.
	Started func(dir string, guess time.Duration)
	// Progress is told of each run as it starts and as it ends.
	Progress func(Progress)
}

// startServers checks that runs can be kept in dir, starts the throwaway
// servers base names none of (filling their URLs in), and says their
// versions; stop removes them.
func startServers(ctx context.Context, base *harness.Config, dir string) (versions string, stop func(), err error) {
	if err := store.Writable(dir); err != nil {
		return "", nil, &harness.SetupError{Err: err}
	}
	if stop, err = harness.StartServers(ctx, base); err != nil {
		return "", nil, err
	}
	if versions, err = harness.ServerVersions(ctx, base.RedisURL, base.PostgresURL); err != nil {
		stop()
		return "", nil, err
	}
	return versions, stop, nil
}

// Make runs every row of p Runs times, one run after another, each an
// ordinary run (harness.Run) kept inside the comparison's directory, and
// writes the table, plots and run list there, even when ctx ends it early
// or a run fails. One pair of throwaway servers serves the whole grid
// unless p.Base names servers.
func Make(ctx context.Context, p Plan, w Watch) (dir string, t *Table, err error) {
	start := time.Now()
	base := p.Base
	versions, stop, err := startServers(ctx, &base, base.Store)
	if err != nil {
		return "", nil, err
	}
	defer stop()
	d, err := createDir(base.Store, p.Name, start)
	if err != nil {
		return "", nil, err
	}
	defer d.Close()
	dir = d.Path()
	t = p.Header().Table(start, versions)
	// A run takes its time limit, plus the workers' start and the check.
	guess := base.TimeLimit + time.Second
	if w.Started != nil {
		w.Started(dir, guess*time.Duration(len(p.Setups)*p.Runs))
	}
	p.Base = base
	p.Base.Store = dir // the cells live in their comparison's directory, not among the store's runs
	runErr := Run(ctx, t, p.Setups, func(ctx context.Context, s Setup, i int) (Figures, error) {
		return runCell(ctx, p.Config(s, i), dir)
	}, guess, w.progress)
	if err := writeTable(d, t); err != nil {
		return dir, t, err
	}
	return dir, t, runErr
}

func (w Watch) progress(p Progress) {
	if w.Progress != nil {
		w.Progress(p)
	}
}
