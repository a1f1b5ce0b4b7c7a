package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/internal/compare"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/urfave/cli/v2"
)

func compareFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "runs", Value: 3, Usage: "runs of each row; each cell of the table is min–max over them"},
		&cli.StringFlag{Name: "locks", Aliases: []string{"lock"}, Usage: "locks to compare, comma-separated: " + strings.Join(client.LockNames(), ", ") + " (default setnx)"},
		&cli.StringFlag{Name: "pauses", Usage: "pause kinds to compare, comma-separated: none, sigstop, sleep, stop (default sigstop,sleep,stop; sigstop for --sweep)"},
		&cli.StringFlag{Name: "fencing", Usage: "off, on or both (default off; both for --sweep)"},
		&cli.StringFlag{Name: "sweep", Usage: "sweep the pause/lease ratio over a range, as pause/lease=0.25..4: the pause stays --pause, the lease is pause/ratio"},
		&cli.IntFlag{Name: "steps", Value: 5, Usage: "ratios of a sweep, evenly spaced on a log scale (0.25..4 in 5 steps: 0.25, 0.5, 1, 2, 4)"},
		&cli.DurationFlag{Name: "lease", Value: 500 * time.Millisecond, Usage: "the lease of --locks/--pauses rows (the reference grid fixes its own; a sweep makes it --pause/ratio)"},
		&cli.DurationFlag{Name: "pause", Value: 800 * time.Millisecond, Usage: "how long each pause lasts"},
		&cli.DurationFlag{Name: "interval", Value: 700 * time.Millisecond, Usage: "sigstop: time between the end of one pause and the start of the next"},
		&cli.IntFlag{Name: "inject-every", Value: 20, Usage: "sleep and stop: pause each worker inside its every Nth critical section"},
		&cli.IntFlag{Name: "workers", Value: 3, Usage: "worker processes of each run"},
		&cli.DurationFlag{Name: "time-limit", Value: 10 * time.Second, Usage: "length of each run"},
		&cli.DurationFlag{Name: "work", Value: 20 * time.Millisecond, Usage: "simulated work between the read and the write"},
		&cli.DurationFlag{Name: "retry", Value: 5 * time.Millisecond, Usage: "wait between attempts to acquire the lock"},
		&cli.DurationFlag{Name: "op-timeout", Value: 5 * time.Second, Usage: "bound on each read, write and release"},
		&cli.Int64Flag{Name: "seed", Usage: "run i of every row uses seed SEED+i, so that rows see the same nemesis choices", DefaultText: "from the clock"},
		&cli.StringFlag{Name: "redis-url", EnvVars: []string{"HIATUS_REDIS_URL"}, Usage: "use this Redis instead of a throwaway redis-server (one for the whole grid)"},
		&cli.StringFlag{Name: "postgres-url", EnvVars: []string{"HIATUS_POSTGRES_URL"}, Usage: "use this PostgreSQL instead of a throwaway one (one for the whole grid)"},
		&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
		&cli.StringFlag{Name: "name", Value: "compare", Usage: "the comparison goes to STORE/NAME/START-TIME/, and its runs inside it, to NAME-ROW/START-TIME/"},
		&cli.Int64Flag{Name: "counter-id", Value: 1, Usage: "row of the counter table the runs use"},
	}
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

// compareArgs is a comparison: its rows, and what every run shares.
type compareArgs struct {
	kind    string // reference, grid or sweep
	setups  []compare.Setup
	runs    int
	base    runConfig // each run's configuration, but for what its Setup says
	name    string
	command string
}

