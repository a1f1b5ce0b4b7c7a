package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/printable"
	"github.com/hiatus-dev/hiatus/shrink"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/urfave/cli/v2"
)

func replayCommand() *cli.Command {
	return &cli.Command{
		Name:      "replay",
		Usage:     "rerun a run with its configuration and fault schedule, and say how often its violation recurs",
		ArgsUsage: "RUN-DIR",
		Description: "Reads the run's test.edn and schedule.edn and runs it again --runs times, each an ordinary\n" +
			"run directory (STORE/NAME-replay/START-TIME/), injecting the same faults on the same workers\n" +
			"at the same times. Timing is not deterministic, so a replay is judged by its outcome: it\n" +
			"recurs when a check the run found invalid is invalid again.\n\n" + allowWords +
			"Exit status: 0 every replay recurred, 1 some did not, 130 interrupted, 254 bad arguments.",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "runs", Value: 3, Usage: "replays"},
			&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
		}, allowFlags()...),
		Action: func(c *cli.Context) error { return withCase(c, replay) },
	}
}

// replay replays the case --runs times, saying how each went.
func replay(ctx context.Context, c *cli.Context, cs shrink.Case) error {
	out, n := c.App.Writer, c.Int("runs")
	fmt.Fprintf(out, "replaying %s %d times: %s; violated: %s\n", cs.Dir, n, printable.Escape(cs.Config.Describe()), printable.Escape(strings.Join(cs.Violated, ", ")))
	recurred, err := cs.Replay(ctx, n, func(i int, res harness.Result, r bool) {
		word := "did not recur"
		if r {
			word = "recurred"
		}
		fmt.Fprintf(out, "replay %d: %s  (valid? %v, %s)\n", i, word, res.Results.Valid, res.Dir)
	})
	switch {
	case ctx.Err() != nil:
		return &exitError{code: exitInterrupted, err: errors.New("replay interrupted")}
	case err != nil:
		return runError(err)
	}
	fmt.Fprintf(out, "recurred in %d of %d replays\n", recurred, n)
	if recurred < n {
		return verdictExit(exitInvalid)
	}
	return nil
}

// withCase reads the run directory a replay or shrink is asked for,
// starts the servers its replays share, and does what with it under the
// signals a terminal sends.
func withCase(c *cli.Context, what func(context.Context, *cli.Context, shrink.Case) error) error {
	switch {
	case c.NArg() != 1:
		return usageErrorf("%s takes one run directory, not %d arguments", c.Command.Name, c.NArg())
	case c.Int("runs") < 1:
		return usageErrorf("--runs must be at least 1")
	}
	run, _, err := store.Resolve(c.String("store"), c.Args().First())
	switch {
	case err != nil:
		return usageErrorf("%s wants a run directory (it holds test.edn and schedule.edn): %v", c.Command.Name, err)
	case run.Dir == "":
		return usageErrorf("%s wants a run directory (it holds test.edn and schedule.edn), not a history file: %s", c.Command.Name, c.Args().First())
	}
	cs, err := shrink.Open(run.Dir, harness.Allowed{Lock: c.String("lock"), Hosts: harness.Hosts(c.String("hosts"))})
	if err != nil {
		return runError(err)
	}
	if c.IsSet("store") {
		cs.Config.Store = c.String("store") // else the run's own store
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	release, err := cs.ShareServers(ctx)
	if err != nil {
		return runError(err)
	}
	defer release()
	return what(ctx, c, cs)
}

// allowWords say, in replay's and shrink's help, what a run directory may
// not have them do unasked.
const allowWords = "A run directory may come from anyone: one whose test.edn names a lock adapter (exec:COMMAND)\n" +
	"or machines to run on (ssh:FILE) is refused (exit 254) unless --lock or --hosts names the same.\n\n"

// allowFlags are replay's and shrink's flags that allow what a run
// directory's test.edn names and hiatus would run or reach.
func allowFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "lock", Usage: "allow the lock adapter `exec:COMMAND` that the run's test.edn names (its :lock, exactly): hiatus runs no command a run directory names that you do not name too"},
		&cli.StringFlag{Name: "hosts", Usage: "allow the machines of the inventory `ssh:FILE` that the run's test.edn names (its :hosts, exactly): hiatus reaches no machine a run directory names that you do not name too"},
	}
}

