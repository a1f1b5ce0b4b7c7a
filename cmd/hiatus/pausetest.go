package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/internal/printable"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/jstemmer/go-junit-report/v2/junit"
	"github.com/urfave/cli/v2"
)

// pauseTestDefaults are pause-test's own defaults where they are not
// run's: a short lease and a quick retry keep a case near a third of a
// second.
const (
	pauseTestLease = 200 * time.Millisecond
	pauseTestRetry = time.Millisecond
	pauseTestName  = "pause-test"
)

// pauseTestSetting says whether pause-test takes the setting s of run too.
func pauseTestSetting(s harness.Setting) bool {
	return slices.Contains([]string{"lease", "retry", "op-timeout", "adapter-hello", "adapter-store", "nodes", "redis-url", "postgres-url", "store", "counter-id", "workload"}, s.Flag)
}

func pauseTestFlags() []cli.Flag {
	out := settingFlagsOf(pauseTestSetting)
	for _, f := range out {
		switch f := f.(type) {
		case *cli.DurationFlag:
			switch f.Name {
			case "lease":
				f.Value, f.Usage = pauseTestLease, "the locks' lease: holder A is paused past it"
			case "retry":
				f.Value = pauseTestRetry
			}
		}
	}
	guards := make([]string, 0, len(client.Guards()))
	for _, g := range client.Guards() {
		guards = append(guards, string(g))
	}
	pauses := make([]string, 0, 2)
	for _, p := range harness.PauseTestKinds() {
		pauses = append(pauses, string(p))
	}
	return append(out,
		&cli.StringSliceFlag{Name: "lock", Usage: "a lock to test (repeat, or comma-separate): " + strings.Join(client.LockNames(), ", ") +
			", or exec:COMMAND (a lock adapter)", DefaultText: "every lock of hiatus's but etcd's and ZooKeeper's"},
		&cli.StringSliceFlag{Name: "guard", Usage: "a guard of the writes (repeat, or comma-separate): " + strings.Join(guards, ", "),
			DefaultText: strings.Join(guards, ",")},
		&cli.StringSliceFlag{Name: "pause-kind", Usage: "how holder A is paused (repeat, or comma-separate): sleep (A blocks in its section; " +
			"its lock's own work, a watchdog's renewals, runs on) or stop (A's whole process stops: its lock's renewals and adapter too)",
			DefaultText: strings.Join(pauses, ",")},
		&cli.IntFlag{Name: "runs", Value: 1, Usage: "run each case this many times"},
		&cli.StringFlag{Name: "name", Value: pauseTestName, Usage: "test name: each case's run goes to STORE/NAME/START-TIME/"},
		&cli.StringFlag{Name: "junit", Usage: "write a JUnit XML report to `FILE` (a test case per lock, guard and pause, a run each); a path that cannot take it, or that is a link, pipe or device, is refused before any case"},
	)
}

func pauseTestCommand() *cli.Command {
	return &cli.Command{
		Name:  "pause-test",
		Usage: "the paused-holder test of a lock, each guard and each pause: a CI gate",
		Description: "Holder A takes the lock and reads the counter; it is paused inside its section; holder B\n" +
			"takes the lock as soon as the lock lets it, reads, writes and releases; then A wakes and\n" +
			"writes. Unguarded, a lease lock loses B's update every time; a guard that works rejects\n" +
			"A's write every time. Nothing waits on a guess: B tries from the moment A is paused, and A\n" +
			"wakes once B's section is done, or once the run's Redis clock is a lease past the end of\n" +
			"A's lease, counted from its grant (the lock kept it for A: a renewing lock under a sleep,\n" +
			"or a lock without a lease); a case whose B was merely slow runs again, and never passes.\n" +
			"Each case is kept as a run (history, results, timeline) under STORE/NAME/.\n\n" +
			"Examples:\n" +
			"  hiatus pause-test                                     # every lock, guard and pause\n" +
			"  hiatus pause-test --lock exec:./my-adapter --guard fence --junit pause-test.xml\n\n" +
			"Exit status: 0 when every case passed, 1 when a case lost an update, 2 when none did but a\n" +
			"case reached no verdict (unknown: B too slow three times, A never granted the lock, as by an\n" +
			"adapter that broke the protocol), 130 interrupted, 254 bad arguments or servers, or a --junit\n" +
			"FILE that cannot be written (tried before any case; at the end, a verdict other than a pass wins),\n" +
			"255 internal error.",
		Flags: pauseTestFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("pause-test takes flags only, not %q (see hiatus pause-test --help)", c.Args().Slice())
			}
			cfg, cases, err := pauseTestConfig(c)
			if err != nil {
				return usageError(err)
			}
			// The report's path is tried before any case: a path that cannot
			// take it is found now, not after every case ran.
			if f := c.String("junit"); f != "" {
				if err := files.Writable(f); err != nil {
					return usageErrorf("--junit: %v", err)
				}
			}
			return pauseTest(c, cfg, cases)
		},
	}
}

