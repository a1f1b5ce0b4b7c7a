package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/compare"
	"github.com/hiatus-dev/hiatus/internal/progress"
	"github.com/hiatus-dev/hiatus/internal/shellquote"
	"github.com/urfave/cli/v2"
)

func compareFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.IntFlag{Name: "runs", Value: 3, Usage: "runs of each row; each cell of the table is min–max over them"},
		&cli.StringFlag{Name: "locks", Aliases: []string{"lock"}, Usage: "locks to compare, comma-separated: " + strings.Join(client.LockNames(), ", ") + ", or exec:COMMAND (a lock adapter) (default setnx)"},
		&cli.StringFlag{Name: "pauses", Usage: "pause kinds to compare, comma-separated: none, sigstop, sleep, stop (default sigstop,sleep,stop; sigstop for --sweep)"},
		&cli.StringFlag{Name: "fencing", Usage: "off, on or both (default off; both for --sweep)"},
		&cli.StringFlag{Name: "scenario", Usage: "run scenarios of the Redlock debate, each under every guard (none, fence, fence-rmw, cas), " +
			"or findings (bugs lock libraries shipped), each affected and fixed version on one schedule; comma-separated: " +
			strings.Join(compare.ScenarioNames(), ", ") + "; see docs/redlock.md and docs/findings.md"},
		&cli.StringFlag{Name: "guards", Usage: "with --scenario: the guards its rows run under, comma-separated (default all: none, fence, fence-rmw, cas)"},
		&cli.StringFlag{Name: "sweep", Usage: "sweep the pause/lease ratio over a range, as pause/lease=0.25..4: the pause stays --pause, the lease is pause/ratio"},
		&cli.IntFlag{Name: "steps", Value: 5, Usage: "ratios of a sweep, evenly spaced on a log scale (0.25..4 in 5 steps: 0.25, 0.5, 1, 2, 4)"},
		&cli.DurationFlag{Name: "lease", Value: harness.DefaultLease, Usage: "the lease of --locks/--pauses rows (the reference grid fixes its own; a sweep makes it --pause/ratio)"},
		&cli.IntFlag{Name: "inject-every", Value: 20, Usage: "sleep and stop: pause each worker inside its every Nth critical section"},
		&cli.Int64Flag{Name: "seed", Usage: "run i of every row uses seed SEED+i, so that rows see the same nemesis choices", DefaultText: "from the clock"},
		&cli.StringFlag{Name: "name", Value: "compare", Usage: "the comparison goes to STORE/NAME/START-TIME/, and its runs inside it, to NAME-ROW/START-TIME/"},
	}, settingFlags(true)...)
}

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:  "compare",
		Usage: "run a grid of experiments — the reference table, locks × pauses, or a pause/lease sweep — and tabulate it",
		Description: "Runs every row of a grid --runs times, one run after another, each an ordinary run\n" +
			"directory that hiatus check re-checks with the same figures. Prints a markdown table with\n" +
			"min–max per cell, and writes table.md, table.csv, table.json, plot.png, plot.svg and\n" +
			"runs.txt into STORE/NAME/START-TIME/. With no --locks, --pauses or --sweep it runs the\n" +
			"reference grid of the setnx lock (6 rows). Pause kinds: none; sigstop (the nemesis\n" +
			"stops a whole worker every --interval); sleep (a worker blocks inside its every\n" +
			"--inject-every-th section: only its goroutine stops); stop (the worker stops its whole\n" +
			"process there, renewal included).\n\n" +
			"Examples:\n" +
			"  hiatus compare\n" +
			"  hiatus compare --runs 5 --locks setnx,renew,redsync,redislock,pg-advisory --pauses sigstop,sleep,stop\n" +
			"  hiatus compare --sweep pause/lease=0.25..4 --lock setnx --runs 3\n\n" +
			"Exit status: 0 when every run was made (whatever their verdicts), 130 interrupted,\n" +
			"254 bad arguments or servers, 255 internal error.",
		Flags: compareFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("compare takes flags only, not %q (see hiatus compare --help)", c.Args().Slice())
			}
			a, err := compareArgsOf(c)
			if err != nil {
				return usageError(err)
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runCompare(ctx, a, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// compareArgsOf reads and checks the compare command's flags.
func compareArgsOf(c *cli.Context) (compare.Plan, error) {
	ch := compare.Choices{
		Locks: c.String("locks"), Pauses: c.String("pauses"), Fencing: c.String("fencing"), Sweep: c.String("sweep"),
		Steps: c.Int("steps"), StepsGiven: c.IsSet("steps"), Lease: c.Duration("lease"), LeaseGiven: c.IsSet("lease"),
		Faults:   compare.Faults{Pause: c.Duration("pause"), Interval: c.Duration("interval"), Every: c.Int("inject-every")},
		Scenario: c.String("scenario"), Guards: c.String("guards"),
	}
	base, err := settingsConfig(c)
	if err != nil {
		return compare.Plan{}, err
	}
	if c.IsSet("seed") {
		base.Seed = c.Int64("seed")
	}
	a := compare.Plan{Runs: c.Int("runs"), Name: c.String("name"), Command: commandLine(c), Base: base}
	if a.Kind, a.Setups, err = ch.Setups(); err != nil {
		return a, err
	}
	if m := compare.MissingAdapters(a.Setups); m != "" {
		return a, errors.New(m)
	}
	return a, a.Validate()
}

// commandLine writes the command as the flags that were set, in the order
// of the flags, leaving out the server URLs (they are the machine's).
func commandLine(c *cli.Context) string {
	parts := []string{"hiatus", "compare"}
	for _, f := range compareFlags() {
		name := f.Names()[0]
		if !c.IsSet(name) || name == "redis-url" || name == "postgres-url" {
			continue
		}
		parts = append(parts, "--"+name, shellquote.Quote(fmt.Sprint(c.Value(name))))
	}
	return strings.Join(parts, " ")
}

// runCompare makes the comparison a, showing progress on stderr, and
// prints its table to stdout. An interrupted comparison writes what it had.
func runCompare(ctx context.Context, a compare.Plan, stdout, stderr io.Writer) error {
	show := progress.NewCompare(stderr)
	dir, t, err := compare.Make(ctx, a, compare.Watch{
		Started: func(dir string, guess time.Duration) {
			runs := "runs"
			if a.Runs == 1 {
				runs = "run"
			}
			fmt.Fprintf(stderr, "compare: %d rows × %d %s, about %v, into %s\n", len(a.Setups), a.Runs, runs, guess.Round(time.Second), dir)
		},
		Progress: show.Report,
	})
	show.End()
	if t == nil {
		return runError(err)
	}
	stdout.Write(t.Markdown())
	fmt.Fprintf(stdout, "\n%s: %s, %s, %s, %s, %s, %s\n", dir, compare.TableMarkdown, compare.TableCSV,
		compare.TableJSON, compare.PlotPNG, compare.PlotSVG, compare.RunList)
	switch {
	case ctx.Err() != nil:
		return &exitError{code: exitInterrupted, err: fmt.Errorf("comparison interrupted; what was done is in %s", dir)}
	case err != nil:
		err = fmt.Errorf("comparison stopped; what was done is in %s: %w", dir, err)
		if errors.As(err, new(*harness.SetupError)) {
			return usageError(err)
		}
		return err
	}
	return nil
}
