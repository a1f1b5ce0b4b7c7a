package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// runConfig is everything a run is made of; test.edn records it whole.
type runConfig struct {
	Name        string
	Workers     int
	TimeLimit   time.Duration
	Lease       time.Duration
	Work        time.Duration
	Retry       time.Duration
	OpTimeout   time.Duration
	Nemesis     string // none, or a comma-separated list of nemeses
	RedisPID    int    // of an external Redis, for pause-redis
	PostgresPID int    // of an external PostgreSQL's postmaster, for pause-postgres
	Pause       time.Duration
	Interval    time.Duration
	InjectEvery int
	PauseKind   string // of the in-section pause: sleep or stop
	Lock        string // the lock under test, by client.LockNames
	Fenced      bool
	Seed        int64
	RedisURL    string
	PostgresURL string
	Store       string
	CounterID   int64
}

func runFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "name", Value: "lock-counter", Usage: "test name: runs go to STORE/NAME/START-TIME/"},
		&cli.IntFlag{Name: "workers", Value: 3, Usage: "worker processes contending for the lock"},
		&cli.DurationFlag{Name: "time-limit", Value: 10 * time.Second, Usage: "how long workers start new critical sections"},
		&cli.DurationFlag{Name: "lease", Value: 500 * time.Millisecond, Usage: "lock lease (SET … PX)"},
		&cli.DurationFlag{Name: "work", Value: 20 * time.Millisecond, Usage: "simulated work between the read and the write"},
		&cli.DurationFlag{Name: "retry", Value: 5 * time.Millisecond, Usage: "wait between attempts to acquire the lock"},
		&cli.DurationFlag{Name: "op-timeout", Value: 5 * time.Second, Usage: "bound on each read, write and release; a timeout is an :info op"},
		&cli.StringFlag{Name: "nemesis", Value: "sigstop", Usage: "faults, every --interval one of them for --pause: none, or a comma-separated list of " +
			"sigstop (SIGSTOP a random worker), pause-redis, pause-postgres (SIGSTOP the server), kill-redis (SIGKILL, restart empty), " +
			"kill-postgres (immediate shutdown, restart), kill-worker (SIGKILL a worker, start a new one)"},
		&cli.IntFlag{Name: "redis-pid", Usage: "PID of the --redis-url server, for --nemesis pause-redis"},
		&cli.IntFlag{Name: "postgres-pid", Usage: "PID of the --postgres-url server's postmaster, for --nemesis pause-postgres"},
		&cli.DurationFlag{Name: "pause", Value: 800 * time.Millisecond, Usage: "how long each pause lasts (SIGSTOP and in-section)"},
		&cli.DurationFlag{Name: "interval", Value: 700 * time.Millisecond, Usage: "time between the end of one SIGSTOP pause and the start of the next"},
		&cli.IntFlag{Name: "inject-every", Usage: "pause each worker inside its every Nth critical section (after the read, before the write) for --pause; 0 = never"},
		&cli.StringFlag{Name: "pause-kind", Value: "sleep", Usage: "the in-section pause: sleep (only the worker's goroutine blocks) or stop (the worker SIGSTOPs its whole process)"},
		&cli.StringFlag{Name: "lock", Value: "setnx", Usage: "the lock under test: " + strings.Join(client.LockNames(), ", ")},
		&cli.BoolFlag{Name: "fenced", Usage: "write with a fencing token (Redis INCR), which Postgres checks: UPDATE … WHERE fence < $n"},
		&cli.Int64Flag{Name: "seed", Usage: "seed of the nemesis's choices, to replay a schedule", DefaultText: "from the clock, recorded in test.edn"},
		&cli.StringFlag{Name: "redis-url", EnvVars: []string{"HIATUS_REDIS_URL"}, Usage: "use this Redis (redis://host:port/db) instead of a throwaway redis-server"},
		&cli.StringFlag{Name: "postgres-url", EnvVars: []string{"HIATUS_POSTGRES_URL"}, Usage: "use this PostgreSQL instead of a throwaway one; it must allow CREATE TABLE"},
		&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
		&cli.Int64Flag{Name: "counter-id", Value: 1, Usage: "row of the counter table this run uses (runs sharing a server need distinct rows and names)"},
	}
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
			cfg := runConfig{
				Name: c.String("name"), Workers: c.Int("workers"), TimeLimit: c.Duration("time-limit"),
				Lease: c.Duration("lease"), Work: c.Duration("work"), Retry: c.Duration("retry"),
				OpTimeout: c.Duration("op-timeout"), Nemesis: c.String("nemesis"), Pause: c.Duration("pause"),
				Interval: c.Duration("interval"), InjectEvery: c.Int("inject-every"), Fenced: c.Bool("fenced"),
				PauseKind: c.String("pause-kind"), Lock: c.String("lock"),
				RedisPID: c.Int("redis-pid"), PostgresPID: c.Int("postgres-pid"),
				Seed: c.Int64("seed"), RedisURL: c.String("redis-url"), PostgresURL: c.String("postgres-url"),
				Store: c.String("store"), CounterID: c.Int64("counter-id"),
			}
			if !c.IsSet("seed") {
				cfg.Seed = time.Now().UnixNano()
			}
			if err := cfg.validate(); err != nil {
				return usageError(err)
			}
			// The first SIGINT or SIGTERM ends the run: workers finish their
			// sections, the history and results are written. A second one
			// ends it at once: no waiting for workers. Either way no process
			// is left stopped and the servers are removed.
			ctx, interrupt := context.WithCancel(c.Context)
			defer interrupt()
			hard, hardStop := context.WithCancel(context.Background())
			defer hardStop()
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			go func() {
				for _, stop := range []context.CancelFunc{interrupt, hardStop} {
					select {
					case <-sigs:
						stop()
					case <-hard.Done():
						return
					}
				}
			}()
			res, err := runTestUntil(ctx, hard, cfg, c.App.Writer)
			if err != nil {
				return err
			}
			if ctx.Err() != nil {
				return &exitError{code: exitInterrupted, err: fmt.Errorf("run interrupted; the history up to then is in %s", res.dir)}
			}
			return verdictExit(res.results.Valid.ExitCode())
		},
	}
}

