package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// An Etcd is etcd's own lock, the Mutex of go.etcd.io/etcd/client/v3/concurrency,
// used as its documentation shows. Each acquisition grants a lease and puts
// a key under the lock's prefix /hiatus/KEY/, attached to that lease (the
// key is the grant's token); the holder is the one whose key was created
// first, and the others wait, watching, for the keys before theirs to go.
// The client keeps the lease alive in the background (a keep-alive every
// third of its TTL) until the release: a holder keeps the lock as long as
// its process runs and reaches etcd, as Renew's does; a holder whose
// process stops (SIGSTOP) or is cut off sends no keep-alive, and when the
// TTL runs out etcd deletes its key and the next waiter holds. Each
// keep-alive of a grant held is recorded as a renewal (keepAlives). The
// holder is not told: the Session's Done says so, and a user of the Mutex who does
// not watch it, as here, goes on as if it held the lock.
//
// Each Acquire has a session (a lease) of its own, revoked at the release:
// a holder that lost its lease gets a fresh one next time, and a try that
// failed or was given up is undone by revoking its lease, which deletes
// whatever key it may have put. Fenced, the fencing token is the revision
// at which the holder's key was created: etcd's own fence, which rises from
// each holder to the next.
type Etcd struct {
	cli    *clientv3.Client
	where  string // "at ENDPOINTS", for messages
	key    string
	client string // the worker's name, announced with each lease (EtcdClientKey); "" for none
	prefix string // the Mutex's: every holder's and waiter's key is under it
	ttl    int    // the lease asked for, in whole seconds
	retry  time.Duration
	fenced bool

	// The sessions' keep-alives run under ctx, not under the ctx of the
	// Acquire that began them: a lock acquired is kept until released.
	// Close ends it.
	ctx  context.Context
	stop context.CancelFunc
	bg   sync.WaitGroup // the undoing of tries given up while etcd was slow to answer

	mu   sync.Mutex
	held map[string]*etcdHold // by grant token
	// alive records the client's keep-alives of the grants held.
	alive keepAlives
}

// An etcdHold is one acquisition: its session, and the Mutex made on it.
type etcdHold struct {
	s   *concurrency.Session
	m   *concurrency.Mutex
	ttl time.Duration // the lease the server gave
}

// EtcdPrefix is where the etcd locks named key keep their line: the
// holder's key and each waiter's, under EtcdPrefix(key)+"/".
func EtcdPrefix(key string) string { return "/hiatus/" + key }

// EtcdClientKey is where an etcd lock named key says whose a lease is: the
// worker's name, put with the lease attached as soon as it is granted,
// before any key of the lock's. etcd's leases carry no name, and the lock
// server's record names a lease's keys by it. It shares EtcdPrefix(key)
// with the lock's keys, outside their line: one watch of the prefix sees
// the name before the keys, in revision order.
func EtcdClientKey(key string, lease int64) string {
	return EtcdPrefix(key) + "-clients/" + strconv.FormatInt(lease, 16)
}

// announce puts the worker's name under EtcdClientKey of lease; nothing
// when name is "".
func announce(ctx context.Context, cli *clientv3.Client, key, name string, lease clientv3.LeaseID) error {
	if name == "" {
		return nil
	}
	if _, err := cli.Put(ctx, EtcdClientKey(key, int64(lease)), name, clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("say whose lease %x is: %w", int64(lease), err)
	}
	return nil
}

func etcdKind() LockKind {
	return LockKind{Name: "etcd", About: "etcd's concurrency.Mutex on a session whose lease its client keeps alive; fenced by the key's revision",
		Store: OnEtcd,
		New: func(ctx context.Context, cfg LockConfig) (Lock, error) {
			l, err := NewEtcd(ctx, cfg.Endpoints, cfg.Key, cfg.Lease, cfg.Retry, cfg.Fenced)
			if err == nil {
				l.client = cfg.ClientName
			}
			return l, err
		}}
}