// compareArgsOf reads and checks the compare command's flags.
func compareArgsOf(c *cli.Context) (compareArgs, error) {
	a := compareArgs{runs: c.Int("runs"), name: c.String("name"), command: commandLine(c)}
	a.base = runConfig{
		Workers: c.Int("workers"), TimeLimit: c.Duration("time-limit"), Work: c.Duration("work"),
		Retry: c.Duration("retry"), OpTimeout: c.Duration("op-timeout"), Seed: c.Int64("seed"),
		RedisURL: c.String("redis-url"), PostgresURL: c.String("postgres-url"), Store: c.String("store"),
		CounterID: c.Int64("counter-id"), Lock: "setnx", PauseKind: "sleep", Nemesis: "none",
	}
	if !c.IsSet("seed") {
		a.base.Seed = time.Now().UnixNano()
	}
	if a.runs < 1 {
		return a, fmt.Errorf("--runs must be at least 1, not %d", a.runs)
	}
	faults := compare.Faults{Pause: c.Duration("pause"), Interval: c.Duration("interval"), Every: c.Int("inject-every")}
	if faults.Every < 1 {
		return a, fmt.Errorf("--inject-every must be at least 1, not %d", faults.Every)
	}
	sweep := c.String("sweep")
	switch {
	case sweep != "":
		a.kind = "sweep"
	case c.IsSet("locks") || c.IsSet("pauses"):
		a.kind = "grid"
	default:
		a.kind = "reference"
		for _, f := range []string{"lease", "fencing"} {
			if c.IsSet(f) {
				return a, fmt.Errorf("--%s: the reference grid fixes its rows; give --locks or --pauses for a grid of your own", f)
			}
		}
	}
	switch {
	case a.kind != "sweep" && c.IsSet("steps"):
		return a, fmt.Errorf("--steps goes with --sweep")
	case a.kind == "sweep" && c.IsSet("lease"):
		return a, fmt.Errorf("--lease: a sweep sets the lease of each row to --pause divided by the ratio")
	}
	locks, err := list(c.String("locks"), "setnx", client.LockNames(), "--locks")
	if err != nil {
		return a, err
	}
	defPauses := "sigstop,sleep,stop"
	if a.kind == "sweep" {
		defPauses = "sigstop"
	}
	pauses, err := list(c.String("pauses"), defPauses, compare.PauseKinds(), "--pauses")
	if err != nil {
		return a, err
	}
	fencing, err := fencingOf(c.String("fencing"), a.kind == "sweep")
	if err != nil {
		return a, err
	}
	switch a.kind {
	case "reference":
		a.setups = compare.Reference(faults)
	case "grid":
		a.setups = compare.Grid(faults, locks, pauses, fencing, c.Duration("lease"))
	case "sweep":
		if slices.Contains(pauses, compare.PauseNone) {
			return a, fmt.Errorf("--pauses none: a sweep of the pause/lease ratio needs pauses")
		}
		lo, hi, err := compare.ParseSweep(sweep)
		if err != nil {
			return a, err
		}
		if c.Int("steps") < 1 {
			return a, fmt.Errorf("--steps must be at least 1, not %d", c.Int("steps"))
		}
		a.setups = compare.Sweep(faults, locks, pauses, fencing, compare.Ratios(lo, hi, c.Int("steps")))
	}
	// Every run is checked now, so that a bad flag stops the comparison
	// before the first run rather than in the middle.
	for _, s := range a.setups {
		if err := a.config(s, 0).validate(); err != nil {
			return a, fmt.Errorf("%s: %w", s.Short(), err)
		}
	}
	return a, nil
}

// list splits a comma-separated flag value, default def, and checks each
// item is one of valid.
func list(v, def string, valid []string, flag string) ([]string, error) {
	if v == "" {
		v = def
	}
	var out []string
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if !slices.Contains(valid, item) {
			return nil, fmt.Errorf("%s %q: want a comma-separated list of %s", flag, item, strings.Join(valid, ", "))
		}
		if !slices.Contains(out, item) {
			out = append(out, item)
		}
	}
	return out, nil
}

func fencingOf(v string, sweep bool) ([]bool, error) {
	if v == "" {
		v = "off"
		if sweep {
			v = "both"
		}
	}
	switch v {
	case "off":
		return []bool{false}, nil
	case "on":
		return []bool{true}, nil
	case "both":
		return []bool{false, true}, nil
	}
	return nil, fmt.Errorf("--fencing %q: want off, on or both", v)
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
		parts = append(parts, fmt.Sprintf("--%s %v", name, c.Value(name)))
	}
	return strings.Join(parts, " ")
}

// config is the configuration of run i of a row.
func (a compareArgs) config(s compare.Setup, i int) runConfig {
	cfg := a.base
	cfg.Name = a.name + "-" + s.Slug()
	cfg.Lock, cfg.Lease, cfg.Fenced, cfg.Pause, cfg.Interval = s.Lock, s.Lease, s.Fenced, s.PauseLen, s.Interval
	cfg.Seed = a.base.Seed + int64(i)
	switch s.Pause {
	case compare.PauseSigStop:
		cfg.Nemesis = "sigstop"
	case compare.PauseSleep, compare.PauseStop:
		cfg.InjectEvery, cfg.PauseKind = s.Every, s.Pause
	}
	return cfg
}