// exitInterrupted is the status of a run ended by SIGINT or SIGTERM, as a
// shell reports a process ended by SIGINT.
const exitInterrupted = 130

func (c runConfig) validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("--workers must be at least 1, not %d", c.Workers)
	case c.TimeLimit <= 0:
		return fmt.Errorf("--time-limit must be positive, not %v", c.TimeLimit)
	case c.Lease <= 0:
		return fmt.Errorf("--lease must be positive, not %v", c.Lease)
	case c.Lease%time.Millisecond != 0:
		return fmt.Errorf("--lease must be whole milliseconds (SET … PX), not %v", c.Lease)
	case c.Work < 0 || c.Retry < 0 || c.Pause < 0 || c.Interval < 0:
		return fmt.Errorf("--work, --retry, --pause and --interval cannot be negative")
	case c.OpTimeout <= 0:
		return fmt.Errorf("--op-timeout must be positive, not %v", c.OpTimeout)
	case c.Pause > c.TimeLimit:
		return fmt.Errorf("--pause %v is longer than --time-limit %v", c.Pause, c.TimeLimit)
	case c.InjectEvery < 0:
		return fmt.Errorf("--inject-every cannot be negative")
	case c.InjectEvery > 0 && c.Pause <= 0:
		return fmt.Errorf("--inject-every needs a positive --pause")
	case c.PauseKind != "sleep" && c.PauseKind != "stop":
		return fmt.Errorf("--pause-kind %q: want sleep or stop", c.PauseKind)
	case !slices.Contains(client.LockNames(), c.Lock):
		return fmt.Errorf("--lock %q: want one of %s", c.Lock, strings.Join(client.LockNames(), ", "))
	case c.Name == "" || c.Name == "latest" || strings.ContainsAny(c.Name, `/\`):
		return fmt.Errorf("--name %q: want a plain name", c.Name)
	}
	faults := c.faultNames()
	for _, f := range faults {
		if !slices.Contains(nemesisNames(), f) {
			return fmt.Errorf("--nemesis %q: want none or a comma-separated list of %s", f, strings.Join(nemesisNames(), ", "))
		}
		if c.Pause <= 0 {
			return fmt.Errorf("--nemesis %s needs a positive --pause", f)
		}
		if strings.HasPrefix(f, "kill-") && f != "kill-worker" {
			if url := map[string]string{"kill-redis": c.RedisURL, "kill-postgres": c.PostgresURL}[f]; url != "" {
				return fmt.Errorf("--nemesis %s restarts the server: it works on the throwaway server only, not on --%s-url",
					f, strings.TrimPrefix(f, "kill-"))
			}
		}
	}
	if slices.Contains(faults, "pause-redis") && c.RedisURL != "" && c.RedisPID == 0 {
		return fmt.Errorf("--nemesis pause-redis with --redis-url needs --redis-pid")
	}
	if slices.Contains(faults, "pause-postgres") && c.PostgresURL != "" && c.PostgresPID == 0 {
		return fmt.Errorf("--nemesis pause-postgres with --postgres-url needs --postgres-pid (the postmaster's)")
	}
	for _, u := range []string{c.RedisURL, c.PostgresURL} {
		if u == "" {
			continue
		}
		if _, err := url.Parse(u); err != nil {
			return fmt.Errorf("bad server URL: %v", redactErr(err))
		}
	}
	return nil
}

// nemesisNames are the faults --nemesis takes.
func nemesisNames() []string {
	return []string{"sigstop", "pause-redis", "pause-postgres", "kill-redis", "kill-postgres", "kill-worker"}
}

// faultNames returns the faults of --nemesis, none for "none".
func (c runConfig) faultNames() []string {
	var out []string
	for _, f := range strings.Split(c.Nemesis, ",") {
		if f = strings.TrimSpace(f); f != "" && f != "none" {
			out = append(out, f)
		}
	}
	return out
}

// redact hides a URL's password, for logs and test.edn.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		// A key=value connection string (host=… password=…), or none.
		return dsnPassword.ReplaceAllString(raw, "${1}xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// dsnPassword finds the password of a key=value connection string.
var dsnPassword = regexp.MustCompile(`(password\s*=\s*)('[^']*'|\S+)`)

// redactErr drops the URL from url.Parse errors, which quote it whole.
func redactErr(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// A runResult is what a finished run leaves.
type runResult struct {
	dir     string
	ops     []history.Op
	results checker.Results
}

// runTest runs the experiment described by cfg and returns its checked
// history. It always resumes and ends every process it started, and removes
// the throwaway servers, whatever ends it.
func runTest(ctx context.Context, cfg runConfig, out io.Writer) (*runResult, error) {
	return runTestUntil(ctx, context.Background(), cfg, out)
}

// runTestUntil is runTest that stops waiting for the workers to finish their
// sections once hard ends.
func runTestUntil(ctx, hard context.Context, cfg runConfig, out io.Writer) (*runResult, error) {
	// The servers outlive an interrupt of the run: the history is finished
	// (final read, results) after it.
	bg := context.WithoutCancel(ctx)
	env, err := startEnv(bg, &cfg, out)
	if err != nil {
		return nil, err
	}
	defer env.close()

	start, err := client.ServerTime(bg, env.rdb)
	if err != nil {
		return nil, usageErrorf("redis at %s: %v", redact(cfg.RedisURL), err)
	}
	run, err := store.Create(cfg.Store, cfg.Name, start)
	if err != nil {
		return nil, err
	}
	lg, err := newRunLog(run, out)
	if err != nil {
		return nil, err
	}
	defer lg.close()
	if err := run.WriteFile(store.Test, testEDN(cfg, start)); err != nil {
		return nil, err
	}
	lg.printf("run %s: %s", run.Dir, cfg.describe())
	env.logServers(run, cfg, lg)

	journal, err := os.OpenFile(run.Path(store.Journal), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	defer journal.Close()
	col := newCollector(journal, cfg.Workers)
	clock := client.NewRedisClock(env.rdb, start)

	workers, err := startWorkers(cfg, start, col, clock, lg)
	defer workers.kill() // on every path: resume and end them
	if err != nil {
		return nil, err
	}

	// Workers stop starting sections at the deadline; the nemesis stops then.
	rctx, cancel := context.WithDeadline(ctx, workers.deadline)
	defer cancel()
	freezer := &nemesis.Freezer{}
	defer freezer.ResumeAll()
	nemDone := make(chan error, 1)
	if faults := env.faults(cfg, workers, freezer); len(faults) > 0 {
		sched := &nemesis.Schedule{Faults: faults, Pause: cfg.Pause, Interval: cfg.Interval,
			Rand: rand.New(rand.NewSource(cfg.Seed)), Clock: clock, Record: func(o history.Op) {
				lg.logf("nemesis: %s %s", o.F, history.AppendValue(nil, o.Value))
				col.record(o)
			}}
		go func() { nemDone <- sched.Run(rctx) }()
	} else {
		close(nemDone)
	}
	<-rctx.Done()
	if ctx.Err() != nil {
		// Interrupted: the workers stop starting sections now, not at the
		// deadline. (A terminal's Ctrl-C reaches them too.)
		lg.printf("interrupted: stopping the workers")
		workers.signal(syscall.SIGTERM)
	}
	if err := <-nemDone; err != nil {
		lg.printf("nemesis: %v", err)
	}
	freezer.ResumeAll()
	workers.wait(hard, cfg.Pause+2*cfg.OpTimeout+5*time.Second)
	col.wait()

	final(bg, clock, env.counter, col, cfg.Workers)
	ops := col.sorted()
	env.resolveInfo(bg, cfg, ops, lg)
	if err := writeHistory(run, ops); err != nil {
		return nil, err
	}
	res := analyze(ops)
	if err := run.WriteFile(store.Results, res.AppendEDN(nil)); err != nil {
		return nil, err
	}
	printSummary(out, cfg, run.Dir, res)
	lg.logf("results: valid? %v", res.Valid)
	return &runResult{dir: run.Dir, ops: ops, results: res}, nil
}

// analyze is the one place run and check get a verdict from.
func analyze(ops []history.Op) checker.Results {
	rs, err := checker.Check(context.Background(), ops, checker.Options{Model: checker.ModelLockCounter})
	if err != nil {
		// Only bad options fail, and these are fixed: a bug of hiatus.
		rs.Add(checker.Result{Name: "check", Valid: checker.Unknown, Explanation: err.Error()})
	}
	return rs
}

// final records the read of the counter after every worker has stopped, by
// a process of its own.
func final(ctx context.Context, clock client.Clock, c *client.Counter, col *collector, workers int) {
	p := col.maxProcess() + 1
	if p < history.Process(workers) {
		p = history.Process(workers)
	}
	extra := map[history.Keyword]any{history.KeyFinal: true}
	col.record(history.Op{Index: history.Unset, Time: clock.Now(ctx), Type: history.Invoke, Process: p, F: history.FRead, Extra: extra})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	v, _, err := c.Read(rctx)
	cancel()
	o := history.Op{Index: history.Unset, Time: clock.Now(ctx), Type: history.Ok, Process: p, F: history.FRead, Value: v, Extra: extra}
	if err != nil {
		o.Type, o.Value, o.Error = history.Fail, nil, err.Error()
	}
	col.record(o)
}

func writeHistory(run store.Run, ops []history.Op) error {
	var buf []byte
	for _, o := range ops {
		buf = history.AppendOp(buf, o)
		buf = append(buf, '\n')
	}
	return run.WriteFile(store.History, buf)
}

// A collector gathers ops from every worker and the nemesis: each is
// appended to the journal as it arrives (so a crash leaves what happened up
// to then), and kept for the sorted history.
type collector struct {
	mu      sync.Mutex
	journal *history.Writer
	ops     []history.Op
	current []atomic.Int64 // per worker slot: the process it records as now
	pending []*history.Op  // per worker slot: its open invocation, if any
	resume  func(slot int) // sends SIGCONT to the worker in slot
	wg      sync.WaitGroup // the workers' readers
}

func newCollector(journal io.Writer, workers int) *collector {
	c := &collector{journal: history.NewWriter(journal), current: make([]atomic.Int64, workers),
		pending: make([]*history.Op, workers)}
	for i := range c.current {
		c.current[i].Store(int64(i))
	}
	return c
}

// record takes one op; safe for concurrent use.
func (c *collector) record(o history.Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, o)
	// A journal that cannot be written loses only the crash copy; the
	// history is still written from memory at the end.
	if c.journal.Write(o) == nil {
		_ = c.journal.Flush()
	}
}

// read takes the ops a worker prints until its output ends.
func (c *collector) read(slot int, r io.Reader, lg *runLog) {
	defer c.wg.Done()
	hr := history.NewReader(r, fmt.Sprintf("worker %d output", slot))
	for {
		o, err := hr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			lg.logf("worker %d: %v", slot, err)
			return
		}
		if o.IsClient() {
			c.current[slot].Store(int64(o.Process))
		}
		o.Index = history.Unset // the reader numbers ops within this one stream
		c.record(o)
		if o.IsClient() {
			c.mu.Lock()
			if o.Type == history.Invoke {
				c.pending[slot] = &o
			} else {
				c.pending[slot] = nil
			}
			c.mu.Unlock()
		}
		if v, ok := o.Value.(map[history.Keyword]any); ok && o.F == history.FPause && v["kind"] == nemesis.KindStop {
			ms, _ := history.Int(v["ms"])
			c.resumeAfter(slot, time.Duration(ms)*time.Millisecond)
		}
	}
}

func (c *collector) wait() { c.wg.Wait() }

// crashed completes the open invocation of the worker in slot, killed at
// time t, as :info: it may or may not have taken effect.
func (c *collector) crashed(slot int, t int64) {
	c.mu.Lock()
	inv := c.pending[slot]
	c.pending[slot] = nil
	c.mu.Unlock()
	if inv == nil {
		return
	}
	c.record(history.Op{Index: history.Unset, Time: t, Type: history.Info, Process: inv.Process,
		F: inv.F, Value: inv.Value, Error: history.ErrKilled, Extra: inv.Extra})
}

// resumeAfter sends SIGCONT to the worker in slot after d: the worker has
// stopped itself (an in-section pause of kind stop) and cannot wake alone.
func (c *collector) resumeAfter(slot int, d time.Duration) {
	if c.resume != nil {
		time.AfterFunc(d, func() { c.resume(slot) })
	}
}

func (c *collector) maxProcess() history.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := history.Process(-1)
	for _, o := range c.ops {
		if o.IsClient() && o.Process > m {
			m = o.Process
		}
	}
	return m
}

// sorted returns the ops ordered by time, with dense indexes from 0. Ops of
// equal time keep their arrival order, so a process's own ops stay in order.
func (c *collector) sorted() []history.Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := append([]history.Op(nil), c.ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Time < ops[j].Time })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

// env holds the servers and clients of a run.
type env struct {
	rdb     *redis.Client
	db      *pgxpool.Pool
	counter *client.Counter
	stops   []func() error

	// The throwaway servers, nil for servers given by URL.
	redis, postgres *servers.Server
}

func (e *env) close() {
	if e.rdb != nil {
		e.rdb.Close()
	}
	if e.db != nil {
		e.db.Close()
	}
	for i := len(e.stops) - 1; i >= 0; i-- {
		_ = e.stops[i]()
	}
}
