package harness_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/compare"
	"github.com/hiatus-dev/hiatus/harness"
)

// TestCensusAdapters runs the conformance check of every adapter of the
// census (docs/census.md), each on the store its row keeps its lock in:
// the census's cells are only as good as its adapters. What they need comes
// from scripts/setup --tests; a missing package fails the check, loudly.
func TestCensusAdapters(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range compare.CensusRows() {
		command, ok := strings.CutPrefix(r.Lock, client.ExecPrefix)
		if !ok || seen[command+"@"+r.Store] {
			continue
		}
		seen[command+"@"+r.Store] = true
		store := r.Store
		if store == "" {
			store = harness.AdapterOnRedis
		}
		t.Run(strings.ReplaceAll(command, "/", "_")+"@"+store, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			// The rows name their adapters from the repository's root.
			local := strings.Replace(command, "adapters/", "../adapters/", 1)
			if err := harness.CheckAdapter(context.Background(), local, "", store, &out, false); err != nil {
				t.Errorf("%v:\n%s", err, out.String())
			}
		})
	}
}
