// Package stacks lists the goroutines of this process, so tests can say
// which of a package's goroutines outlived what started them.
package stacks

import (
	"runtime"
	"strings"
)

// Goroutines returns the stack of every goroutine but the caller's, one
// string each, as runtime.Stack prints them.
func Goroutines() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			// runtime.Stack puts the caller's own goroutine first.
			return strings.Split(string(buf[:n]), "\n\n")[1:]
		}
		buf = make([]byte, 2*len(buf))
	}
}