// pauseTestConfig is the configuration and the cases pause-test's flags set.
func pauseTestConfig(c *cli.Context) (harness.Config, []harness.PauseCase, error) {
	cfg, err := settingsConfigOf(c, pauseTestSetting)
	if err != nil {
		return cfg, nil, err
	}
	cfg.Lease, cfg.Retry, cfg.Name = c.Duration("lease"), c.Duration("retry"), c.String("name")
	var locks []string
	for _, k := range client.LockKinds() {
		// Not etcd's, whose leases are whole seconds, 2 s at the least
		// (seconds a case), nor ZooKeeper's, whose pings every 67 ms keep a
		// 200 ms session only on a machine that is not starved.
		if k.Store != client.OnEtcd && k.Store != client.OnZooKeeper {
			locks = append(locks, k.Name)
		}
	}
	locks = listFlag(c, "lock", locks)
	var guards []client.Guard
	for _, g := range listFlag(c, "guard", nil) {
		guards = append(guards, client.Guard(g))
	}
	if len(guards) == 0 {
		guards = client.Guards()
	}
	var pauses []history.Keyword
	for _, p := range listFlag(c, "pause-kind", nil) {
		if !slices.Contains(harness.PauseTestKinds(), history.Keyword(p)) {
			return cfg, nil, fmt.Errorf("--pause-kind %q: want one of %v", p, harness.PauseTestKinds())
		}
		pauses = append(pauses, history.Keyword(p))
	}
	if len(pauses) == 0 {
		pauses = harness.PauseTestKinds()
	}
	if c.Int("runs") < 1 {
		return cfg, nil, fmt.Errorf("--runs must be at least 1, not %d", c.Int("runs"))
	}
	var cases []harness.PauseCase
	for range c.Int("runs") {
		cases = append(cases, harness.PauseCases(locks, guards, pauses)...)
	}
	return cfg, cases, nil
}