// NewEtcd returns the etcd lock named key on the etcd cluster at endpoints,
// with leases of lease rounded up to whole seconds (etcd's unit; at least
// 1 s). The server may grant a longer one: etcd 3.4 with its default timings
// raises any TTL below 2 s to 2 s. Each Grant carries the lease the server
// gave. Acquire waits retry (default 5 ms) after a try that failed before
// trying again. NewEtcd checks that the cluster answers, waiting for it as
// long as ctx lets it; Close ends the client.
func NewEtcd(ctx context.Context, endpoints []string, key string, lease, retry time.Duration, fenced bool) (*Etcd, error) {
	where := "at " + strings.Join(endpoints, ",")
	l := &Etcd{where: where, key: key, prefix: EtcdPrefix(key), ttl: max(int((lease+time.Second-1)/time.Second), 1),
		retry: retryOr(retry), fenced: fenced, held: map[string]*etcdHold{}}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints,
		// Off: the client would log to the run's terminal each request
		// that failed while the server was down, which the history
		// records already.
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{l.alive.dialOption()},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd lock %s %s: %w", key, where, err)
	}
	l.cli = cli
	l.ctx, l.stop = context.WithCancel(context.Background())
	// Without this a wrong endpoint would be found by the first Acquire,
	// which retries until its ctx ends.
	if _, err := cli.Get(ctx, l.prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		l.stop()
		cli.Close()
		return nil, fmt.Errorf("etcd lock %s %s: %w", key, where, err)
	}
	return l, nil
}

// Close releases every lock still held, by revoking its lease, and ends the
// client.
func (l *Etcd) Close() error {
	l.mu.Lock()
	held := l.held
	l.held = map[string]*etcdHold{}
	l.mu.Unlock()
	for _, h := range held {
		l.discard(l.ctx, h)
	}
	l.stop()
	err := l.cli.Close()
	l.bg.Wait()
	if err != nil {
		return fmt.Errorf("etcd lock %s %s: close: %w", l.key, l.where, err)
	}
	return nil
}

// Acquire implements Lock. It tries until the lock is had or ctx ends,
// waiting retry after a try that failed (the server down, say), and then
// returns ErrGaveUp. Every try that did not end with the lock is undone.
func (l *Etcd) Acquire(ctx context.Context) (Grant, error) {
	return retryTries(ctx, l.retry, l.try)
}

