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

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
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
	return slices.Contains([]string{"lease", "retry", "op-timeout", "adapter-hello", "nodes", "redis-url", "postgres-url", "store", "counter-id"}, s.Flag)
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
	for _, p := range harness.PauseKinds() {
		pauses = append(pauses, string(p))
	}
	return append(out,
		&cli.StringSliceFlag{Name: "lock", Usage: "a lock to test (repeat, or comma-separate): " + strings.Join(client.LockNames(), ", ") +
			", or exec:COMMAND (a lock adapter)", DefaultText: "every lock of hiatus's but etcd's"},
		&cli.StringSliceFlag{Name: "guard", Usage: "a guard of the writes (repeat, or comma-separate): " + strings.Join(guards, ", "),
			DefaultText: strings.Join(guards, ",")},
		&cli.StringSliceFlag{Name: "pause-kind", Usage: "how holder A is paused (repeat, or comma-separate): sleep (A blocks in its section; " +
			"its lock's own work, a watchdog's renewals, runs on) or stop (A's whole process stops: its lock's renewals and adapter too)",
			DefaultText: strings.Join(pauses, ",")},
		&cli.IntFlag{Name: "runs", Value: 1, Usage: "run each case this many times"},
		&cli.StringFlag{Name: "name", Value: pauseTestName, Usage: "test name: each case's run goes to STORE/NAME/START-TIME/"},
		&cli.StringFlag{Name: "junit", Usage: "write a JUnit XML report to `FILE` (a test case per lock, guard and pause, a run each)"},
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
			"Exit status: 0 when every case lost no update, 1 when one did, 130 interrupted,\n" +
			"254 bad arguments or servers, 255 internal error.",
		Flags: pauseTestFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("pause-test takes flags only, not %q (see hiatus pause-test --help)", c.Args().Slice())
			}
			cfg, cases, err := pauseTestConfig(c)
			if err != nil {
				return usageError(err)
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
		if k.Store != client.OnEtcd { // seconds a case: etcd's leases are whole seconds, 2 s at the least
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
		if !slices.Contains(harness.PauseKinds(), history.Keyword(p)) {
			return cfg, nil, fmt.Errorf("--pause-kind %q: want one of %v", p, harness.PauseKinds())
		}
		pauses = append(pauses, history.Keyword(p))
	}
	if len(pauses) == 0 {
		pauses = harness.PauseKinds()
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
	failed := 0
	for _, v := range vs {
		if !v.Passed() {
			failed++
		}
	}
	if slices.ContainsFunc(vs, func(v harness.PauseVerdict) bool { return v.Case.Pause == nemesis.KindStop && !v.Froze }) {
		fmt.Fprintln(c.App.Writer, "stop*: the lock has no work of its own (renewals, an adapter) for a stop to freeze: it is paused as by sleep")
	}
	fmt.Fprintf(c.App.Writer, "\n%d of %d cases passed: the sequence ran and no update was lost (lease %v)\n", len(vs)-failed, len(vs), cfg.Lease)
	for _, v := range vs {
		if !v.Passed() {
			fmt.Fprintf(c.App.Writer, "  %s: %s\n", v.Case, v.Explanation())
		}
	}
	if f := c.String("junit"); f != "" {
		if err := writeJUnit(f, cfg, vs); err != nil {
			return err
		}
	}
	return verdictExit(min(failed, exitInvalid))
}

func printPauseVerdict(w io.Writer, v harness.PauseVerdict) {
	verdict := "pass"
	switch {
	case v.Taken == harness.Late:
		verdict = "unknown" // the sequence did not happen: no verdict on the lock
	case !v.Passed():
		verdict = "FAIL"
	}
	b := v.Taken.String()
	if v.Taken == harness.Took {
		b = fmt.Sprintf("took +%dms", v.After.Milliseconds())
	}
	pause := string(v.Case.Pause)
	if v.Case.Pause == nemesis.KindStop && !v.Froze {
		pause += "*"
	}
	f := v.Figures()
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%dms\t%s\n", v.Case.Lock, v.Case.Guard, pause, verdict, b,
		f.Writes, f.LostMin, f.StaleRejected+f.ChangeRejected, v.Elapsed.Milliseconds(), v.Dir)
}

// writeJUnit writes the verdicts to file as JUnit XML: one suite, a test
// case per verdict, named lock/guard/pause; a case that lost an update is
// a failure, whose message is the check's explanation.
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
		tc.SystemOut = &junit.Output{Data: out}
		switch {
		case v.Taken == harness.Late:
			tc.Error = &junit.Result{Message: "inconclusive: the sequence did not happen", Type: "late", Data: v.Explanation()}
		case !v.Passed():
			tc.Failure = &junit.Result{Message: "an update was lost", Type: "lost-update", Data: v.Explanation()}
		}
		suite.AddTestcase(tc)
		total += v.Elapsed
	}
	suite.Time = fmt.Sprintf("%.3f", total.Seconds())
	var doc junit.Testsuites
	doc.AddSuite(suite)
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	if err := doc.WriteXML(f); err != nil {
		f.Close()
		return fmt.Errorf("--junit %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--junit %s: %w", file, err)
	}
	return nil
}
