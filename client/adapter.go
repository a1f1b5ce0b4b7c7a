package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/redis/go-redis/v9"
)

// ServeAdapter makes this process a lock adapter (package adapter) for a
// Lock of this package, built by newLock when hiatus says where its Redis
// is: the protocol's Go side, and the measure of what the protocol costs
// against the same lock built in. It answers requests from r on w until r
// ends.
func ServeAdapter(ctx context.Context, r io.Reader, w io.Writer, name string, newLock func(LockConfig) (Lock, error)) error {
	s := &served{name: name, newLock: newLock, grants: map[string]grant{}, locks: map[time.Duration]Lock{}}
	defer s.close()
	return adapter.Serve(ctx, r, w, s)
}

// served is a Lock seen through the protocol.
type served struct {
	name    string
	newLock func(LockConfig) (Lock, error)
	rdb     *redis.Client
	cfg     LockConfig
	locks   map[time.Duration]Lock // by lease: each acquire names its own
	grants  map[string]grant       // by token, until released
}

// A grant is one the adapter gave, and the lock that gave it.
type grant struct {
	Grant
	lock Lock
}

func (s *served) Init(ctx context.Context, st adapter.Setup) (adapter.Hello, error) {
	if len(st.Sentinel.Addrs) > 0 {
		s.rdb = FailoverClient(st.Sentinel, st.ClientName, 3*time.Second) // go-redis's default read timeout, redis_url's client's
	} else {
		opts, err := redis.ParseURL(st.RedisURL)
		if err != nil {
			return adapter.Hello{}, fmt.Errorf("redis_url: %w", err)
		}
		opts.ClientName = st.ClientName // the worker's: the lock server's record names it
		s.rdb = redis.NewClient(opts)
	}
	s.cfg = LockConfig{Redis: s.rdb, Key: st.Lock, Lease: st.Lease, Retry: st.Retry}
	if _, err := s.lockFor(st.Lease); err != nil {
		return adapter.Hello{}, err
	}
	return adapter.Hello{Name: s.name, Version: "1", Library: "hiatus client, go-redis v9", Sentinel: len(st.Sentinel.Addrs) > 0}, nil
}

// lockFor returns the lock of lease.
func (s *served) lockFor(lease time.Duration) (Lock, error) {
	if l, ok := s.locks[lease]; ok {
		return l, nil
	}
	cfg := s.cfg
	cfg.Lease = lease
	l, err := s.newLock(cfg)
	if err == nil {
		s.locks[lease] = l
	}
	return l, err
}

func (s *served) Acquire(ctx context.Context, _ string, lease, wait time.Duration) adapter.Answer {
	l, err := s.lockFor(lease)
	if err != nil {
		return adapter.FailWith(err.Error())
	}
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	g, err := l.Acquire(actx)
	switch {
	case errors.Is(err, ErrGaveUp):
		return adapter.FailWith(adapter.ReasonBusy)
	case err != nil:
		return adapter.Unknown(err.Error())
	}
	s.grants[g.Token] = grant{g, l}
	return adapter.Answer{Type: adapter.TypeOK, Token: g.Token, Fence: g.Fence, LeaseMS: g.Lease.Milliseconds()}
}

func (s *served) Release(ctx context.Context, _, token string) adapter.Answer {
	g, ok := s.grants[token]
	if !ok {
		return adapter.FailWith("no grant with that token")
	}
	delete(s.grants, token)
	switch err := g.lock.Release(ctx, g.Grant); {
	case err == nil:
		return adapter.OK()
	case errors.Is(err, ErrNotHeld):
		return adapter.FailWith(adapter.ReasonNotHeld)
	case errors.Is(err, ErrStolen):
		return adapter.FailWith(adapter.ReasonStolen)
	default:
		return adapter.Unknown(err.Error())
	}
}

func (s *served) Renew(context.Context, string, string, time.Duration) adapter.Answer {
	return adapter.FailWith("this adapter does not renew (its hello says renewal false)")
}

func (s *served) close() {
	if s.rdb != nil {
		s.rdb.Close()
	}
}
