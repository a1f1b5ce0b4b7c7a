package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/compare"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/printable"
	"github.com/hiatus-dev/hiatus/internal/progress"
	"github.com/hiatus-dev/hiatus/internal/shellquote"
	"github.com/urfave/cli/v2"
)

func compareFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.IntFlag{Name: "runs", Value: 3, Usage: "runs of each row; each cell of the table is min–max over them"},
		&cli.StringFlag{Name: "locks", Aliases: []string{"lock"}, Usage: "locks to compare, comma-separated: " + strings.Join(client.LockNames(), ", ") + ", or exec:COMMAND (a lock adapter) (default setnx)"},
		&cli.StringFlag{Name: "pauses", Usage: "pause kinds to compare, comma-separated: " + strings.Join(compare.PauseChoices(), ", ") +
			" (default " + compare.DefaultPauses(false) + "; " + compare.DefaultPauses(true) + " for --sweep)"},
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
		&cli.BoolFlag{Name: "list-cells", Usage: "list the grid's cells, one run each, a line per cell: index, row and run, setup; start nothing"},
		&cli.StringFlag{Name: "cell", Usage: "make only cell N of the grid (from 0; see --list-cells) into --grid-dir; " +
			"job: the index a Kubernetes Indexed Job gives its pod, $" + jobIndexEnv + " (needs --seed)"},
		&cli.StringFlag{Name: "grid-dir", Usage: "with --cell: the directory every cell of the grid shares; cell N goes to DIR/cell-N/"},
		&cli.StringFlag{Name: "collect", Usage: "tabulate the cells made in DIR by --cell into DIR's table.md, table.csv and table.json, as one process makes them; alone"},
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
			"A grid may be made as separate processes, a cell (one run) each, as the pods of a\n" +
			"Kubernetes Indexed Job do (docs/cluster.md): --list-cells lists the cells, --cell N\n" +
			"--grid-dir DIR makes cell N into DIR/cell-N/, and --collect DIR tabulates them into\n" +
			"the table one process would have made. The directory is shared: both refuse a link\n" +
			"planted where a cell goes, and --collect a record its run does not bear out.\n" +
			"  hiatus compare --locks setnx,renew --runs 2 --seed 7 --list-cells\n" +
			"  hiatus compare --locks setnx,renew --runs 2 --seed 7 --cell 3 --grid-dir /grid\n" +
			"  hiatus compare --collect /grid\n\n" +
			"Exit status: 0 when every run was made (whatever their verdicts), 130 interrupted,\n" +
			"254 bad arguments or servers, a cell's record --collect refused (naming its file and\n" +
			"field), or cells it did not find (the table is written all the same, marked\n" +
			"incomplete), 255 internal error.",
		Flags: compareFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("compare takes flags only, not %q (see hiatus compare --help)", c.Args().Slice())
			}
			if c.IsSet("collect") {
				return runCollect(c)
			}
			a, err := compareArgsOf(c)
			if err != nil {
				return usageError(err)
			}
			if c.Bool("list-cells") {
				for _, cell := range a.Cells() {
					fmt.Fprintln(c.App.Writer, a.Describe(cell))
				}
				return nil
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if c.IsSet("cell") {
				return runCell(ctx, c, a)
			}
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
	if err := cellFlagsOf(c); err != nil {
		return compare.Plan{}, err
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

// cellFlags are compare's flags that list, make or collect a grid's
// cells: like the settings of the machine (harness.Setting.Local), they
// say where a grid is made, not what it is.
var cellFlags = []string{"list-cells", "cell", "grid-dir", "collect"}

// placeFlag says whether the flag name says where a grid is made: a
// command line that names the grid leaves it out.
func placeFlag(name string) bool {
	s, ok := settingNamed(name)
	return slices.Contains(cellFlags, name) || ok && s.Local
}

// settingNamed is the setting whose flag is name.
func settingNamed(name string) (harness.Setting, bool) {
	for _, s := range harness.Settings() {
		if s.Flag == name {
			return s, true
		}
	}
	return harness.Setting{}, false
}

// commandLine writes the command as the flags that were set, in the order
// of the flags, leaving out those that say where it is made (the servers
// and the counter's row are the machine's; a cell's flags, its pod's):
// every cell of a grid made apart, and the grid made in one process, have
// the one command line.
func commandLine(c *cli.Context) string {
	parts := []string{"hiatus", "compare"}
	for _, f := range compareFlags() {
		name := f.Names()[0]
		if !c.IsSet(name) || placeFlag(name) {
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
	printTable(stdout, dir, t)
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

// jobIndexEnv is where a Kubernetes Indexed Job puts the index of the pod's
// completion: --cell job reads it; nothing else does, so that a stray one
// never turns a comparison into one cell of it.
const jobIndexEnv = "JOB_COMPLETION_INDEX"

// cellFlagsOf checks that the flags of a cell go together.
func cellFlagsOf(c *cli.Context) error {
	cell := c.IsSet("cell")
	switch {
	case cell && c.Bool("list-cells"):
		return errors.New("--list-cells lists the cells: it cannot go with --cell")
	case cell && c.String("grid-dir") == "":
		return errors.New("--cell needs --grid-dir DIR, the directory every cell of the grid shares")
	case !cell && c.IsSet("grid-dir"):
		return errors.New("--grid-dir is where --cell puts its cell; --collect DIR tabulates the cells there")
	case cell && !c.IsSet("seed"):
		return errors.New("--cell needs --seed: the cells of a grid made apart must draw their faults from one seed (run i of every row uses SEED+i)")
	case cell && c.IsSet("store"):
		return errors.New("--cell makes its run in --grid-dir DIR/cell-N/, not in --store")
	}
	return nil
}

// cellIndex is the cell --cell names: a number, or job for the index
// $JOB_COMPLETION_INDEX holds.
func cellIndex(c *cli.Context) (int, error) {
	v, what := c.String("cell"), "--cell"
	if v == "job" {
		what = "--cell job: $" + jobIndexEnv
		var ok bool
		if v, ok = os.LookupEnv(jobIndexEnv); !ok {
			return 0, fmt.Errorf("%s is not set: a Kubernetes Indexed Job sets it in each pod; elsewhere, give --cell N", what)
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want a cell's index, a whole number from 0 (hiatus compare --list-cells lists them)", what, v)
	}
	return n, nil
}

// runCell makes one cell of the grid a, and prints where its run went and
// its verdict.
func runCell(ctx context.Context, c *cli.Context, a compare.Plan) error {
	index, err := cellIndex(c)
	if err != nil {
		return usageError(err)
	}
	rec, err := compare.MakeCell(ctx, a, index, c.String("grid-dir"))
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{code: exitInterrupted, err: fmt.Errorf("cell %d interrupted: %w", index, err)}
		}
		return runError(err)
	}
	fmt.Fprintf(c.App.Writer, "%s\tvalid? %s\t%s\n", a.Describe(rec.Cell), rec.Figures.Valid, rec.Figures.Dir)
	return nil
}

// printTable prints the table of the comparison in dir, and the files
// that keep it there.
func printTable(w io.Writer, dir string, t *compare.Table) {
	// The table quotes what the cells' records said (a command, versions):
	// a shared volume's, escaped for the terminal.
	io.WriteString(w, printable.Lines(string(t.Markdown())))
	fmt.Fprintf(w, "\n%s: %s, %s, %s, %s, %s, %s\n", dir, compare.TableMarkdown, compare.TableCSV,
		compare.TableJSON, compare.PlotPNG, compare.PlotSVG, compare.RunList)
}

// runCollect tabulates the cells of the directory --collect names, which
// takes no other flag: the cells' records say what their grid is.
func runCollect(c *cli.Context) error {
	for _, f := range compareFlags() {
		// Settings read from the environment (the server URLs), which
		// it does not use, may be set there.
		name := f.Names()[0]
		if s, ok := settingNamed(name); name != "collect" && !(ok && s.Env != "") && c.IsSet(name) {
			return usageErrorf("--collect reads its grid from the cells' records: it takes no --%s", name)
		}
	}
	dir := c.String("collect")
	t, err := compare.Collect(dir)
	if t == nil {
		return usageError(err)
	}
	printTable(c.App.Writer, dir, t)
	var missing *compare.MissingError
	if errors.As(err, &missing) {
		return usageError(err)
	}
	return err
}
