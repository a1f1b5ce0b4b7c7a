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
			"It listens on the loopback address unless --addr says otherwise, and there answers only\n" +
			"requests for a loopback name (localhost, 127.0.0.1, [::1]): not a rebound DNS name.\n\n" +
			"It reads only the store's directories and regular files, never a file outside it (a symlink\n" +
			"out of it is as absent), a FIFO or a device, and writes nothing. Every request is bounded in\n" +
			"time; every answer carries a Content-Security-Policy under which the only scripts that run are\n" +
			"those of timelines hiatus made (hiatus timeline RUN-DIR re-makes one from an older version).\n" +
			"docs/timeline.md (hiatus serve) has the details.\n" +
			"Ctrl-C stops it within a second.\n\n" +
			"Exit status: 0 stopped, 254 bad arguments, a store that cannot be read or an address in use.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "address to listen on"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("serve takes flags only, not %q (see hiatus serve --help)", c.Args().Slice())
			}
			h, err := web.Open(c.String("store"))
			if err != nil {
				return usageError(err)
			}
			defer h.Close()
			ln, err := net.Listen("tcp", c.String("addr"))
			if err != nil {
				return usageErrorf("--addr: %v", err)
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(c.App.Writer, "serving %s at http://%s/ (Ctrl-C stops)\n", c.String("store"), ln.Addr())
			var handler http.Handler = h
			if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
				handler = web.LoopbackOnly(h)
			}
			return serve(ctx, ln, handler)
		},
	}
}

// The bounds of every connection serve holds.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second // a request is its headers: serve reads no body
	// writeTimeout bounds an answer: a history of millions of ops is
	// hundreds of MB, minutes over a slow link.
	writeTimeout = 10 * time.Minute
	idleTimeout  = 2 * time.Minute
	// shutdownGrace is how long the requests in flight at Ctrl-C have to
	// end before their connections are closed: serve ends within a second.
	shutdownGrace = 500 * time.Millisecond
)

// serve serves h on ln until ctx ends.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A request still going (a large file to a slow reader) is cut:
		// stopping is what was asked for.
		err = srv.Close()
	}
	if err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
