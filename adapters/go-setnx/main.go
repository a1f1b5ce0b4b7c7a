// Command go-setnx is the Go reference lock adapter: hiatus's own SET NX
// PX lock (client.SetNX) served over the lock adapter protocol, to measure
// what the protocol costs against the same lock built in.
//
//	go build -o go-setnx ./adapters/go-setnx
//	hiatus run --lock exec:./go-setnx
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/hiatus-dev/hiatus/client"
)

func main() {
	newLock := func(cfg client.LockConfig) (client.Lock, error) {
		return client.NewLock(context.Background(), "setnx", cfg)
	}
	if err := client.ServeAdapter(context.Background(), os.Stdin, os.Stdout, "go-setnx", newLock); err != nil {
		fmt.Fprintf(os.Stderr, "go-setnx: %v\n", err)
		os.Exit(1)
	}
}