// listFlag is the values of a repeatable, comma-separated flag, or def
// when it is not set.
func listFlag(c *cli.Context, name string, def []string) []string {
	if !c.IsSet(name) {
		return def
	}
	var out []string
	for _, v := range c.StringSlice(name) {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// pauseTest runs the cases, printing each verdict as it comes, then the
// JUnit report if asked for.
func pauseTest(c *cli.Context, cfg harness.Config, cases []harness.PauseCase) error {
	w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "lock\tguard\tpause\tverdict\tB\twrites\tlost\trejected\ttook\trun")
	w.Flush()
	// Ctrl-C ends the test after the case under way, its servers removed.
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	vs, err := harness.PauseTest(ctx, cfg, cases, func(v harness.PauseVerdict) {
		printPauseVerdict(w, v)
		w.Flush()
	})
	if err != nil {
		return runError(err)
	}
	verdict := printPauseSummary(c.App.Writer, cfg, vs)
	if f := c.String("junit"); f != "" {
		if err := writeJUnit(f, cfg, vs); err != nil {
			return junitLost(c.App.ErrWriter, err, verdict)
		}
	}
	return verdictExit(verdict.ExitCode())
}

// junitLost is the exit of a test whose report could not be written at
// its end (its path was tried at the start): a verdict other than a pass
// wins, its exit status said and the report's loss on stderr; a pass
// without its report is exit 254, naming the report.
func junitLost(stderr io.Writer, err error, verdict checker.Validity) error {
	if verdict == checker.Valid {
		return usageErrorf("%v: every case passed, but the report is not written", err)
	}
	fmt.Fprintf(stderr, "hiatus: %v: the report is not written; the verdict above stands\n", err)
	return verdictExit(verdict.ExitCode())
}

// printPauseSummary says how many cases passed and why each other did
// not, and returns the verdicts merged: Invalid when a case lost an update,
// else Unknown when a case reached no verdict, else Valid.
func printPauseSummary(w io.Writer, cfg harness.Config, vs []harness.PauseVerdict) checker.Validity {
	passed, verdict := 0, checker.Valid
	for _, v := range vs {
		verdict = checker.Merge(verdict, v.Verdict())
		if v.Passed() {
			passed++
		}
	}
	if slices.ContainsFunc(vs, func(v harness.PauseVerdict) bool { return v.Case.Pause == nemesis.KindStop && !v.Froze }) {
		fmt.Fprintln(w, "stop*: the lock has no work of its own (renewals, an adapter) for a stop to freeze: it is paused as by sleep")
	}
	fmt.Fprintf(w, "\n%d of %d cases passed: the sequence ran and no update was lost (lease %v)\n", passed, len(vs), cfg.Lease)
	for _, v := range vs {
		if !v.Passed() {
			fmt.Fprintf(w, "  %s %s: %s\n", v.Case, verdictWord(v), printable.Escape(v.Explanation()))
		}
	}
	return verdict
}

// verdictWord is a case's verdict as the table says it.
func verdictWord(v harness.PauseVerdict) string {
	switch v.Verdict() {
	case checker.Valid:
		return "pass"
	case checker.Invalid:
		return "FAIL"
	}
	return "unknown" // the case did not run as it should: no verdict on the lock
}

func printPauseVerdict(w io.Writer, v harness.PauseVerdict) {
	b := v.Taken.String()
	switch v.Taken {
	case 0:
		b = "-" // A never held the lock, or the test was interrupted
	case harness.Took:
		b = fmt.Sprintf("took +%dms", v.After.Milliseconds())
	}
	pause := string(v.Case.Pause)
	if v.Case.Pause == nemesis.KindStop && !v.Froze {
		pause += "*"
	}
	f := v.Figures()
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%dms\t%s\n", v.Case.Lock, v.Case.Guard, pause, verdictWord(v), b,
		f.Writes, f.LostMin, f.StaleRejected+f.ChangeRejected, v.Elapsed.Milliseconds(), v.Dir)
}

// unknownType is the type of a JUnit error, a case that reached no
// verdict: why.
func unknownType(v harness.PauseVerdict) string {
	switch {
	case v.Taken == harness.Late:
		return "late" // the sequence did not happen
	case v.Unheld != "":
		return "no-grant" // A never held the lock
	}
	return "undecided" // the check could not decide
}

// writeJUnit writes the verdicts to file as JUnit XML: one suite, a test
// case per verdict, named lock/guard/pause; a case that lost an update is
// a failure, whose text is the check's explanation; a case that reached no
// verdict is an error whose message says why.
func writeJUnit(file string, cfg harness.Config, vs []harness.PauseVerdict) error {
	suite := junit.Testsuite{Name: "hiatus pause-test", Timestamp: time.Now().UTC().Format(time.RFC3339)}
	suite.AddProperty("lease", cfg.Lease.String())
	var total time.Duration
	for _, v := range vs {
		tc := junit.Testcase{Name: v.Case.String(), Classname: "hiatus.pause-test." + v.Case.Lock,
			Time: fmt.Sprintf("%.3f", v.Elapsed.Seconds())}
		f := v.Figures()
		out := fmt.Sprintf("run %s\nB %s the lock; writes %d, lost %d, stale-rejected %d, change-rejected %d; attempts %d\n", v.Dir, v.Taken,
			f.Writes, f.LostMin, f.StaleRejected, f.ChangeRejected, v.Attempts)
		for _, c := range v.Complaints {
			out += printable.Escape(c) + "\n" // an adapter's words: XML takes no control characters
		}
		tc.SystemOut = &junit.Output{Data: out}
		switch v.Verdict() {
		case checker.Invalid:
			tc.Failure = &junit.Result{Message: "an update was lost", Type: "lost-update", Data: printable.Escape(v.Explanation())}
			if f.LostMin == 0 {
				tc.Failure.Message, tc.Failure.Type = "the history is invalid", "invalid"
			}
		case checker.Unknown:
			tc.Error = &junit.Result{Message: "inconclusive: " + printable.Escape(v.Explanation()), Type: unknownType(v)}
		}
		suite.AddTestcase(tc)
		total += v.Elapsed
	}
	suite.Time = fmt.Sprintf("%.3f", total.Seconds())
	var doc junit.Testsuites
	doc.AddSuite(suite)
	if err := files.WriteWith(file, doc.WriteXML); err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	return nil
}
