// Command sshnet makes the SSH test network of the tests (package sshtest)
// for a script to run hiatus on: as root, it starts a host per -node
// (NAME:ROLES), each with its own sshd, prints the inventory's path, and
// removes the network when its standard input closes or it is
// interrupted. scripts/bench-hosts measures --hosts ssh with it.
// -bashrc-sleep D has every session's shell sleep D in root's .bashrc, as
// a node's start-up files (a pyenv or conda set-up) take their time.
//
//	go run ./internal/sshtest/sshnet [-bashrc-sleep 1s] w0:worker w1:worker n0:redis pg:postgres
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hiatus-dev/hiatus/internal/sshtest"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "sshnet: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sshnet", flag.ContinueOnError)
	sleep := fs.Duration("bashrc-sleep", 0, "how long root's .bashrc sleeps, on every host")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sleep < 0 {
		return fmt.Errorf("-bashrc-sleep %v: want a duration not below 0", *sleep)
	}
	var nodes []sshtest.Node
	for _, a := range fs.Args() {
		name, roles, ok := strings.Cut(a, ":")
		if !ok {
			return fmt.Errorf("%q: want NAME:ROLES", a)
		}
		nodes = append(nodes, sshtest.Node{Name: name, Roles: roles})
	}
	if len(nodes) == 0 {
		return fmt.Errorf("no node: give NAME:ROLES for each")
	}
	dir, err := os.MkdirTemp("", "sshnet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sn, err := sshtest.Start(ctx, dir, nodes)
	if err != nil {
		return err
	}
	defer sn.Close()
	if *sleep > 0 {
		if err := sn.SlowStartup(*sleep); err != nil {
			return err
		}
	}
	fmt.Println(sn.Inventory)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(closed)
	}()
	select {
	case <-ctx.Done():
	case <-closed:
	}
	return nil
}
