package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
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
			"recurs when a check the run found invalid is invalid again.\n\n" +
			"Exit status: 0 every replay recurred, 1 some did not, 130 interrupted, 254 bad arguments.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "runs", Value: 3, Usage: "replays"},
			&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
		},
		Action: func(c *cli.Context) error {
			dir, cfg, violated, err := replayArgs(c)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			release, err := shareServers(ctx, &cfg)
			if err != nil {
				return runError(err)
			}
			defer release()
			out := c.App.Writer
			fmt.Fprintf(out, "replaying %s %d times: %s; violated: %s\n", dir, c.Int("runs"), cfg.Describe(), strings.Join(violated, ", "))
			recurred := 0
			for i := 1; i <= c.Int("runs"); i++ {
				res, err := harness.Run(ctx, cfg)
				if err != nil {
					return runError(err)
				}
				if res.Interrupted {
					return &exitError{code: exitInterrupted, err: fmt.Errorf("replay interrupted; its history is in %s", res.Dir)}
				}
				word := "did not recur"
				if harness.Recurs(violated, res.Results) {
					recurred++
					word = "recurred"
				}
				fmt.Fprintf(out, "replay %d: %s  (valid? %v, %s)\n", i, word, res.Results.Valid, res.Dir)
			}
			fmt.Fprintf(out, "recurred in %d of %d replays\n", recurred, c.Int("runs"))
			if recurred < c.Int("runs") {
				return verdictExit(exitInvalid)
			}
			return nil
		},
	}
}

// replayArgs reads the run directory a replay or shrink is asked for, and
// what it violated.
func replayArgs(c *cli.Context) (string, harness.Config, []string, error) {
	if c.NArg() != 1 {
		return "", harness.Config{}, nil, usageErrorf("%s takes one run directory, not %d arguments", c.Command.Name, c.NArg())
	}
	if c.Int("runs") < 1 {
		return "", harness.Config{}, nil, usageErrorf("--runs must be at least 1")
	}
	run, _, err := store.Resolve(c.String("store"), c.Args().First())
	if err != nil || run.Dir == "" {
		return "", harness.Config{}, nil, usageErrorf("%s: want a run directory (it holds test.edn and schedule.edn): %v", c.Args().First(), err)
	}
	cfg, err := harness.ReplayConfig(run.Dir)
	if err != nil {
		return "", cfg, nil, runError(err)
	}
	violated, err := harness.Violated(run.Dir)
	switch {
	case err != nil:
		return "", cfg, nil, usageErrorf("%s: %v", run.Dir, err)
	case len(violated) == 0:
		return "", cfg, nil, usageErrorf("%s found nothing invalid: there is no violation to replay", run.Dir)
	}
	return run.Dir, cfg, violated, nil
}

// shareServers starts one pair of throwaway servers for all the replays of
// cfg, rather than a pair each (PostgreSQL takes a second or two to
// start), unless a fault kills one of them.
func shareServers(ctx context.Context, cfg *harness.Config) (func(), error) {
	for _, f := range cfg.FaultNames() {
		if f == "kill-redis" || f == "kill-postgres" {
			return func() {}, nil
		}
	}
	return harness.StartServers(ctx, cfg)
}

