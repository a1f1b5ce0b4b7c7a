package harness

import (
	"context"
	"slices"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/redis/go-redis/v9"
)

// bareMajority is how a restart in a sequence after a partition finds its
// node (nemesis.RestartNode.Holding): it polls the lock's nodes until one
// holder holds a bare majority — the lock's key under one token on a
// majority of the nodes the partition left alone, and on none of those it
// cut — and names a node of it. That is the window of Kleppmann's restart:
// a holder of all the nodes loses nothing to one restart. It gives up
// after wait, or when ctx ends.
func bareMajority(urls []string, key string, wait time.Duration) func(context.Context, []int) (int, bool) {
	return func(ctx context.Context, avoid []int) (int, bool) {
		var rdbs []*redis.Client
		for _, u := range urls {
			rdb, err := redisClient(u, history.ClientRun, 1, 100*time.Millisecond)
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
			if i, ok := heldBare(ctx, rdbs, key, avoid); ok {
				return i, true
			}
			select {
			case <-ctx.Done():
				return 0, false
			case <-tick.C:
			}
		}
	}
}

// heldBare reads the key on every node and names the first node of a
// holder that has a majority of them, none of avoid's among them.
func heldBare(ctx context.Context, rdbs []*redis.Client, key string, avoid []int) (int, bool) {
	tokens := make([]string, len(rdbs))
	for i, rdb := range rdbs {
		tokens[i], _ = rdb.Get(ctx, key).Result() // "" when absent or not answered
	}
	for i, t := range tokens {
		if t == "" {
			continue
		}
		n, cut := 0, false
		for j, u := range tokens {
			if u == t {
				n++
				cut = cut || slices.Contains(avoid, j)
			}
		}
		if n > len(rdbs)/2 && !cut { // i holds t, so is not one of avoid
			return i, true
		}
	}
	return 0, false
}
