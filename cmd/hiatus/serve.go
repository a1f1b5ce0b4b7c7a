package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/web"
	"github.com/urfave/cli/v2"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "browse the store in a web browser: every run and comparison, its verdict, timeline, plots and files",
		Description: "Serves a read-only web page over the store: an index of every run and comparison with its\n" +
			"start time, configuration, verdict (coloured as Jepsen colours them) and key figures,\n" +
			"filterable and sortable; a page for each with its explanations, timeline, plots and files.\n" +
			"It listens on the loopback address unless --addr says otherwise, and serves nothing outside\n" +
			"the store.\n" +
			"Ctrl-C stops it.\n\n" +
			"Exit status: 0 stopped, 254 bad arguments, a store that cannot be read or an address in use.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "address to listen on"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("serve takes flags only, not %q (see hiatus serve --help)", c.Args().Slice())
			}
			h, err := web.Handler(c.String("store"))
			if err != nil {
				return usageError(err)
			}
			ln, err := net.Listen("tcp", c.String("addr"))
			if err != nil {
				return usageErrorf("--addr: %v", err)
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(c.App.Writer, "serving %s at http://%s/ (Ctrl-C stops)\n", c.String("store"), ln.Addr())
			return serve(ctx, ln, h)
		},
	}
}

// serve serves h on ln until ctx ends.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