func shrinkCommand() *cli.Command {
	return &cli.Command{
		Name:      "shrink",
		Usage:     "shrink a failing run to a small reproducer: fewer faults, shorter pauses, a shorter run, fewer workers",
		ArgsUsage: "RUN-DIR",
		Description: "Delta debugging over the run's fault schedule and configuration: drops faults, halves\n" +
			"pauses, cuts the run short, tries fewer workers and less work, keeping a candidate only when\n" +
			"at least --need of --runs replays still show the run's violation. It stops when nothing\n" +
			"smaller fails or --budget is spent, and leaves in STORE/NAME-shrink/START-TIME/ the\n" +
			"reproducer: schedule.edn, command.txt (the hiatus run command line), repro_test.go (a Go\n" +
			"test through the library) and the timeline of a failing replay. Every replay is an\n" +
			"ordinary run directory under STORE/NAME-replay/.\n\n" +
			"Exit status: 0 shrunk (or nothing smaller fails), 130 interrupted, 254 bad arguments.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "runs", Value: 5, Usage: "replays of each candidate"},
			&cli.IntFlag{Name: "need", Value: 3, Usage: "replays of --runs that must show the violation for a candidate to be kept"},
			&cli.DurationFlag{Name: "budget", Value: 10 * time.Minute, Usage: "time to spend; the smallest failing case so far is the result"},
			&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
		},
		Action: func(c *cli.Context) error {
			dir, cfg, violated, err := replayArgs(c)
			if err != nil {
				return err
			}
			if c.Int("need") < 1 || c.Int("need") > c.Int("runs") || c.Duration("budget") <= 0 {
				return usageErrorf("--need must be 1 to --runs, and --budget positive")
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			release, err := shareServers(ctx, &cfg)
			if err != nil {
				return runError(err)
			}
			defer release()
			return runShrink(ctx, c, dir, cfg, violated)
		},
	}
}

// runShrink shrinks the run in dir, showing each candidate as it is
// judged, and writes the reproducer.
func runShrink(ctx context.Context, c *cli.Context, dir string, cfg harness.Config, violated []string) error {
	out := c.App.Writer
	judge := shrink.Replays(violated, c.Int("runs"), c.Int("need"), nil)
	fmt.Fprintf(out, "shrinking %s: %d faults, %v, %d workers, work %v; %s violated; keeping what fails in %d of %d replays, for up to %v\n",
		dir, len(cfg.Plan), cfg.TimeLimit, cfg.Workers, cfg.Work, strings.Join(violated, ", "), c.Int("need"), c.Int("runs"), c.Duration("budget"))
	start := time.Now()
	first, err := judge(ctx, cfg)
	if err != nil {
		return runError(err)
	}
	fmt.Fprintf(out, "the run as it was: failed %d of %d replays\n", first.Failed, first.Runs)
	if first.Failed < c.Int("need") {
		return usageErrorf("the run itself recurred in only %d of %d replays: too rare to shrink (try --need %d, or more --runs)",
			first.Failed, first.Runs, max(first.Failed, 1))
	}
	res, err := shrink.Shrink(ctx, cfg, first, shrink.Options{Judge: judge, Need: c.Int("need"),
		Budget: c.Duration("budget") - time.Since(start), Step: func(s shrink.Step) { showStep(out, s) }})
	if err != nil {
		return runError(err)
	}
	// Not store.Create: the reproducer is no run, and store/latest stays
	// the last run.
	name := strings.TrimSuffix(cfg.Name, "-replay") + "-shrink"
	sdir := store.Run{Dir: filepath.Join(cfg.Store, name, time.Now().UTC().Format(store.TimeLayout))}
	if err := os.MkdirAll(sdir.Dir, 0o755); err != nil {
		return err
	}
	if err := shrink.Write(sdir.Dir, dir, res); err != nil {
		return err
	}
	r := res.Config
	fmt.Fprintf(out, "\nshrunk in %v (%d candidates): %d faults, %v, %d workers, work %v; failed %d of %d replays\n",
		time.Since(start).Round(time.Second), res.Tried, len(r.Plan), r.TimeLimit, r.Workers, r.Work, res.Verdict.Failed, res.Verdict.Runs)
	fmt.Fprintf(out, "  %s\n", shrink.Command(r, filepath.Join(sdir.Dir, store.Schedule)))
	fmt.Fprintf(out, "reproducer: %s (%s, %s, %s, timeline.html)\n", sdir.Dir, store.Schedule, shrink.CommandFile, shrink.TestFile)
	if ctx.Err() != nil {
		return &exitError{code: exitInterrupted, err: fmt.Errorf("shrink interrupted; the smallest failing case so far is in %s", sdir.Dir)}
	}
	return nil
}

func showStep(out io.Writer, s shrink.Step) {
	word := "no: "
	if s.Kept {
		word = "kept:"
	}
	fmt.Fprintf(out, "  %s %-60s failed %d of %d   (%v left)\n", word, s.What, s.Verdict.Failed, s.Verdict.Runs, s.Left)
}
