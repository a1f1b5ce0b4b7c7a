package adapter_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hiatus-dev/hiatus/internal/servers"
)

// nodeScript is the absolute path of the Node adapter script rel (from
// this package's directory), whose directory has the npm package pkg
// installed, as scripts/setup --tests does.
func nodeScript(t *testing.T, rel, pkg string) string {
	t.Helper()
	script, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules", pkg)); err != nil {
		t.Fatalf("the %s adapter needs its npm packages (scripts/setup --tests installs them): %v", pkg, err)
	}
	return script
}

// startRedis starts a throwaway redis-server for the test, and a client of
// it; both end with the test.
func startRedis(t *testing.T) (string, *redis.Client) {
	t.Helper()
	sv, err := servers.StartRedis(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sv.Stop() })
	opt, err := redis.ParseURL(sv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return sv.URL, c
}

// calls counts the commands named (lower case, as INFO commandstats
// spells them) that node has run and not failed: an EVALSHA refused
// NOSCRIPT is counted in calls and failed_calls both, and set nothing.
func calls(t *testing.T, node *redis.Client, names ...string) int64 {
	t.Helper()
	info, err := node.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !slices.Contains(names, strings.TrimPrefix(name, "cmdstat_")) {
			continue
		}
		fields := map[string]int64{}
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			fields[k], _ = strconv.ParseInt(v, 10, 64)
		}
		n += fields["calls"] - fields["failed_calls"]
	}
	return n
}

// await polls cond every millisecond until it holds; past 10 s the test
// fails, saying what it waited for. The events it waits for are the
// servers' and the adapters', not the clock's.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("waited 10 s for %s", what)
}

// waitFor waits until key exists (or, with exists false, is gone).
func waitFor(t *testing.T, rc *redis.Client, key string, exists bool) {
	t.Helper()
	await(t, "key "+key+" to exist="+strconv.FormatBool(exists), func() bool {
		n, err := rc.Exists(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return (n == 1) == exists
	})
}
