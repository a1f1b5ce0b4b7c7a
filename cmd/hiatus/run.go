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
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/urfave/cli/v2"
)

// sharedFlags are the flags `run` and `compare` both take, with the same
// defaults: how long and how hard each run works, and where it runs.
func sharedFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "workers", Value: harness.DefaultWorkers, Usage: "worker processes contending for the lock"},
		&cli.DurationFlag{Name: "time-limit", Value: harness.DefaultTimeLimit, Usage: "how long workers start new critical sections"},
		&cli.DurationFlag{Name: "work", Value: harness.DefaultWork, Usage: "simulated work between the read and the write"},
		&cli.DurationFlag{Name: "retry", Value: harness.DefaultRetry, Usage: "wait between attempts to acquire the lock"},
		&cli.DurationFlag{Name: "op-timeout", Value: harness.DefaultOpTimeout, Usage: "bound on each read, write and release; a timeout is an :info op"},
		&cli.DurationFlag{Name: "pause", Value: harness.DefaultPause, Usage: "how long each pause lasts (SIGSTOP and in-section)"},
		&cli.DurationFlag{Name: "interval", Value: harness.DefaultInterval, Usage: "time between the end of one SIGSTOP pause and the start of the next"},
		&cli.StringFlag{Name: "redis-url", EnvVars: []string{"HIATUS_REDIS_URL"}, Usage: "use this Redis (redis://host:port/db) instead of a throwaway redis-server"},
		&cli.StringFlag{Name: "postgres-url", EnvVars: []string{"HIATUS_POSTGRES_URL"}, Usage: "use this PostgreSQL instead of a throwaway one; it must allow CREATE TABLE"},
		&cli.StringFlag{Name: "store", Value: harness.DefaultStore, Usage: "directory where runs are kept"},
		&cli.Int64Flag{Name: "counter-id", Value: harness.DefaultCounterID, Usage: "row of the counter table the runs use (runs sharing a server need distinct rows and names)"},
		&cli.StringFlag{Name: "hosts", Value: "local", Usage: "where the workers and the servers under test run: local (this machine), or netns (each on a host of its own, a network namespace on a private bridge, where partitions act in the kernel; needs root, and --nemesis isolate needs it)"},
	}
}

// sharedConfig is the configuration sharedFlags set; the rest is defaults.
func sharedConfig(c *cli.Context) harness.Config {
	cfg := harness.DefaultConfig()
	cfg.Workers, cfg.TimeLimit, cfg.Work = c.Int("workers"), c.Duration("time-limit"), c.Duration("work")
	cfg.Retry, cfg.OpTimeout, cfg.Pause, cfg.Interval = c.Duration("retry"), c.Duration("op-timeout"), c.Duration("pause"), c.Duration("interval")
	cfg.RedisURL, cfg.PostgresURL = c.String("redis-url"), c.String("postgres-url")
	cfg.Store, cfg.CounterID, cfg.Hosts = c.String("store"), c.Int64("counter-id"), c.String("hosts")
	if c.IsSet("seed") {
		cfg.Seed = c.Int64("seed")
	}
	return cfg
}

func runFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "name", Value: harness.DefaultName, Usage: "test name: runs go to STORE/NAME/START-TIME/"},
		&cli.DurationFlag{Name: "lease", Value: harness.DefaultLease, Usage: "lock lease (SET … PX)"},
		&cli.StringFlag{Name: "nemesis", Value: harness.DefaultNemesis, Usage: "faults, every --interval one of them for --pause: none, or a comma-separated list of " +
			"sigstop (SIGSTOP a random worker), pause-redis, pause-postgres (SIGSTOP the server), kill-redis (SIGKILL, restart empty), " +
			"kill-postgres (immediate shutdown, restart), kill-worker (SIGKILL a worker, start a new one), " +
			"restart (SIGKILL one of the lock's Redis nodes, restart it empty), clock (step a lock node's clock by --clock-jump), " +
			"partition-redis, partition-redis-majority, partition-postgres (cut a worker from the lock's nodes — a minority or a majority of several — or from PostgreSQL), " +
			"delay-redis, delay-postgres (every byte on those links arrives --delay late), " +
			"drop-redis, drop-postgres (reset those links' connections), failover (the lock's Redis primary cut off from its replica and sentinels), " +
			"isolate (a worker's host cut off from the network; --hosts netns); a+b: a sequence, b begun --pause/2 after a. See docs/nemesis.md"},
		&cli.IntFlag{Name: "nodes", Usage: "independent Redis nodes of --lock redlock (a majority must grant)", DefaultText: fmt.Sprint(harness.DefaultNodes)},
		&cli.DurationFlag{Name: "clock-jump", Usage: "how far --nemesis clock steps a node's clock: forward, or back when negative (-500ms)", DefaultText: "the lease"},
		&cli.DurationFlag{Name: "clock-strobe", Usage: "with --nemesis clock, step the clock back and forth this often while the fault lasts (a strobing clock); 0 for one step"},
		&cli.DurationFlag{Name: "delay", Usage: "what --nemesis delay-* adds to each byte's trip", DefaultText: "the lease"},
		&cli.IntFlag{Name: "redis-pid", Usage: "PID of the --redis-url server, for --nemesis pause-redis"},
		&cli.IntFlag{Name: "postgres-pid", Usage: "PID of the --postgres-url server's postmaster, for --nemesis pause-postgres"},
		&cli.IntFlag{Name: "inject-every", Usage: "pause each worker inside its every Nth critical section (after the read, before the write) for --pause; 0 = never"},
		&cli.StringFlag{Name: "pause-kind", Value: harness.DefaultPauseKind, Usage: "the in-section pause: sleep (only the worker's goroutine blocks) or stop (the worker SIGSTOPs its whole process)"},
		&cli.StringFlag{Name: "lock", Value: harness.DefaultLock, Usage: "the lock under test: " + strings.Join(client.LockNames(), ", ")},
		&cli.BoolFlag{Name: "fenced", Usage: "write with a fencing token (Redis INCR), which Postgres checks: UPDATE … WHERE fence < $n (= --guard fence)"},
		&cli.StringFlag{Name: "guard", Usage: "what Postgres checks before a write lands: none; fence (the token, at the write); " +
			"fence-rmw (the token at the read and the write: the whole read-modify-write); cas (UPDATE … WHERE value = $read)", DefaultText: "none, or fence with --fenced"},
		&cli.Int64Flag{Name: "seed", Usage: "seed of the nemesis's choices, to replay a schedule", DefaultText: "from the clock, recorded in test.edn"},
		&cli.StringFlag{Name: "schedule", Usage: "inject the faults of `FILE` (a run's schedule.edn), each at its time, instead of drawing them; --nemesis defaults to their kinds"},
	}, sharedFlags()...)
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
			cfg := sharedConfig(c)
			cfg.Name, cfg.Lease, cfg.Nemesis = c.String("name"), c.Duration("lease"), c.String("nemesis")
			cfg.InjectEvery, cfg.Fenced, cfg.PauseKind, cfg.Lock = c.Int("inject-every"), c.Bool("fenced"), c.String("pause-kind"), c.String("lock")
			cfg.RedisPID, cfg.PostgresPID = c.Int("redis-pid"), c.Int("postgres-pid")
			cfg.Guard = client.Guard(c.String("guard"))
			cfg.Nodes, cfg.ClockJump, cfg.Delay = c.Int("nodes"), c.Duration("clock-jump"), c.Duration("delay")
			cfg.ClockStrobe = c.Duration("clock-strobe")
			if f := c.String("schedule"); f != "" {
				b, err := history.ReadRegular(f)
				if err != nil {
					return usageErrorf("--schedule: %v", err)
				}
				if cfg.Plan, err = nemesis.ParsePlan(string(b)); err != nil {
					return usageErrorf("--schedule %s: %v", f, err)
				}
				if !c.IsSet("nemesis") {
					cfg.Nemesis = strings.Join(cfg.Plan.Kinds(), ",")
				}
			}
			return runOnce(c.Context, cfg, c)
		},
	}
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
