package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/internal/printable"
	"github.com/hiatus-dev/hiatus/internal/progress"
	"github.com/hiatus-dev/hiatus/report"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/urfave/cli/v2"
)

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "check a saved history: a run directory, any Jepsen history file, standard input, or store/latest",
		ArgsUsage: "[RUN-DIR | HISTORY.edn | -]",
		Description: "Checks a history offline with the same code a run ends with, and prints what was\n" +
			"checked, each check's verdict and figures, and the first violation in words. With no\n" +
			"argument it checks STORE/latest; with -, the history piped to it. It reads regular files\n" +
			"only: a named pipe or device is refused (pipe it in with -). The model is detected from the ops' :f values unless\n" +
			"--model names it: " + strings.Join(checker.Models(), ", ") + ".\n\n" +
			"A run directory gets its results.edn rewritten; a lone history file gets none unless\n" +
			"--out names where.\n\n" +
			"Examples:\n" +
			"  hiatus check\n" +
			"  hiatus check store/lock-counter/20261130T171300.000Z/\n" +
			"  hiatus check --model cas-register --initial 0 history.edn\n" +
			"  hiatus check --html linear.html --timeout 30s history.edn\n\n" +
			"Exit status: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or unreadable input,\n" +
			"255 internal error.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "model to check against (default: detected from the ops)"},
			&cli.StringFlag{Name: "initial", Usage: "initial state as an EDN literal, e.g. 0 or {:x 0 :y 0} (default: the model's: 0 for counters, nil for registers)"},
			&cli.DurationFlag{Name: "timeout", Value: checker.DefaultTimeout, Usage: "bound on each linearizability search; one that runs out is :unknown"},
			&cli.StringFlag{Name: "analyzer", Usage: "lock-counter linearizability by `NAME`: " + checker.AnalyzerCounterWalk + " (default) or " + checker.AnalyzerPorcupine + ", the reference, which searches"},
			&cli.StringFlag{Name: "html", Usage: "write porcupine's visualization of the linearizability search to `FILE` (a new or regular file: hiatus writes no link, pipe or device)"},
			&cli.StringFlag{Name: "out", Usage: "write results.edn to `FILE` instead of into the run directory (a new or regular file: hiatus writes no link, pipe or device)"},
			&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
			&cli.StringFlag{Name: "record", Usage: "hold the history's lock calls to the lock server's record in `FILE` (a run directory's " + store.LockServer + " is read without it)"},
			&cli.Int64Flag{Name: "memory", Value: checker.DefaultMemory >> 20, Usage: "keep up to `MB` megabytes of a lock-counter history's records in memory, and the rest on disk; the verdict does not depend on it"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usageErrorf("check takes one history or run directory, not %d arguments", c.NArg())
			}
			ctx, stop := onSignals(c.Context)
			defer stop()
			return runCheck(ctx, checkArgs{
				path: c.Args().First(), model: c.String("model"), initial: c.String("initial"),
				timeout: c.Duration("timeout"), html: c.String("html"), out: c.String("out"),
				store: c.String("store"), initialSet: c.IsSet("initial"), analyzer: c.String("analyzer"),
				stdin: c.App.Reader, memory: c.Int64("memory"), record: c.String("record"),
			}, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// checkArgs are the check command's arguments.
type checkArgs struct {
	path, model, initial, html, out, store, analyzer string
	record                                           string // the lock server's record, if named
	initialSet                                       bool
	timeout                                          time.Duration
	memory                                           int64     // megabytes of records in memory
	stdin                                            io.Reader // the history, when path is "-"
}

func runCheck(ctx context.Context, a checkArgs, stdout, stderr io.Writer) error {
	if a.timeout <= 0 {
		return usageErrorf("--timeout must be positive, not %v", a.timeout)
	}
	if a.memory < 0 || a.memory > 1<<30 {
		return usageErrorf("--memory must be from 1 to %d MB (0: the default, %d), not %d", 1<<30, checker.DefaultMemory>>20, a.memory)
	}
	if err := outputsWritable(a); err != nil {
		return err
	}
	opts := checker.Options{Model: a.model, Timeout: a.timeout, Analyzer: a.analyzer, Memory: a.memory << 20} // 0: the default
	if a.path != "-" && a.html == "" {
		// Open may stream it.
		opts.ReadWhole = collectForStream(cmp.Or(opts.Memory, checker.DefaultMemory))
		defer opts.ReadWhole()
	}
	if a.initialSet {
		v, err := history.ParseValue(a.initial)
		if err != nil {
			return usageErrorf("--initial %q: %v", a.initial, err)
		}
		opts.Initial = v
	}
	run, h, prog, err := openHistory(ctx, a, &opts, stderr)
	if err != nil {
		return err
	}
	defer prog.End()
	opts.Model, opts.Truncated = h.Model, h.Truncated != nil
	prog.Checking(fmt.Sprintf("checking %s ops as %s", progress.Thousands(int64(h.N)), h.Model))
	var rs checker.Results
	if a.html == "" {
		rs, err = interruptible(ctx, "check", func() (checker.Results, error) { return h.Check(ctx, opts) })
		var ee *exitError
		switch {
		case errors.As(err, &ee):
			return err
		case err != nil:
			return usageError(err)
		}
	}
	// Nothing else is written while the progress line is on the terminal:
	// it goes first, then everything is said.
	prog.End()
	printChecking(stdout, stderr, h)
	if r := opts.Record; r != nil {
		fmt.Fprintf(stdout, "  lock server's record: %d events", len(r.Ops))
		if len(r.Nodes) > 0 {
			fmt.Fprintf(stdout, " of %s", printable.Escape(strings.Join(r.Nodes, ", ")))
		}
		fmt.Fprintln(stdout)
	}
	var drawn *checker.Visualization
	if a.html != "" {
		if rs, drawn, err = drawInterruptible(ctx, a.html, h.Ops, opts, stderr); err != nil {
			return err
		}
	}
	rs.Processes = h.Processes
	printResults(stdout, rs)
	if drawn != nil {
		fmt.Fprintf(stdout, "html: %s (%d of %d ops)\n", a.html, drawn.Ops, drawn.Total)
		if drawn.Note != "" {
			fmt.Fprintf(stdout, "  %s\n", drawn.Note)
		}
	}
	if err := saveResults(a.out, run, rs, stdout, stderr); err != nil {
		return err
	}
	return verdictExit(rs.Valid.ExitCode())
}

// printChecking says what is checked: the history, its model, its ops,
// and how it writes the processes the results number.
func printChecking(stdout, stderr io.Writer, h *checker.File) {
	if h.Truncated != nil {
		fmt.Fprintf(stderr, "hiatus: %s: the history is truncated; checking the %d ops before it\n", printable.Escape(h.Truncated.Error()), h.N)
	}
	detected := ""
	if h.Detected {
		detected = " (detected from :f)"
	}
	fmt.Fprintf(stdout, "checking %s\n  model %s%s, %d ops", printable.Escape(h.Path), h.Model, detected, h.N)
	if h.Model != checker.ModelMutex {
		fmt.Fprintf(stdout, ", initial %s", printable.Escape(string(history.AppendValue(nil, h.Initial))))
	}
	fmt.Fprintln(stdout)
	printProcesses(stdout, h.Processes)
}

// drawInterruptible is drawCheck, ended at once by ctx.
func drawInterruptible(ctx context.Context, html string, ops []history.Op, opts checker.Options, stderr io.Writer) (checker.Results, *checker.Visualization, error) {
	type drawing struct {
		rs    checker.Results
		drawn *checker.Visualization
	}
	d, err := interruptible(ctx, "check", func() (drawing, error) {
		rs, drawn, err := drawCheck(ctx, html, ops, opts, stderr)
		return drawing{rs, drawn}, err
	})
	return d.rs, d.drawn, err
}

// outputsWritable refuses an --out or --html that cannot be written, before
// a long history is read and checked, not after.
func outputsWritable(a checkArgs) error {
	for _, o := range []struct{ flag, path string }{{"out", a.out}, {"html", a.html}} {
		if o.path == "" {
			continue
		}
		if err := files.Writable(o.path); err != nil {
			return usageErrorf("--%s: %v", o.flag, err)
		}
	}
	return nil
}

// saveResults writes results.edn to out, or into the run directory; a
// run's that cannot be written is said on stderr, and the verdict stands.
// An --out that cannot be written at the end (it was tried at the start)
// is said too; a verdict that is not valid still decides the exit status,
// as pause-test's does, and a valid one without its file is 254.
func saveResults(out string, run store.Run, rs checker.Results, stdout, stderr io.Writer) error {
	data := rs.AppendEDN(nil)
	switch {
	case out != "":
		if err := files.WriteFile(out, data); err != nil {
			if rs.Valid != checker.Valid {
				fmt.Fprintf(stderr, "hiatus: --out: %v: the verdict above is not saved\n", err)
				return nil
			}
			return usageErrorf("--out: %v: the verdict above is not saved", err)
		}
		fmt.Fprintf(stdout, "results: %s\n", out)
	case run.Dir != "":
		if err := run.WriteFile(store.Results, data); err != nil {
			// The verdict stands: its exit status says it, not this.
			fmt.Fprintf(stderr, "hiatus: the verdict above is not saved: %v\n", err)
		} else {
			fmt.Fprintf(stdout, "results: %s\n", run.Path(store.Results))
		}
	}
	return nil
}

// openHistory reads the history a check is asked for: a run directory's,
// a history file, or standard input ("-"), with a progress line on stderr
// while it reads. run is the run directory, if the history is one's.
func openHistory(ctx context.Context, a checkArgs, opts *checker.Options, stderr io.Writer) (store.Run, *checker.File, *progress.Check, error) {
	var run store.Run
	path := "-"
	if a.path != "-" {
		var err error
		if run, path, err = store.Resolve(a.store, a.path); err != nil {
			return run, nil, nil, usageError(err)
		}
	}
	if run.Dir != "" && opts.Model == "" {
		opts.Model = report.ReadSummary(run.Dir).RunModel() // what the run recorded
	}
	var err error
	if opts.Record, err = openRecord(a.record, run); err != nil {
		return run, nil, nil, err
	}
	if run.Dir != "" && path == run.Path(store.Journal) {
		fmt.Fprintf(stderr, "hiatus: %s has no %s (the run did not finish); checking its journal\n", run.Dir, store.History)
	}
	// A lock-counter history is checked as it is read, keeping only what
	// the checks need of it; any other, or one that needs all its ops
	// (porcupine, a drawing), is read whole, as standard input is.
	var total int64
	if fi, err := os.Stat(path); path != "-" && err == nil && fi.Mode().IsRegular() {
		total = fi.Size()
	}
	prog := progress.StartCheck(stderr, path, total)
	var h *checker.File
	if path == "-" {
		h, err = checker.Read(ctx, prog.Reader(a.stdin), "standard input", *opts)
	} else {
		h, err = checker.Open(ctx, path, *opts, a.html != "", prog.Reader)
	}
	switch {
	case ctx.Err() != nil:
		prog.End()
		return run, nil, nil, &exitError{code: exitInterrupted, err: fmt.Errorf("check interrupted while reading %s", path)}
	case errors.Is(err, files.ErrNotRegular):
		prog.End()
		return run, nil, nil, usageErrorf("%v (to check a stream, pipe it to hiatus check -)", err)
	case err != nil:
		prog.End()
		return run, nil, nil, usageError(err)
	}
	return run, h, prog, nil
}

// openRecord reads the lock server's record a check is to hold the
// history to: the file --record names, or a run directory's
// lockserver.edn when it has one; nil when there is none. A record that
// cannot be read is bad input (254), named.
func openRecord(named string, run store.Run) (*checker.Record, error) {
	path, workers := named, 0
	if run.Dir != "" {
		workers = report.ReadSummary(run.Dir).Workers
		p, ok, err := run.Optional(store.LockServer)
		if err != nil {
			return nil, usageErrorf("the lock server's record: %v", err)
		}
		if path == "" && ok {
			path = p
		}
	}
	if path == "" {
		return nil, nil
	}
	rec, err := checker.ReadRecord(path, workers)
	if err != nil {
		return nil, usageErrorf("the lock server's record %s: %v", printable.Escape(path), err)
	}
	return rec, nil
}

// drawCheck runs the checks, drawing them to the file html (whole or not
// at all, through internal/files: a link or a FIFO at html is refused);
// it returns what was drawn, nil if nothing was.
func drawCheck(ctx context.Context, html string, ops []history.Op, opts checker.Options, stderr io.Writer) (checker.Results, *checker.Visualization, error) {
	f, err := files.Create(html)
	if err != nil {
		return checker.Results{}, nil, usageErrorf("--html: %v", err)
	}
	rs, vis, err := checker.CheckHTML(ctx, f, ops, opts)
	if err == nil {
		err = f.Close()
	} else {
		f.Abort()
	}
	switch {
	case err != nil && rs.Checks == nil: // bad options: nothing was checked
		return rs, nil, usageError(err)
	case errors.Is(err, checker.ErrNoVisualization):
		fmt.Fprintf(stderr, "hiatus: no visualization written: %v\n", err)
		return rs, nil, nil
	case err != nil:
		fmt.Fprintf(stderr, "hiatus: --html %s: %v\n", html, err)
		return rs, nil, nil
	}
	return rs, &vis, nil
}

// printProcesses says how the history writes the processes that the
// results number below -1: names, negative numbers.
func printProcesses(out io.Writer, names map[history.Process]string) {
	if len(names) == 0 {
		return
	}
	procs := slices.Sorted(maps.Keys(names))
	slices.Reverse(procs) // -2 first
	var each []string
	for _, p := range procs {
		each = append(each, fmt.Sprintf("%v is %s", p, printable.Escape(names[p])))
	}
	fmt.Fprintf(out, "  processes numbered here, as the history writes them: %s\n", strings.Join(each, ", "))
}

// printResults prints a line per check with its verdict and scalar
// figures, the explanation of each check that is not valid, and the
// verdict. What the history supplied (a figure's value, an explanation
// that quotes an op) is escaped for the terminal (printable.Escape): a
// value can neither act on it nor make a line of its own.
func printResults(out io.Writer, rs checker.Results) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range rs.Checks {
		var figs []string
		for _, f := range r.Fields {
			if f.Key == "note" {
				continue // said below, with the explanations
			}
			switch f.Value.(type) {
			case nil, bool, int, int64, string, history.Keyword:
				figs = append(figs, fmt.Sprintf("%s %s", f.Key, printable.Escape(string(history.AppendValue(nil, f.Value)))))
			}
		}
		fmt.Fprintf(tw, "  %s\t%v\t%s\n", r.Name, r.Valid, strings.Join(figs, ", "))
	}
	tw.Flush()
	fmt.Fprintln(out)
	printExplanations(out, rs)
	fmt.Fprintf(out, "valid? %v\n", rs.Valid)
}

