package stacks

import (
	"strings"
	"testing"
)

// TestGoroutines: a goroutine in a function of this package is among
// those listed, with its frame.
func TestGoroutines(t *testing.T) {
	release, done := make(chan struct{}), make(chan struct{})
	go parked(release, done)
	<-done // parked runs, and cannot end before release is closed
	defer close(release)
	for _, g := range Goroutines() {
		if strings.Contains(g, "internal/stacks.parked(") {
			return
		}
	}
	t.Fatal("the goroutine in parked is not listed")
}

// TestNotTheCaller: the goroutine asking is not among those listed.
func TestNotTheCaller(t *testing.T) {
	for _, g := range Goroutines() {
		if strings.Contains(g, "internal/stacks.TestNotTheCaller(") {
			t.Fatalf("the caller is listed:\n%s", g)
		}
	}
}

func parked(release, done chan struct{}) {
	close(done)
	<-release
}
