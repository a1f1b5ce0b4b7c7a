package harness

import (
	"context"
	"io"
	"strings"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/internal/servers"
)

// probeAdapter starts the run's lock adapter, when it has one, and waits
// for its hello before any worker starts it: an adapter that cannot start
// is a setup error, said once with what it wrote, not a worker per slot
// failing in the log.
func probeAdapter(ctx context.Context, cfg Config) (*adapter.Hello, error) {
	command, ok := strings.CutPrefix(cfg.Lock, client.ExecPrefix)
	if !ok {
		return nil, nil
	}
	var stderr adapter.Tail
	p, err := adapter.Start(ctx, command, adapter.Setup{RedisURL: cfg.RedisURL, Lock: lockKey(cfg.Name),
		Lease: cfg.Lease, Retry: cfg.Retry, Hello: cfg.AdapterHello}, &stderr)
	if err != nil {
		if t := stderr.String(); t != "" {
			return nil, setupErrorf("--lock: %v; it wrote on stderr:\n%s", err, t)
		}
		return nil, setupErrorf("--lock: %v", err)
	}
	p.Close()
	if cfg.ExtendBeforeWrite && !p.Hello.Renewal {
		return nil, setupErrorf("--extend-before-write: adapter %q takes no renew requests (its hello said renewal: false)", command)
	}
	return &p.Hello, nil
}

// CheckAdapter runs the protocol's conformance check (adapter.Conform) of
// the adapter command against the Redis at redisURL, or a throwaway
// redis-server when it is "", saying what it found on out.
func CheckAdapter(ctx context.Context, command, redisURL string, out io.Writer, trace bool) error {
	if redisURL == "" {
		sv, err := servers.StartRedis(ctx)
		if err != nil {
			return setupErrorf("throwaway redis-server: %w", err)
		}
		defer sv.Stop()
		redisURL = sv.URL
	}
	return adapter.Conform(ctx, command, redisURL, out, trace)
}
