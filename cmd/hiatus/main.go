// Command hiatus tests distributed locks the way Jepsen tests databases:
// worker processes run a read-modify-write of a Postgres counter under a
// Redis lease lock while a nemesis pauses them; every operation goes into a
// history, which an offline checker judges.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/printable"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// Exit statuses, as Jepsen's CLI uses them.
const (
	exitValid    = 0
	exitInvalid  = 1
	exitUnknown  = 2
	exitUsage    = 254 // bad arguments, bad configuration or unreadable input
	exitInternal = 255
)

// An exitError carries the exit status a command ends with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as the user's to fix: exit 254.
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// usageErrorf is usageError with a formatted message.
func usageErrorf(format string, args ...any) error {
	return usageError(fmt.Errorf(format, args...))
}

// verdictExit ends a command with the exit status of a verdict, printing
// nothing more.
func verdictExit(code int) error {
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "hiatus",
		Usage: "test distributed locks under process pauses, Jepsen style",
		Description: "hiatus runs worker processes that increment a Postgres counter under a Redis lease lock,\n" +
			"pauses them (SIGSTOP, or a blocking pause inside the critical section), records every\n" +
			"operation in an EDN history, and checks the history for lost updates, overlapping\n" +
			"critical sections and linearizability. Runs are kept under ./store.\n\n" +
			"Start with:  hiatus run --nemesis sigstop\n" +
			"Then:        hiatus check        (re-checks store/latest)\n" +
			"Help on one: hiatus help COMMAND, or hiatus COMMAND --help",
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{
			runCommand(),
			checkCommand(),
			genCommand(),
			compareCommand(),
			plotCommand(),
			timelineCommand(),
			serveCommand(),
			adapterCommand(),
			replayCommand(),
			shrinkCommand(),
			pauseTestCommand(),
		},
		Action: func(c *cli.Context) error {
			if topic, ok := helpTopic(c.Args().Slice()); ok {
				if topic != "" && c.App.Command(topic) != nil {
					return cli.ShowCommandHelp(c, topic)
				}
				if topic == "" {
					return cli.ShowAppHelp(c)
				}
			}
			if c.NArg() > 0 {
				return usageErrorf("unknown command %q (see hiatus --help)", strings.Join(c.Args().Slice(), " "))
			}
			return cli.ShowAppHelp(c)
		},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageErrorf("%v (see hiatus --help)", err)
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main decides the exit status
		// urfave/cli v2 gives every app the one global HelpFlag and help
		// command, which it writes to as it parses: apps run side by side
		// (the tests') race on them. Each app and command has a flag of its
		// own instead; v2 finds it by name.
		HideHelp: true,
		Flags:    []cli.Flag{helpFlag()},
	}
	for _, cmd := range app.Commands {
		cmd.HideHelp = true
		cmd.Flags = append(cmd.Flags, helpFlag())
		usageErrors(cmd, "")
	}
	return app
}

// usageErrors makes a bad flag of cmd, or of its subcommands (adapter
// check), a usage error: exit 254, as each command's help promises.
// parent is the command cmd is a subcommand of, "" for none.
func usageErrors(cmd *cli.Command, parent string) {
	name := strings.TrimSpace(parent + " " + cmd.Name)
	cmd.OnUsageError = func(c *cli.Context, err error, _ bool) error {
		return usageErrorf("%s: %v (see hiatus %s --help)", name, flagWords(c.Command, err), name)
	}
	for _, sub := range cmd.Subcommands {
		usageErrors(sub, name)
	}
}

// helpTopic reads `hiatus help [CMD]` (or h, and any -h, --help or help
// after it, as urfave/cli's own help command took them): ok says the args
// ask for help, topic names the command, "" for the app.
func helpTopic(args []string) (topic string, ok bool) {
	if len(args) == 0 || args[0] != "help" && args[0] != "h" {
		return "", false
	}
	for _, a := range args[1:] {
		switch a {
		case "-h", "--help", "-help", "help", "h":
		default:
			if topic != "" {
				return "", false
			}
			topic = a
		}
	}
	return topic, true
}

// helpFlag is a --help flag of an app's or command's own.
func helpFlag() cli.Flag {
	return &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help", DisableDefaultText: true}
}