func shrinkCommand() *cli.Command {
	return &cli.Command{
		Name:      "shrink",
		Usage:     "shrink a failing run to a small reproducer: fewer faults, shorter pauses, a shorter run, fewer workers",
		ArgsUsage: "RUN-DIR",
		Description: "Delta debugging over the run's fault schedule and configuration: drops faults, halves\n" +
			"pauses, moves them earlier, cuts the run short, tries fewer workers and less work, keeping a\n" +
			"candidate only when at least --need of --runs replays still show the run's violation. It\n" +
			"stops when nothing smaller fails or --budget is spent, and leaves in\n" +
			"STORE/NAME-shrink/START-TIME/ the reproducer: schedule.edn, command.txt (the hiatus run\n" +
			"command line), repro_test.go (a Go test through the library) and the timeline of a failing\n" +
			"replay. Every replay is an ordinary run directory under STORE/NAME-replay/.\n\n" + allowWords +
			"Exit status: 0 shrunk (or nothing smaller fails), 130 interrupted, 254 bad arguments or a\n" +
			"run that recurs too rarely to shrink.",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "runs", Value: 5, Usage: "replays of each candidate"},
			&cli.IntFlag{Name: "need", Value: 4, Usage: "replays of --runs that must show the violation for a candidate to be kept (4 of 5: a reproducer that recurs four times in five)"},
			&cli.DurationFlag{Name: "budget", Value: 10 * time.Minute, Usage: "time to spend; the smallest failing case so far is the result, judged once more (up to three times) past it"},
			&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
		}, allowFlags()...),
		Action: func(c *cli.Context) error {
			if c.Int("need") < 1 || c.Int("need") > c.Int("runs") || c.Duration("budget") <= 0 {
				return usageErrorf("--need must be 1 to --runs, and --budget positive")
			}
			return withCase(c, runShrink)
		},
	}
}

// runShrink shrinks the case, showing each candidate as it is judged.
func runShrink(ctx context.Context, c *cli.Context, cs shrink.Case) error {
	out, cfg := c.App.Writer, cs.Config
	fmt.Fprintf(out, "shrinking %s: %s, %v, %d workers, work %v; %s violated; keeping what fails in %d of %d replays, for up to %v\n",
		cs.Dir, faults(len(cfg.Plan)), cfg.TimeLimit, cfg.Workers, cfg.Work, printable.Escape(strings.Join(cs.Violated, ", ")), c.Int("need"), c.Int("runs"), c.Duration("budget"))
	res, dir, err := cs.Minimise(ctx, c.Int("runs"), shrink.Options{Need: c.Int("need"), Budget: c.Duration("budget"),
		Step: func(s shrink.Step) { showStep(out, s) }},
		func(v shrink.Verdict) {
			fmt.Fprintf(out, "the run as it was: failed %d of %d replays\n", v.Failed, v.Runs)
		})
	switch {
	case ctx.Err() != nil && dir == "":
		return &exitError{code: exitInterrupted, err: errors.New("shrink interrupted before it had a case")}
	case errors.Is(err, shrink.ErrTooRare):
		return usageErrorf("%v (try a lower --need, or more --runs)", err)
	case errors.Is(err, shrink.ErrBudget):
		return usageErrorf("--budget %v: %v; a judgement is up to --runs replays of the whole run: give it more --budget",
			c.Duration("budget"), err)
	case err != nil && ctx.Err() == nil:
		return runError(err)
	}
	r := res.Config
	if !res.Done {
		fmt.Fprintf(out, "\nthe budget ran out: what follows is the smallest failing case found in it\n")
	}
	fmt.Fprintf(out, "\nshrunk in %v (%d candidates): %s, %v, %d workers, work %v; failed %d of %d replays\n",
		res.Spent.Round(time.Second), res.Tried, faults(len(r.Plan)), r.TimeLimit, r.Workers, r.Work, res.Verdict.Failed, res.Verdict.Runs)
	fmt.Fprintf(out, "  %s\n", printable.Escape(shrink.Command(r, filepath.Join(dir, store.Schedule))))
	fmt.Fprintf(out, "reproducer: %s (%s, %s, %s, timeline.html)\n", dir, store.Schedule, shrink.CommandFile, shrink.TestFile)
	switch {
	case ctx.Err() != nil:
		return &exitError{code: exitInterrupted, err: fmt.Errorf("shrink interrupted; the smallest failing case so far is in %s", dir)}
	case res.Tried == 0 && !res.Done:
		return usageErrorf("--budget %v was spent judging the run as it was: no smaller case was tried, and the reproducer is the run itself; give it more --budget",
			c.Duration("budget"))
	}
	return nil
}

func showStep(out io.Writer, s shrink.Step) {
	word := "no: "
	switch {
	case s.Confirm && s.Kept:
		fmt.Fprintf(out, "  held: judged again, the result failed %d of %d\n", s.Verdict.Failed, s.Verdict.Runs)
		return
	case s.Confirm:
		fmt.Fprintf(out, "  gave way: judged again, the result failed %d of %d; back to the case kept before it\n", s.Verdict.Failed, s.Verdict.Runs)
		return
	case s.Kept:
		word = "kept:"
	}
	fmt.Fprintf(out, "  %s %-60s failed %d of %d   (%v left)\n", word, s.What, s.Verdict.Failed, s.Verdict.Runs, s.Left)
}

// faults says how many faults a schedule holds.
func faults(n int) string {
	if n == 1 {
		return "1 fault"
	}
	return fmt.Sprintf("%d faults", n)
}
