// Package harness runs one experiment: Config in, a run directory and its
// verdict out. It starts the throwaway servers (or connects to the given
// ones), the worker processes and the nemesis schedule; collects every op
// into the journal as it arrives; makes the final read; settles :info
// writes from the audit table; sorts the journal into history.edn; checks
// it and draws its pictures (report); and writes the run directory
// through store. It is the only package that wires client, nemesis,
// checker, report and store together, and it holds nothing of a run in
// memory but what the check and the pictures keep: the check's records
// past a quarter of a million go to disk, the plots keep a bounded sample,
// the timeline at most 300,000 sections.
//
// A Go program or test runs an experiment on a lock of its own with Run,
// and must let its binary serve as the run's workers: see ServeWorker.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/report"
	"github.com/hiatus-dev/hiatus/store"
)

// A Result is what a finished run leaves.
type Result struct {
	Dir string // the run directory
	// Config is the run's configuration, its server URLs filled in. With
	// a throwaway server's given, a --nemesis random read from it again
	// (FaultNames) allows fewer faults than the run drew from: test.edn's
	// :description names those.
	Config  Config
	Results checker.Results // the checks of its history, as results.edn holds them
	// Interrupted says the context ended the run before its time limit:
	// the history holds what happened until then.
	Interrupted bool
	// Leftover is what the run could not undo after its verdict was
	// reached (a network namespace, a server's directory), nil when all
	// was undone. Namespaces of a process that has ended are removed by
	// the next run, of any kind.
	Leftover error
}

// Watch is how a caller follows a run and cuts it short; none of it is
// part of the experiment, and all of it may be left zero.
type Watch struct {
	// Out takes the run's headlines (where it is kept, interruptions,
	// trouble), as they are written to its hiatus.log; nil drops them.
	Out io.Writer
	// Abort, once closed, stops the wait for workers to finish their
	// sections after the context ended: they are killed at once.
	Abort <-chan struct{}
}

// Run runs the experiment cfg describes and returns its checked history,
// as RunWatched does with nothing watching.
func Run(ctx context.Context, cfg Config) (Result, error) { return Lab{}.Run(ctx, cfg) }

// RunWatched runs the experiment cfg describes and returns its checked history.
// When ctx ends, the workers stop starting sections, and the history up to
// then is finished and checked as usual (Result.Interrupted). Every process
// it started is resumed and ended, and the throwaway servers removed,
// whatever ends it. A *SetupError is a bad Config or a server that cannot
// be had; other errors are faults of the machine (a full disk, say).
func RunWatched(ctx context.Context, cfg Config, watch Watch) (Result, error) {
	return Lab{}.RunWatched(ctx, cfg, watch)
}

func runWatched(ctx context.Context, c Config, watch Watch) (res Result, err error) {
	if os.Getenv(workerEnv) != "" {
		return Result{}, errors.New("this process was started as a hiatus worker, yet runs an experiment: " +
			"call harness.ServeWorker first thing in main, or in TestMain before m.Run")
	}
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	// Read once, as validated: a Config with the throwaway servers' URLs
	// filled in (startEnv, below) would allow a random nemesis fewer
	// faults (none of those that want a throwaway server, or a given
	// one's PID).
	cfg := c.runPlan()
	if err := store.Writable(cfg.Store); err != nil {
		return Result{}, &SetupError{Err: err}
	}
	if watch.Out == nil {
		watch.Out = io.Discard
	}
	// The servers outlive an interrupt of the run: the history is finished
	// (final read, results) after it. An interrupt while they start ends
	// the run before it begins.
	bg := context.WithoutCancel(ctx)
	setup := newSetupLog(cfg, watch.Out)
	env, err := startEnv(ctx, bg, &cfg, setup)
	if ctx.Err() != nil {
		if err == nil {
			return Result{Interrupted: true}, errors.Join(ErrInterrupted, env.close())
		}
		return Result{Interrupted: true}, ErrInterrupted
	}
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if cerr := env.close(); err != nil {
			err = errors.Join(err, cerr)
		} else {
			res.Leftover = cerr
		}
	}()
	probe, err := probeAdapter(bg, cfg, env.topo)
	if err != nil {
		return Result{}, err
	}
	run, start, lg, err := createRun(bg, cfg, env, watch.Out)
	if err != nil {
		return Result{}, err
	}
	defer lg.close()
	setup.replay(lg)
	lg.printf("run %s: %s", run.Dir, cfg.Describe())
	if probe != nil {
		probe.log(lg)
		env.adapterKey = probe.hello.Key
	}
	env.logServers(run, cfg, lg)

	col, err := experiment(ctx, bg, cfg, watch, env, run, start, lg)
	if err != nil {
		return Result{Dir: run.Dir, Config: cfg.Config}, err
	}
	rs, err := finish(bg, cfg, env, run, col, lg)
	res = Result{Dir: run.Dir, Config: cfg.Config, Results: rs, Interrupted: ctx.Err() != nil}
	if err != nil {
		return res, err
	}
	lg.logf("results: valid? %v", rs.Valid)
	return res, nil
}

