package adapter_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hiatus-dev/hiatus/adapter"
)

// TestNodeRedlockRetriesKeepTheirKeys is the order of events of the
// node-redlock-retries finding (docs/findings.md), fixed: five nodes, one
// held by another holder for the whole test, two by another contender's
// partial attempt, which lapses once the acquire's first attempt has taken
// the last two nodes and failed. With redlock's own retries (its README's
// settings) those two keys stay, and its own script refuses them: once the
// lapsed ones are free its retries take them too, its value stands on four
// of the five nodes, and it is told the lock is busy. Retried outside
// redlock (retryCount 0), the failed attempt's keys are released first, and
// its next retry takes four nodes and the lock.
func TestNodeRedlockRetriesKeepTheirKeys(t *testing.T) {
	script := nodeScript(t, "../adapters/node/redlock.js", "redlock")
	for _, tc := range []struct {
		name, flags string
		want        string // the acquire's answer
	}{
		{"its-retries", "--readme", "fail"},
		{"retries-outside", "--readme --retry-outside", "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var urls []string
			var nodes []*redis.Client
			for range 5 {
				url, c := startRedis(t)
				urls, nodes = append(urls, url), append(nodes, c)
			}
			const key = "lock:retries"
			seed := func(n int, value string, px time.Duration) {
				if err := nodes[n].Set(ctx, key, value, px).Err(); err != nil {
					t.Fatal(err)
				}
			}
			seed(2, "holder", time.Minute)
			seed(0, "partial", time.Minute)
			seed(1, "partial", time.Minute)
			p, err := adapter.Start(ctx, "node "+script+" "+tc.flags,
				adapter.Setup{RedisURL: urls[0], RedisURLs: urls, Lock: key, Lease: 5 * time.Second, Retry: 5 * time.Millisecond}, os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			type result struct {
				a   adapter.Answer
				err error
			}
			// The lease outlasts the acquire's retries (7, each 200 ms
			// give or take 200): its first attempt's keys never lapse
			// while it retries.
			done := make(chan result, 1)
			go func() {
				a, err := p.Request(ctx, adapter.Request{Type: "acquire", Lock: key, LeaseMS: 5000, WaitMS: 1500}, 10*time.Second)
				done <- result{a, err}
			}()
			// Its first attempt has run on every node (each counts its
			// script's call): the other contender's partial attempt lapses.
			for i, n := range nodes {
				await(t, fmt.Sprintf("the first attempt's script on node %d", i), func() bool { return calls(t, n, "eval", "evalsha") > 0 })
			}
			if err := nodes[0].Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			if err := nodes[1].Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			// Its value as its attempts left it on node 3, and how many
			// nodes hold it, the most seen while it waits.
			most, deadline := 0, time.Now().Add(1200*time.Millisecond)
			var res result
		wait:
			for {
				select {
				case res = <-done:
					break wait
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					continue
				}
				v, err := nodes[3].Get(ctx, key).Result()
				if err != nil || v == "partial" || v == "holder" {
					continue
				}
				n := 0
				for _, c := range nodes {
					if w, err := c.Get(ctx, key).Result(); err == nil && w == v {
						n++
					}
				}
				most = max(most, n)
			}
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.a.Type != tc.want {
				t.Errorf("acquire answered %s (%s), want %s", res.a.Type, res.a.Reason, tc.want)
			}
			if res.a.Type == "ok" {
				most = 0
				for _, c := range nodes {
					if w, err := c.Get(ctx, key).Result(); err == nil && w == res.a.Token {
						most++
					}
				}
			}
			// Refused, its value stood on four nodes, all but the
			// holder's; granted, on a majority (three, when a retry came
			// between the two deletes of the partial attempt's keys).
			if res.a.Type != "ok" && most != 4 || res.a.Type == "ok" && most < 3 {
				t.Errorf("answered %s, its value stood on %d of 5 nodes", res.a.Type, most)
			}
		})
	}
}