// badValue is how urfave/cli reports a flag value it cannot parse.
var badValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([a-z0-9-]+): parse error$`)

// flagWords says what a flag that could not be parsed takes, where
// urfave/cli says only "parse error": a duration needs its unit.
func flagWords(cmd *cli.Command, err error) error {
	m := badValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	for _, f := range cmd.Flags {
		if !slices.Contains(f.Names(), m[2]) {
			continue
		}
		switch f.(type) {
		case *cli.DurationFlag:
			if strings.Trim(m[1], "0123456789.") != "" {
				return fmt.Errorf("--%s: %q is not a duration such as 500ms, 2s or 1m30s (at most about 290 years)", m[2], m[1])
			}
			return fmt.Errorf("--%s takes a duration with its unit, such as 500ms, 2s or 1m30s, not %q", m[2], m[1])
		case *cli.IntFlag, *cli.Int64Flag:
			return fmt.Errorf("--%s takes a whole number, not %q", m[2], m[1])
		}
	}
	return err
}

// exitCode maps an error from the app to an exit status, printing it. An
// error may quote what an adapter or a history supplied: it is printed
// escaped for the terminal, line by line (printable.Lines).
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitValid
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "hiatus: %s\n", printable.Lines(ee.err.Error()))
		}
		return ee.code
	}
	var ce cli.ExitCoder
	if errors.As(err, &ce) {
		// urfave/cli's own exit codes (3: "No help topic for …") are all
		// about the words typed: they are the user's to fix.
		fmt.Fprintf(stderr, "hiatus: %s (see hiatus --help)\n", printable.Lines(err.Error()))
		return exitUsage
	}
	fmt.Fprintf(stderr, "hiatus: %s\n", printable.Lines(err.Error()))
	return exitInternal
}

// interruptible runs f and returns what it returns, or an interrupted
// status as soon as ctx ends: f may be in work that does not watch ctx (a
// check's walk over millions of records, a read blocked on a terminal), and
// a command that returns ends the process, and f with it. What f holds on
// disk is in unlinked files, which go with the process.
func interruptible[T any](ctx context.Context, what string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, &exitError{code: exitInterrupted, err: fmt.Errorf("%s interrupted", what)}
	}
}

// onSignals is ctx, ended by the first SIGINT or SIGTERM: what a terminal's
// Ctrl-C, or a service manager, sends to end a command.
func onSignals(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// quietRedis drops go-redis's own log lines: they would repeat, in the
// library's words and on stderr, an error hiatus reports itself.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// hiatusMain runs the program with args (its name first) and returns its exit
// status: main, and a test that runs its own binary as hiatus.
func hiatusMain(args []string, stdout, stderr io.Writer) int {
	redis.SetLogger(quietRedis{}) // the library's logger is global; only the program may set it
	return exitCode(runApp(newApp(stdout, stderr), args), stderr)
}

// runApp runs app on args as people type them: a command's flags may come
// after its arguments (hiatus shrink store/latest --budget 5m), where
// urfave/cli, as Go's flag package, would take them for arguments.
func runApp(app *cli.App, args []string) error {
	if len(args) < 2 {
		return app.Run(args)
	}
	cmd := app.Command(args[1])
	if cmd == nil || len(cmd.Subcommands) > 0 {
		return app.Run(args)
	}
	return app.Run(append(args[:2:2], flagsFirst(cmd, args[2:])...))
}

// flagsFirst moves cmd's flags, each with its value, before its other
// arguments, keeping the order of each; "--" ends the flags, as it does.
func flagsFirst(cmd *cli.Command, args []string) []string {
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		switch {
		case a == "--":
			return append(append(flags, a), append(rest, args[i+1:]...)...)
		case !strings.HasPrefix(a, "-") || a == "-":
			rest = append(rest, a)
		case !strings.Contains(name, "=") && takesValue[name] && i+1 < len(args):
			flags = append(flags, a, args[i+1])
			i++
		default:
			flags = append(flags, a)
		}
	}
	return append(flags, rest...)
}

// gcPercent is the GOGC hiatus runs with unless the environment sets one.
// A run's heap is small beside the timeline and plots its end holds, so
// the collector's pace sets its memory. hiatus check, whose heap its
// budget bounds, lets the collector wait instead (collectForStream).
const gcPercent = 20

func main() {
	harness.ServeWorker() // a run's workers are this same binary
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	os.Exit(hiatusMain(os.Args, os.Stdout, os.Stderr))
}
