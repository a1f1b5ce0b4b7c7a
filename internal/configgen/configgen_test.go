package configgen

import (
	"slices"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/harness"
	"pgregory.net/rapid"
)

// TestConfigDrawsEveryFault: the configurations drawn hold every kind of
// fault, sequences of them, and the random nemesis. The faults are drawn by
// what validation allows, so a rule that refused a kind everywhere would
// shrink the property tests without a word; this says which went missing.
func TestConfigDrawsEveryFault(t *testing.T) {
	g := rapid.Custom(Config)
	seen := map[string]int{}
	sequences, random := 0, 0
	for i := range 500 {
		c := g.Example(i)
		if c.Nemesis == harness.Random {
			random++
			continue
		}
		for _, f := range c.FaultNames() {
			parts := strings.Split(f, "+")
			if len(parts) > 1 {
				sequences++
			}
			for _, p := range parts {
				seen[p]++
			}
		}
	}
	for _, k := range harness.NemesisNames() {
		if seen[k] == 0 {
			t.Errorf("no configuration of 500 drawn has %s", k)
		}
	}
	for k := range seen {
		if !slices.Contains(harness.NemesisNames(), k) {
			t.Errorf("a configuration drawn has %q, no kind of fault", k)
		}
	}
	if sequences == 0 || random == 0 {
		t.Errorf("of 500 configurations drawn, %d had a sequence and %d the random nemesis: want some of each", sequences, random)
	}
	t.Logf("of 500 configurations: %d sequences, %d random; each kind: %v", sequences, random, seen)
}