// runCompare runs the comparison a, showing progress on stderr, and writes
// its table, printing it to stdout. An interrupted comparison writes what
// it had.
func runCompare(ctx context.Context, a compareArgs, stdout, stderr io.Writer) error {
	start := time.Now()
	// One pair of servers for the whole grid: starting PostgreSQL for each
	// run would cost more than some runs.
	if a.base.RedisURL == "" {
		s, err := servers.StartRedis(ctx)
		if err != nil {
			return usageErrorf("throwaway redis-server: %w", err)
		}
		defer s.Stop()
		a.base.RedisURL = s.URL
	}
	if a.base.PostgresURL == "" {
		s, err := servers.StartPostgres(ctx)
		if err != nil {
			return usageErrorf("throwaway PostgreSQL: %w", err)
		}
		defer s.Stop()
		a.base.PostgresURL = s.URL
	}
	versions, err := serverVersions(ctx, a.base.RedisURL, a.base.PostgresURL)
	if err != nil {
		return usageError(err)
	}
	dir, err := compare.CreateDir(a.base.Store, a.name, start)
	if err != nil {
		return err
	}
	t := &compare.Table{Kind: a.kind, Command: a.command, Started: start, Versions: versions,
		Workers: a.base.Workers, Limit: a.base.TimeLimit, Work: a.base.Work, Runs: a.runs}
	// A run takes its time limit, plus the workers' start and the check.
	guess := a.base.TimeLimit + time.Second
	runs := "runs"
	if a.runs == 1 {
		runs = "run"
	}
	fmt.Fprintf(stderr, "compare: %d rows × %d %s, about %v, into %s\n", len(a.setups), a.runs, runs,
		(guess * time.Duration(len(a.setups)*a.runs)).Round(time.Second), dir)

	show := newProgress(stderr)
	runErr := compare.Run(ctx, t, a.setups, func(ctx context.Context, s compare.Setup, i int) (compare.Figures, error) {
		cfg := a.config(s, i)
		cfg.Store = dir // the cells live in their comparison's directory, not among the store's runs
		res, err := runTest(ctx, cfg, io.Discard)
		if err != nil {
			return compare.Figures{}, err
		}
		f := compare.FiguresOf(res.results, res.ops)
		f.Dir, f.Seed = res.dir, cfg.Seed
		return f, nil
	}, guess, show.report)
	show.end()

	if err := compare.Write(dir, t); err != nil {
		return err
	}
	stdout.Write(t.Markdown())
	fmt.Fprintf(stdout, "\n%s: %s, %s, %s, %s, %s, %s\n", dir, compare.TableMarkdown, compare.TableCSV,
		compare.TableJSON, compare.PlotPNG, compare.PlotSVG, compare.RunList)
	switch {
	case ctx.Err() != nil:
		return &exitError{code: exitInterrupted, err: fmt.Errorf("comparison interrupted; what was done is in %s", dir)}
	case runErr != nil:
		return fmt.Errorf("comparison stopped; what was done is in %s: %w", dir, runErr)
	}
	return nil
}

// serverVersions names the servers, for the table's caption.
func serverVersions(ctx context.Context, redisURL, postgresURL string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rdb, err := redisClient(redisURL, 1, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer rdb.Close()
	info, err := rdb.InfoMap(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("cannot reach Redis at %s: %v", redact(redisURL), err)
	}
	db, err := postgresPool(ctx, postgresURL, 1, "hiatus-compare")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var pg string
	if err := db.QueryRow(ctx, `SHOW server_version`).Scan(&pg); err != nil {
		return "", fmt.Errorf("cannot reach PostgreSQL at %s: %v", redact(postgresURL), err)
	}
	pg, _, _ = strings.Cut(pg, " ")
	return fmt.Sprintf("Redis %s, PostgreSQL %s", info["Server"]["redis_version"], pg), nil
}

// A progress shows where a comparison stands: on a terminal, one line
// rewritten in place; elsewhere, a line per finished run.
type progress struct {
	w   io.Writer
	tty bool
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w)}
}

func (p *progress) report(pr compare.Progress) {
	if p.tty {
		if pr.Finished == nil {
			fmt.Fprintf(p.w, "\r\033[Krow %d/%d, run %d/%d (%s), ~%v left", pr.Row, pr.Rows, pr.Run, pr.Runs,
				pr.Setup.Short(), pr.Left.Round(time.Second))
		}
		return
	}
	if f := pr.Finished; f != nil {
		fmt.Fprintf(p.w, "row %d/%d, run %d/%d (%s): writes %d, lost %s, overlapping-sections %d, stale-rejected %d, valid? %s  %s; ~%v left\n",
			pr.Row, pr.Rows, pr.Run, pr.Runs, pr.Setup.Short(), f.Writes, f.LostText(), f.Overlapping, f.Rejected, f.Valid,
			f.Dir, pr.Left.Round(time.Second))
	}
}

// end clears the progress line.
func (p *progress) end() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