// createRun makes the run directory of a run of cfg starting now on the
// clock of env's Redis, with its test.edn, and opens its log, whose
// headlines go to out too.
func createRun(ctx context.Context, cfg runPlan, env *env, out io.Writer) (run store.Run, start time.Time, lg *runLog, err error) {
	if start, err = client.ServerTime(ctx, env.rdb); err != nil {
		return run, start, nil, setupErrorf("redis at %s: %v", Redact(cfg.RedisURL), err)
	}
	if run, err = store.Create(cfg.Store, cfg.Name, start); err != nil {
		return run, start, nil, err
	}
	if lg, err = newRunLog(run, out); err != nil {
		return run, start, nil, err
	}
	if err := run.WriteFile(store.Test, testEDN(cfg, start)); err != nil {
		lg.close()
		return run, start, nil, err
	}
	return run, start, lg, nil
}

// openJournal opens the journal of run, and a collector of the ops of
// workers workers and the nemesis into it; the caller closes the file.
func openJournal(run store.Run, workers int) (*collector, *os.File, error) {
	journal, err := run.Append(store.Journal)
	if err != nil {
		return nil, nil, fmt.Errorf("open journal: %w", err)
	}
	return newCollector(journal, workers), journal, nil
}

// experiment runs the workers and the nemesis until the time limit, or
// until ctx ends, and the final read after them; it returns the collector
// that journalled their ops.
func experiment(ctx, bg context.Context, cfg runPlan, watch Watch, env *env, run store.Run, start time.Time, lg *runLog) (*collector, error) {
	col, journal, err := openJournal(run, cfg.Workers)
	if err != nil {
		return nil, err
	}
	defer journal.Close()
	clock := client.NewRedisClock(env.rdb, start)

	// Made here, not by the workers: a worker in a network namespace may
	// run as another user, and the run directory must stay removable.
	metrics, err := run.MakeDir(store.Metrics)
	if err != nil {
		return nil, fmt.Errorf("make the metrics directory: %w", err)
	}
	// The lock server's record begins before the first worker, and ends
	// after the last op: the final read. Stop is idempotent; this one is
	// for the paths that end sooner.
	rec, err := startRecord(ctx, cfg, env, run, start, lg)
	if err != nil {
		return nil, err
	}
	defer rec.Stop(bg)
	env.record = rec
	workers, err := startWorkers(ctx, cfg, start, col, clock, env.topo, lg, metrics)
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
		// A replayed fault that hit a holder waits for its worker to hold
		// again for five sections at the least: with 1 s of work, a
		// second found the other worker holding turn after turn.
		sched := &nemesis.Schedule{Faults: faults, Pause: cfg.Pause, Interval: cfg.Interval, Plan: cfg.Plan, Overlap: cfg.Nemesis == Random,
			HolderWait: cfg.HolderWait(),
			Rand:       rand.New(rand.NewSource(cfg.Seed)), Clock: clock, Record: func(o history.Op) {
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
		// deadline. (Each leads a process group of its own, so a terminal's
		// Ctrl-C reaches only hiatus: this is how they hear of it.)
		lg.printf("interrupted: stopping the workers")
		workers.signal(syscall.SIGTERM)
	}
	if err := <-nemDone; err != nil {
		lg.printf("nemesis: %v", err)
	}
	freezer.ResumeAll()
	workers.wait(watch.Abort, cfg.Pause+2*cfg.OpTimeout+5*time.Second)
	col.wait()
	if err := env.sessionsEnded(bg, cfg, lg); err != nil {
		lg.printf("the final read may miss a write still under way: %v", err)
	}
	final(bg, clock, env.resource, col, cfg.Workers)
	if err := rec.Stop(bg); err != nil {
		// The verdict does not need it: the history is checked as before.
		lg.printf("%v", err)
	}
	return col, nil
}

// finish makes history.edn from the journal, settling :info writes on the
// way, checks it and draws its plots as it goes, and writes results.edn.
// Ops the run could not record are said in the history itself, by an
// :ops-missing event at its end, so that a check of it months later still
// knows it is incomplete.
func finish(ctx context.Context, cfg runPlan, env *env, run store.Run, col *collector, lg *runLog) (checker.Results, error) {
	rd := newReaders(cfg)
	withRecord(cfg, run, rd.stream, lg)
	if err := writeHistory(ctx, cfg, env, run, col, lg, rd); err != nil {
		return checker.Results{}, err
	}
	if rd.perf != nil {
		if err := rd.perf.WritePlots(run.Dir); err != nil {
			lg.printf("plots: %v", err) // the pictures are not worth the verdict
		}
	}
	rd.stream.FlagSections(rd.tl.Kept()) // the timeline colours what the check found
	srv := readServerRecord(run, lg)
	if srv != nil {
		for _, e := range srv.Events {
			rd.tl.AddServer(e)
		}
	}
	rs := analyze(rd.stream, cfg.Model())
	rd.tl.SetFlags(rd.stream.Flagged())
	if err := run.WriteFile(store.Results, rs.AppendEDN(nil)); err != nil {
		return rs, err
	}
	if err := run.WriteFile(store.Schedule, rd.plan.Plan().AppendEDN(nil)); err != nil {
		lg.printf("%s: %v", store.Schedule, err) // a replay needs it; the verdict does not
	}
	// The pictures are not worth the verdict: a failure is logged.
	page := report.TimelinePage{Summary: report.ReadSummary(run.Dir)}
	if rd.stream.Ops() <= linearViewOps && checker.Searched(cfg.Model()) {
		if err := writeLinearView(ctx, run, cfg.Model()); err != nil {
			lg.printf("%s: %v", report.LinearFile, err)
		} else {
			page.Linear = report.LinearFile
		}
	}
	if err := run.WriteWith(report.TimelineFile, func(w io.Writer) error { return rd.tl.WriteHTML(w, page) }); err != nil {
		lg.printf("timeline: %v", err)
	}
	return rs, nil
}

// withRecord gives the check the lock server's record of the run, when
// the run has one (lockserver.edn, written before the history is), so
// that the history's answers are held to it and an invalid verdict says
// which layer broke. A record that cannot be read is logged, and the run
// is checked by its history alone.
func withRecord(cfg runPlan, run store.Run, s *checker.Stream, lg *runLog) {
	path, ok, err := run.Optional(store.LockServer)
	if err != nil || !ok {
		if err != nil {
			lg.printf("%s: %v: the run is checked by its history alone", store.LockServer, err)
		}
		return
	}
	rec, err := checker.ReadRecord(path, cfg.Workers)
	if err == nil {
		err = s.SetRecord(rec)
	}
	if err != nil {
		lg.printf("%s: %v: the run is checked by its history alone", store.LockServer, err)
	}
}

// readers are what reads the history as history.edn is written: the
// check, the plots (none when perf is nil), the timeline and the schedule
// a replay injects.
type readers struct {
	stream *checker.Stream
	perf   *report.Perf
	tl     *report.Timeline
	plan   nemesis.PlanRecorder
}

func newReaders(cfg runPlan) *readers {
	rd := &readers{stream: checker.NewStream(), tl: &report.Timeline{Workers: cfg.Workers}}
	if !cfg.NoPlots {
		rd.perf = report.NewPerf()
	}
	return rd
}

func (rd *readers) add(o history.Op) {
	rd.stream.Add(o)
	if rd.perf != nil {
		rd.perf.Add(o)
	}
	rd.tl.Add(o)
	rd.plan.Add(o)
}

// writeHistory makes history.edn from the journal, sorted by time, its
// :info writes settled from the audit table, and hands each op to rd as it
// writes it. Ops the run could not record are said in the history itself,
// by an :ops-missing event at its end.
func writeHistory(ctx context.Context, cfg runPlan, env *env, run store.Run, col *collector, lg *runLog, rd *readers) error {
	ops, _, infoWrites, jerr := col.stats()
	var missing []string
	if jerr != nil {
		// What the journal took is still sorted and checked below.
		lg.printf("%v: the history lacks the ops after it", jerr)
		missing = append(missing, jerr.Error()+": the ops after it")
	}
	for _, perr := range col.protocolErrors() {
		missing = append(missing, fmt.Sprintf("%v: the worker's later ops", perr))
	}
	asked, audited := env.settle(ctx, cfg, infoWrites, lg)
	if ops >= longHistory {
		// Sorting, writing and checking take about 2 s a million ops:
		// say so, rather than fall silent.
		lg.printf("making history.edn from %d ops and checking it", ops)
	}
	out, err := run.Create(store.History)
	if err != nil {
		return err
	}
	w := history.NewWriter(out)
	rd.stream.Grow(ops)
	settled, n, last := 0, 0, int64(0)
	add := func(o history.Op) error {
		rd.add(o)
		n, last = n+1, max(last, o.Time)
		return w.Write(o)
	}
	// Its files go where a run killed in the middle leaves nothing behind:
	// the next run removes a scratch directory whose owner is gone.
	scratch, err := servers.ScratchDir("sort")
	if err != nil {
		return fmt.Errorf("sort the journal: %w", err)
	}
	defer os.RemoveAll(scratch)
	// A journal the disk refused may end inside an op: it ends there.
	err = history.SortFile(ctx, run.Path(store.Journal), history.SortOptions{Partial: jerr != nil, Dir: scratch}, func(o history.Op) error {
		o, ok := client.Resolve(o, asked, audited)
		if ok {
			settled++
		}
		return add(o)
	})
	if err == nil && jerr == nil && n != ops {
		missing = append(missing, fmt.Sprintf("the journal gave %d ops of the %d recorded", n, ops))
	}
	if err == nil && len(missing) > 0 {
		err = add(history.Op{Index: int64(n), Time: last, Type: history.Info, Process: history.Nemesis,
			F: history.FOpsMissing, Value: strings.Join(missing, "; ")})
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		out.Abort()
		if jerr == nil {
			return fmt.Errorf("write the history (the journal keeps every op): %w", err)
		}
		return fmt.Errorf("write the history: %w", err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	lg.logf("history: %d ops, %d :info writes settled from the audit table", rd.stream.Ops(), settled)
	return nil
}

// linearViewOps is the longest history whose porcupine view a run draws:
// the drawing needs every op in memory (about 200 bytes each), though it
// shows at most checker.HTMLLimit of them.
const linearViewOps = 100_000

// linearViewTimeout bounds porcupine's search for the view, so that a
// picture never holds up the end of a run for long; the verdict is the
// counter walk's, which needs no search.
const linearViewTimeout = 10 * time.Second

// writeLinearView draws porcupine's view of the run's history.
func writeLinearView(ctx context.Context, run store.Run, model string) error {
	ops, err := history.ReadFile(run.Path(store.History))
	if err != nil {
		return err
	}
	opts := checker.Options{Model: model, Timeout: linearViewTimeout}
	return run.WriteWith(report.LinearFile, func(w io.Writer) error {
		_, _, err := checker.CheckHTML(ctx, w, ops, opts)
		return err
	})
}

// longHistory is the journal, in ops, whose end the run announces.
const longHistory = 1_000_000

// analyze is the verdict of a run's history against model, beside its lock
// server's record when the stream was given one (withRecord).
func analyze(s *checker.Stream, model string) checker.Results {
	rs, err := s.Check(checker.Options{Model: model})
	if err != nil {
		// The history is sorted and the options fixed: a bug of hiatus.
		rs.Add(checker.Result{Name: "check", Valid: checker.Unknown, Explanation: err.Error()})
	}
	return rs
}

// final records the read of the counter after every worker has stopped, by
// a process of its own.
func final(ctx context.Context, clock client.Clock, c client.FinalReader, col *collector, workers int) {
	_, p, _, _ := col.stats()
	p = max(p+1, history.Process(workers))
	extra := map[history.Keyword]any{history.KeyFinal: true}
	col.record(history.Op{Index: history.Unset, Time: clock.Now(ctx), Type: history.Invoke, Process: p, F: history.FRead, Extra: extra})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	v, err := c.FinalRead(rctx)
	cancel()
	o := history.Op{Index: history.Unset, Time: clock.Now(ctx), Type: history.Ok, Process: p, F: history.FRead, Value: v, Extra: extra}
	if err != nil {
		o.Type, o.Value, o.Error = history.Fail, nil, err.Error()
	}
	col.record(o)
}
