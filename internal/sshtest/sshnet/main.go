// Command sshnet makes the SSH test network of the tests (package sshtest)
// for a script to run hiatus on: as root, it starts a host per -node
// (NAME:ROLES), each with its own sshd, prints the inventory's path, and
// removes the network when its standard input closes or it is
// interrupted. scripts/bench-hosts measures --hosts ssh with it.
//
//	go run ./internal/sshtest/sshnet w0:worker w1:worker n0:redis pg:postgres
package main

import (
	"context"
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
	var nodes []sshtest.Node
	for _, a := range args {
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
