package shrink

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
)

// A Case is a failing run directory read back for replay: the Config that
// replays it and the checks it found invalid.
type Case struct {
	Dir      string
	Config   harness.Config
	Violated []string
}

// Open reads the run directory dir back as a Case, and refuses, before
// anything is started, a test.edn or schedule.edn that a run of hiatus's
// own locks could not take (harness.ReplayConfig, CheckReplay), and
// one that asks to run a command or to reach machines that allow does not
// name (harness.Allowed): dir may come from anyone. A run that found
// nothing invalid has no violation to replay: an error.
func Open(dir string, allow harness.Allowed) (Case, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // store/latest names another run tomorrow
	}
	cfg, err := harness.ReplayConfig(dir)
	if err != nil {
		return Case{}, err
	}
	if err := harness.CheckReplay(cfg, dir); err != nil {
		return Case{}, err
	}
	if err := allow.Check(cfg, filepath.Join(dir, store.Test)); err != nil {
		return Case{}, err
	}
	violated, err := harness.Violated(dir)
	switch {
	case err != nil:
		return Case{}, &harness.SetupError{Err: fmt.Errorf("%s: %w", dir, err)}
	case len(violated) == 0:
		return Case{}, &harness.SetupError{Err: fmt.Errorf("%s found nothing invalid: there is no violation to replay", dir)}
	}
	return Case{Dir: dir, Config: cfg, Violated: violated}, nil
}

// ShareServers starts one pair of throwaway servers for all the replays
// of c, rather than a pair each (PostgreSQL takes a second or two to
// start), when its faults are all of workers: one that kills or pauses a
// server needs the run's own. It returns what removes them.
func (c *Case) ShareServers(ctx context.Context) (func(), error) {
	for _, f := range c.Config.FaultNames() {
		if k := history.Keyword(f); k != nemesis.KindSigStop && k != nemesis.KindKillWorker {
			return func() {}, nil
		}
	}
	return harness.StartServers(ctx, &c.Config)
}

// Replay runs the case n times, each an ordinary run directory, and says
// after each whether it recurred; it returns how many did.
func (c Case) Replay(ctx context.Context, n int, each func(i int, res harness.Result, recurred bool)) (int, error) {
	recurred := 0
	for i := 1; i <= n; i++ {
		res, err := harness.Run(ctx, c.Config)
		if err == nil {
			err = res.Leftover
		}
		if err != nil {
			return recurred, err
		}
		r := harness.Recurs(c.Violated, res.Results)
		if r {
			recurred++
		}
		each(i, res, r)
		if res.Interrupted {
			return recurred, ctx.Err()
		}
	}
	return recurred, nil
}

// ErrTooRare is returned by Minimise for a case that does not recur often
// enough to be shrunk.
var ErrTooRare = errors.New("the run recurs too rarely to shrink")

// ErrBudget is returned by Minimise when its budget ran out before the case
// as it is was judged: there is nothing to shrink from yet.
var ErrBudget = errors.New("the budget ran out")

// Minimise judges the case as it is (first, once judged), shrinks it, and
// leaves the reproducer in STORE/NAME-shrink/TIME/ (not through
// store.Create: it is no run, and store/latest stays a run), which it
// returns with the result. All of it, the first judgement too, is within
// o.Budget: a replay still running when the budget ends is stopped.
func (c Case) Minimise(ctx context.Context, runs int, o Options, first func(Verdict)) (Result, string, error) {
	if o.Need < 1 || runs < o.Need || o.Budget <= 0 {
		return Result{}, "", fmt.Errorf("shrink: need 1 to %d failing replays, and a positive budget (not %d, %v)", runs, o.Need, o.Budget)
	}
	start := time.Now()
	if o.Judge == nil {
		o.Judge = Replays(c.Violated, runs, o.Need, nil)
	}
	jctx, cancel := context.WithTimeout(ctx, o.Budget)
	v, err := o.Judge(jctx, c.Config)
	expired := errors.Is(jctx.Err(), context.DeadlineExceeded) // before cancel, which would end it too
	cancel()
	switch {
	case ctx.Err() != nil:
		return Result{Config: c.Config, Verdict: v}, "", ctx.Err()
	case err != nil && expired:
		return Result{Config: c.Config, Verdict: v, Spent: time.Since(start)}, "",
			fmt.Errorf("%w after %v, while judging the run as it was (%d of %d replays so far failed, %d needed)",
				ErrBudget, time.Since(start).Round(time.Second), v.Failed, v.Runs, o.Need)
	case err != nil:
		return Result{}, "", err
	}
	if first != nil {
		first(v)
	}
	if v.Failed < o.Need {
		return Result{Config: c.Config, Verdict: v}, "", fmt.Errorf("%w: %d of %d replays failed, %d needed", ErrTooRare, v.Failed, v.Runs, o.Need)
	}
	o.Budget -= time.Since(start)
	res, err := Shrink(ctx, c.Config, v, o)
	if err != nil {
		return res, "", err
	}
	res.Spent = time.Since(start)
	d, err := reproducerDir(c.Config.Store, strings.TrimSuffix(c.Config.Name, "-replay")+"-shrink")
	if err != nil {
		return res, "", err
	}
	defer d.Close()
	// The servers shared by the replays are not the reproducer's.
	r := res
	r.Config.RedisURL, r.Config.PostgresURL = "", ""
	return res, d.Path(), write(d, c.Dir, c.Violated, r)
}

// reproducerDir makes the directory STORE/NAME/START-TIME/ of a
// reproducer: the store is the user's (its path's links are followed),
// what is inside it may be shared, and a link planted there as NAME is
// not followed.
func reproducerDir(root, name string) (*files.Dir, error) {
	st, err := files.MakeDir(root)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	tests, err := st.MakeSub(name)
	if err != nil {
		return nil, err
	}
	defer tests.Close()
	return tests.MakeSub(time.Now().UTC().Format(store.TimeLayout))
}
