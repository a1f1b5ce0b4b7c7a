package client

import (
	"context"
	"net"
	"time"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/redis/go-redis/v9"
)

// FailoverClient connects to the primary the sentinels s name, and follows
// their failovers: no retries, each wait bounded by timeout, as hiatus's
// other clients. It dials the address s.NAT maps a node's to, where it
// maps one; its connections call themselves name.
func FailoverClient(s adapter.Sentinel, name string, timeout time.Duration) *redis.Client {
	var d net.Dialer
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: s.Master, SentinelAddrs: s.Addrs, MaxRetries: -1, PoolSize: 4, ClientName: name,
		ReadTimeout: timeout, WriteTimeout: timeout, DialTimeout: timeout, ContextTimeoutEnabled: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if to, ok := s.NAT[addr]; ok {
				addr = to
			}
			return d.DialContext(ctx, network, addr)
		},
	})
}