// printExplanations prints the explanation of each check that has one,
// escaped for the terminal: it quotes the history's values.
func printExplanations(out io.Writer, rs checker.Results) {
	for _, r := range rs.Checks {
		if r.Explanation != "" {
			fmt.Fprintf(out, "%s: %s\n", r.Name, printable.Escape(r.Explanation))
		}
		if note, ok := r.Get("note").(string); ok {
			fmt.Fprintf(out, "%s (reported, not failed): %s\n", r.Name, printable.Escape(note))
		}
	}
}

// collectorRoom is the heap a streamed check may take beyond its records'
// budget before the collector runs: the parse's chunks and batches of ops
// in flight, the runs being sorted, the garbage of the ops already added.
// With the default budget (128 MB) the limit is 192 MiB: 250,000
// sections, held in memory, peak at 146–150 MB RSS, and a history whose
// records go to disk at 217–218 MB (docs/performance.md).
const collectorRoom = 64 << 20

// collectForStream lets the collector wait until the heap nears the
// check's budget plus collectorRoom, rather than run at every 20 % of
// growth: a Stream's records are bounded by its budget, and at GOGC 20 a check
// of 250,000 sections ran 24 collections whose stack scans spun, waiting
// for its busy goroutines to stop (docs/performance.md). It returns the
// function that puts the collector back as it was, for a history read
// whole, whose heap has no such bound. The environment's GOGC or
// GOMEMLIMIT, when set, is left as it is. A budget above the default
// keeps a collector that runs at every doubling of the heap as well: with
// none, the garbage of the parse piled up to the limit (620 MB at 250,000
// sections with --memory 1024, against 224 MB at GOGC 20), and a budget
// larger than the machine left no limit at all.
func collectForStream(budget int64) (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	limit := debug.SetMemoryLimit(budget + collectorRoom)
	gc := -1
	if budget > checker.DefaultMemory {
		gc = 100
	}
	percent := debug.SetGCPercent(gc)
	return sync.OnceFunc(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
}
