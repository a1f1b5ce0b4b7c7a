package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/urfave/cli/v2"
)

func runFlags() []cli.Flag {
	return append(settingFlags(false),
		&cli.BoolFlag{Name: "fenced", Usage: "write with a fencing token (Redis INCR), which Postgres checks: UPDATE … WHERE fence < $n (= --guard fence)"},
		&cli.StringFlag{Name: "schedule", Usage: "inject the faults of `FILE` (a run's schedule.edn), each at its time, instead of drawing them; --nemesis defaults to their kinds"},
	)
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "run the lock-under-pauses experiment, record its history, check it",
		Description: "Starts throwaway redis-server and PostgreSQL servers (unless URLs are given), runs\n" +
			"--workers processes that each loop: acquire the lock, read the counter, work, write\n" +
			"counter+1, release; pauses them; then checks the history. The run is kept in\n" +
			"STORE/NAME/START-TIME/ (history.edn, results.edn, test.edn, hiatus.log).\n\n" +
			"Examples:\n" +
			"  hiatus run --nemesis sigstop --pause 800ms --interval 700ms\n" +
			"  hiatus run --nemesis none --inject-every 20 --pause 800ms --fenced\n\n" +
			"Exit status: 0 valid, 1 invalid, 2 unknown, 130 interrupted (the history up to then is kept and\n" +
			"checked), 254 bad arguments or servers, 255 internal error.",
		Flags: runFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("run takes flags only, not %q (see hiatus run --help)", c.Args().Slice())
			}
			cfg, err := runConfig(c)
			if err != nil {
				return usageError(err)
			}
			return runOnce(c.Context, cfg, c)
		},
	}
}

// runConfig is the configuration run's flags set.
func runConfig(c *cli.Context) (harness.Config, error) {
	cfg, err := settingsConfig(c)
	if err != nil {
		return cfg, err
	}
	if c.Bool("fenced") {
		if c.IsSet("guard") && cfg.Guard != client.GuardFence {
			return cfg, fmt.Errorf("--fenced is --guard fence: it cannot go with --guard %s", cfg.Guard)
		}
		cfg.Guard = client.GuardFence
	}
	if f := c.String("schedule"); f != "" {
		b, err := files.ReadFile(f, harness.MaxRunFile)
		if err != nil {
			return cfg, fmt.Errorf("--schedule: %v", err)
		}
		if cfg.Plan, err = harness.ParseSchedule(b); err != nil {
			return cfg, fmt.Errorf("--schedule %s: %v", f, err)
		}
		if !c.IsSet("nemesis") {
			cfg.Nemesis = harness.Nemesis(strings.Join(cfg.Plan.Kinds(), ","))
		}
	}
	return cfg, nil
}

// runOnce runs one experiment under the signals a terminal sends. The first
// SIGINT or SIGTERM ends the run: workers finish their sections, the
// history and results are written. A second one ends it at once: no
// waiting for workers. Either way no process is left stopped and the
// servers are removed.
func runOnce(ctx context.Context, cfg harness.Config, c *cli.Context) error {
	ctx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	abort := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for _, stop := range []func(){interrupt, func() { close(abort) }} {
			select {
			case <-sigs:
				stop()
			case <-done:
				return
			}
		}
	}()
	res, err := harness.RunWatched(ctx, cfg, harness.Watch{Out: c.App.Writer, Abort: abort})
	if err != nil {
		return runError(err)
	}
	printSummary(c.App.Writer, res.Dir, res.Results)
	if res.Leftover != nil { // the verdict stands; what is left is said
		fmt.Fprintf(c.App.ErrWriter, "hiatus: the run could not undo everything: %v\n", res.Leftover)
	}
	if res.Interrupted {
		return &exitError{code: exitInterrupted, err: fmt.Errorf("run interrupted; the history up to then is in %s", res.Dir)}
	}
	return verdictExit(res.Results.Valid.ExitCode())
}

// runError gives an error of the harness its exit status: a bad setting or
// an unreachable server is the user's to fix.
func runError(err error) error {
	var se *harness.SetupError
	switch {
	case errors.Is(err, harness.ErrInterrupted):
		return &exitError{code: exitInterrupted, err: err}
	case errors.As(err, &se):
		return usageError(err)
	}
	return err
}

// exitInterrupted is the status of a run ended by SIGINT or SIGTERM, as a
// shell reports a process ended by SIGINT.
const exitInterrupted = 130