// try makes one acquisition with a session of its own, and undoes it unless
// it returns a grant.
func (l *Etcd) try(ctx context.Context) (Grant, error) {
	// The lease is granted here rather than by NewSession, which would not
	// end with ctx and would not say what TTL the server gave.
	lease, err := l.cli.Grant(ctx, int64(l.ttl))
	if err != nil {
		return Grant{}, fmt.Errorf("etcd lock %s %s: grant a lease: %w", l.key, l.where, err)
	}
	ttl := time.Duration(lease.TTL) * time.Second
	if err := announce(ctx, l.cli, l.key, l.client, lease.ID); err != nil {
		revoke(l.ctx, l.cli, lease.ID, ttl)
		return Grant{}, fmt.Errorf("etcd lock %s %s: %w", l.key, l.where, err)
	}
	s, err := concurrency.NewSession(l.cli, concurrency.WithLease(lease.ID),
		concurrency.WithTTL(int(lease.TTL)), concurrency.WithContext(l.ctx))
	if err != nil {
		revoke(l.ctx, l.cli, lease.ID, ttl)
		return Grant{}, fmt.Errorf("etcd lock %s %s: session: %w", l.key, l.where, err)
	}
	h := &etcdHold{s: s, m: concurrency.NewMutex(s, l.prefix), ttl: ttl}

	// Lock, given up, deletes its key under the client's context, not
	// ctx: with the server unreachable it would wait for the server. So it
	// runs apart. Once ctx ends the lease is no longer kept alive, so etcd
	// drops the key within the TTL whatever becomes of the rest; Lock is
	// waited for that long at most, and its key revoked at once when it
	// returns — so that, the server answering, a try given up has left
	// nothing when Acquire returns.
	locked := make(chan error, 1)
	go func() { locked <- h.m.Lock(ctx) }()
	select {
	case err = <-locked:
	case <-ctx.Done():
		s.Orphan()
		t := time.NewTimer(ttl)
		defer t.Stop()
		select {
		case <-locked:
			l.discard(l.ctx, h)
		case <-t.C:
			l.bg.Add(1)
			go func() {
				defer l.bg.Done()
				<-locked
				l.discard(l.ctx, h)
			}()
		}
		return Grant{}, ctx.Err()
	}
	if err != nil {
		// ErrSessionExpired among others: the lease ran out while we
		// waited, and the next try has a new one.
		l.discard(l.ctx, h)
		return Grant{}, fmt.Errorf("etcd lock %s %s: %w", l.key, l.where, err)
	}

	g := Grant{Token: h.m.Key(), Lease: ttl}
	if l.fenced {
		resp, err := l.cli.Get(ctx, h.m.Key())
		if err == nil && len(resp.Kvs) == 0 {
			err = fmt.Errorf("lease lost before the fence was read")
		}
		if err != nil {
			l.discard(l.ctx, h)
			return Grant{}, fmt.Errorf("etcd lock %s %s: fence: %w", l.key, l.where, err)
		}
		g.Fence = resp.Kvs[0].CreateRevision
	}
	l.mu.Lock()
	l.held[g.Token] = h
	l.mu.Unlock()
	l.alive.hold(ctx, s.Lease(), g)
	return g, nil
}

// Release implements Lock: a transaction deletes the holder's key if it
// is still there (if the lease has not run out), and otherwise says
// whether another holds the lock now; then the lease is revoked.
func (l *Etcd) Release(ctx context.Context, g Grant) error {
	l.mu.Lock()
	h := l.held[g.Token]
	delete(l.held, g.Token)
	l.mu.Unlock()
	if h == nil {
		return fmt.Errorf("etcd lock %s %s: release: no grant with token %s", l.key, l.where, g.Token)
	}
	// Revoked even when the transaction failed: whatever became of it, the
	// revoke releases the lock, or else the lease, no longer kept alive,
	// runs out.
	defer l.discard(ctx, h)
	resp, err := l.cli.Txn(ctx).
		If(h.m.IsOwner()).
		Then(clientv3.OpDelete(h.m.Key())).
		Else(clientv3.OpGet(l.prefix+"/", clientv3.WithFirstCreate()...)).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd lock %s %s: release: %w", l.key, l.where, err)
	}
	switch {
	case resp.Succeeded:
		return nil
	case len(resp.Responses[0].GetResponseRange().Kvs) > 0:
		// Our key is gone, and the first of those left holds the lock.
		return ErrStolen
	}
	return ErrNotHeld
}

// discard stops keeping h's lease alive and revokes it, which deletes h's
// key if it is still there.
func (l *Etcd) discard(ctx context.Context, h *etcdHold) {
	l.alive.drop(h.s.Lease())
	h.s.Orphan()
	revoke(ctx, l.cli, h.s.Lease(), h.ttl)
}

// revoke revokes a lease no longer kept alive. A revoke that fails is let
// be: the lease runs out within its TTL, and past the TTL the revoke would
// only find it gone, so it is not waited for longer.
func revoke(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	_, _ = cli.Revoke(ctx, id)
}

// Freeze implements Freezer: the keep-alives of every grant held end, as
// they stop in a stopped process, and etcd drops each key when its TTL
// runs out. thaw resumes nothing: a session's keep-alive, once ended, is
// not begun again, so Freeze stands for a stop longer than the TTL (as the
// pause test's are: until another holder took the lock, or twice the TTL).
func (l *Etcd) Freeze() (thaw func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.held {
		l.alive.drop(h.s.Lease())
		h.s.Orphan()
	}
	return func() {}
}
