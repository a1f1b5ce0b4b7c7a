package harness

import (
	"context"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// bareMajority is how a restart in a sequence after a partition finds its
// node (nemesis.RestartNode.Holding): it polls the lock's nodes until the
// worker the partition cut off holds a bare majority — its grant's token
// on a majority of the nodes the partition left alone, and on none of
// those it cut — and names a node of it. That is the window of Kleppmann's
// restart: a holder of all the nodes loses nothing to one restart, and
// another worker's bare majority (its key kept off the cut nodes by the
// cut worker's stale one) is no window at all, since the cut worker cannot
// reach the nodes that would give it a majority. grant says the token of
// the grant the worker in a slot holds. It gives up after wait, or when
// ctx ends.
func bareMajority(urls []string, key string, wait time.Duration, grant func(slot int) (string, bool)) func(context.Context, []int, int) (int, bool) {
	return func(ctx context.Context, avoid []int, cut int) (int, bool) {
		var rdbs []*redis.Client
		for _, u := range urls {
			rdb, err := redisClient(u, 1, 100*time.Millisecond)
			if err != nil {
				return 0, false
			}
			defer rdb.Close()
			rdbs = append(rdbs, rdb)
		}
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if token, ok := grant(cut); ok {
				if i, ok := heldBare(ctx, rdbs, key, avoid, token); ok {
					return i, true
				}
			}
			select {
			case <-ctx.Done():
				return 0, false
			case <-tick.C:
			}
		}
	}
}

// heldBare reads the key on every node and names the first node where it
// holds token, if token is on a majority of them and on none of avoid.
func heldBare(ctx context.Context, rdbs []*redis.Client, key string, avoid []int, token string) (int, bool) {
	first, n := -1, 0
	for i, rdb := range rdbs {
		if t, _ := rdb.Get(ctx, key).Result(); t != token { // "" when absent or not answered
			continue
		}
		if slices.Contains(avoid, i) {
			return 0, false
		}
		if first < 0 {
			first = i
		}
		n++
	}
	return first, n > len(rdbs)/2
}
