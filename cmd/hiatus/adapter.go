package main

import (
	"errors"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/urfave/cli/v2"
)

func adapterCommand() *cli.Command {
	return &cli.Command{
		Name:  "adapter",
		Usage: "check a lock adapter: a lock of any language that speaks the adapter protocol",
		Description: "A lock adapter is a program that takes hiatus's requests (acquire, release, renew) as JSON\n" +
			"lines on its standard input and answers each on its standard output\n" +
			"(docs/adapter-protocol.md). `hiatus run --lock exec:COMMAND` tests its lock like a built-in one.",
		Subcommands: []*cli.Command{{
			Name:      "check",
			Usage:     "run the protocol's conformance check of an adapter",
			ArgsUsage: "COMMAND (or exec:COMMAND, as --lock names it)",
			Description: "Starts the adapter (COMMAND, run by /bin/sh) twice against a Redis and checks, in plain\n" +
				"words: its hello; acquire; that a second process is refused while the first holds the\n" +
				"lock; release; the release of a lock whose lease expired; fencing and renewal if its hello\n" +
				"says it has them; a request it cannot understand; that it exits when its input closes,\n" +
				"leaving no process of its own running (what it left is killed, and said).\n\n" +
				"Example:\n" +
				"  hiatus adapter check 'adapters/python/redis_py_lock.py'\n\n" +
				"Exit status: 0 conforms, 1 does not, 254 bad arguments or no Redis, 255 internal error.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "redis-url", EnvVars: []string{"HIATUS_REDIS_URL"}, Usage: "use this Redis instead of a throwaway redis-server"},
				&cli.StringFlag{Name: "adapter-store", Value: harness.AdapterOnRedis, Usage: "where the adapter keeps its lock: " + harness.AdapterCheckStores()},
				&cli.BoolFlag{Name: "trace", Usage: "show every line the first adapter process is sent (->) and answers (<-)"},
				helpFlag(),
			},
			HideHelp: true,
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usageErrorf("adapter check takes the adapter's command as one argument (quote it), not %d arguments", c.NArg())
				}
				ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
				defer stop()
				store := c.String("adapter-store")
				if !slices.Contains(harness.AdapterStores(), store) {
					return usageErrorf("--adapter-store %q: want one of %s", store, strings.Join(harness.AdapterStores(), ", "))
				}
				// The command as --lock names it (exec:COMMAND) is the
				// same command: a user copies it from a run.
				command, _ := strings.CutPrefix(c.Args().First(), client.ExecPrefix)
				if strings.TrimSpace(command) == "" {
					return usageErrorf("adapter check: the adapter's command is empty")
				}
				err := harness.CheckAdapter(ctx, command, c.String("redis-url"), store, c.App.Writer, c.Bool("trace"))
				switch {
				case errors.Is(err, adapter.ErrNonconforming):
					return verdictExit(exitInvalid)
				case err != nil:
					return runError(err)
				}
				return nil
			},
		}},
	}
}
