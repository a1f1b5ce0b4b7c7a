package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

// An EtcdLockRPC is the lock etcd's server serves: the Lock RPC of its
// v3lock service, which takes a lock's name and a lease of the caller's
// and answers, once the caller holds the lock, with a key that "will exist
// on etcd for the duration that the Lock caller owns the lock" (v3lock's
// proto). The server implements it by running its own client's
// concurrency.Mutex on the caller's lease, so the lock's version is the
// server's: on Debian's etcd-server 3.4.23, 3.4's Mutex, which once the
// keys put before the caller's are gone says the caller holds the lock
// without looking at the caller's own key. A caller whose lease ran out
// while it waited is granted a lock whose key etcd has already deleted,
// and the next caller is granted it too (etcd-io/etcd#11456 and #9921;
// fixed in 3.5 by #11408, which the 3.4 branch never got: the Mutex reads
// its key after the wait and returns ErrSessionExpired when it is gone).
//
// It is used as a careful caller uses it, as the Etcd lock uses the
// client's Mutex: each acquisition grants a lease and keeps it alive (a
// keep-alive every third of its TTL, from before the Lock call, while it
// waits and while the lock is held, until the release), checks what Lock
// returns, and takes a lock that Lock said was held as held. It does not
// read its key back after Lock returned: that read is the fix, which 3.5
// made in the Mutex, not something v3lock's documentation asks of callers.
//
// v3lock's types are generated in etcd's server module, which hiatus does
// not import (it is a whole server); the two messages it needs are two
// fields each, written and read here with protowire on the client's own
// gRPC connection. The release is a transaction that deletes the key if
// it is still there (what the Unlock RPC does: a plain delete of the key,
// which is the caller's own) and otherwise says whether another holds the
// lock; then the lease is revoked.
type EtcdLockRPC struct {
	cli    *clientv3.Client
	where  string // "at ENDPOINTS", for messages
	key    string
	name   string // the lock's name as Lock is given it; its keys are name/LEASE
	client string // the worker's name, announced with each lease (EtcdClientKey); "" for none
	ttl    int    // the lease asked for, in whole seconds
	retry  time.Duration
	fencer fencer

	// The keep-alives run under ctx, not under the ctx of the Acquire that
	// began them: a lock acquired is kept until released. Close ends it.
	ctx  context.Context
	stop context.CancelFunc

	mu   sync.Mutex
	held map[string]*rpcHold // by grant token
	// alive records the client's keep-alives of the grants held.
	alive keepAlives
}

// An rpcHold is one acquisition's lease, kept alive until stop.
type rpcHold struct {
	lease clientv3.LeaseID
	ttl   time.Duration // the lease the server gave
	stop  context.CancelFunc
}

func etcdLockRPCKind() LockKind {
	return LockKind{Name: "etcd-v3lock", About: "etcd's server-side Lock RPC (v3lock) on a lease its client keeps alive: the Mutex of the server's version (3.4's on Debian)",
		Store: OnEtcd,
		New: func(ctx context.Context, cfg LockConfig) (Lock, error) {
			l, err := NewEtcdLockRPC(ctx, cfg.Endpoints, cfg.Key, cfg.Lease, cfg.Retry, cfg.fencer())
			if err == nil {
				l.client = cfg.ClientName
			}
			return l, err
		}}
}

// NewEtcdLockRPC returns the lock named key served by the etcd cluster at
// endpoints, with leases of lease rounded up to whole seconds (at least
// 1 s; etcd 3.4 with its default timings grants at least 2 s, and each
// Grant carries the lease the server gave). Acquire waits retry (default
// 5 ms) after a try that failed. Fenced by f, each grant takes a token by
// an INCR right after it: the Lock RPC hands out none of its own. It checks
// that the cluster answers, waiting as long as ctx lets it.
func NewEtcdLockRPC(ctx context.Context, endpoints []string, key string, lease, retry time.Duration, f fencer) (*EtcdLockRPC, error) {
	where := "at " + strings.Join(endpoints, ",")
	l := &EtcdLockRPC{where: where, key: key, name: EtcdPrefix(key), ttl: max(int((lease+time.Second-1)/time.Second), 1),
		retry: retryOr(retry), fencer: f, held: map[string]*rpcHold{}}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop(), DialOptions: []grpc.DialOption{l.alive.dialOption()}})
	if err != nil {
		return nil, fmt.Errorf("etcd lock RPC %s %s: %w", key, where, err)
	}
	l.cli = cli
	l.ctx, l.stop = context.WithCancel(context.Background())
	if _, err := cli.Get(ctx, l.name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		l.stop()
		cli.Close()
		return nil, fmt.Errorf("etcd lock RPC %s %s: %w", key, where, err)
	}
	return l, nil
}

// Close releases every lock still held, by revoking its lease, and ends
// the client.
func (l *EtcdLockRPC) Close() error {
	l.mu.Lock()
	held := l.held
	l.held = map[string]*rpcHold{}
	l.mu.Unlock()
	for _, h := range held {
		l.discard(l.ctx, h)
	}
	l.stop()
	if err := l.cli.Close(); err != nil {
		return fmt.Errorf("etcd lock RPC %s %s: close: %w", l.key, l.where, err)
	}
	return nil
}

// Acquire implements Lock. It tries until the lock is had or ctx ends,
// waiting retry after a try that failed, and then returns ErrGaveUp.
func (l *EtcdLockRPC) Acquire(ctx context.Context) (Grant, error) {
	return retryTries(ctx, l.retry, l.try)
}

// try makes one acquisition on a lease of its own, and undoes it unless it
// returns a grant.
func (l *EtcdLockRPC) try(ctx context.Context) (Grant, error) {
	lease, err := l.cli.Grant(ctx, int64(l.ttl))
	if err != nil {
		return Grant{}, fmt.Errorf("etcd lock RPC %s %s: grant a lease: %w", l.key, l.where, err)
	}
	h := &rpcHold{lease: lease.ID, ttl: time.Duration(lease.TTL) * time.Second}
	if err := announce(ctx, l.cli, l.key, l.client, lease.ID); err != nil {
		revoke(l.ctx, l.cli, lease.ID, h.ttl)
		return Grant{}, fmt.Errorf("etcd lock RPC %s %s: %w", l.key, l.where, err)
	}
	kctx, stop := context.WithCancel(l.ctx)
	h.stop = stop
	alive, err := l.cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		l.discard(l.ctx, h)
		return Grant{}, fmt.Errorf("etcd lock RPC %s %s: keep the lease alive: %w", l.key, l.where, err)
	}
	go func() {
		for range alive { // the client's keep-alives, until stop or the lease is gone
		}
	}()
	// Given up (ctx ended), the call is cancelled, and the server's Mutex
	// deletes the key it put; the revoke would delete it all the same.
	key, err := l.lock(ctx, lease.ID)
	if err != nil {
		l.discard(l.ctx, h)
		return Grant{}, fmt.Errorf("etcd lock RPC %s %s: %w", l.key, l.where, err)
	}
	g := Grant{Token: key, Lease: h.ttl}
	if g.Fence, err = l.fencer.fence(ctx); err != nil {
		l.discard(l.ctx, h)
		return Grant{}, fmt.Errorf("etcd lock RPC %s %s: %w", l.key, l.where, err)
	}
	l.mu.Lock()
	l.held[g.Token] = h
	l.mu.Unlock()
	l.alive.hold(ctx, h.lease, g)
	return g, nil
}

// v3lock's Lock method, and the fields of its messages (v3lock.proto):
// LockRequest{bytes name = 1; int64 lease = 2}, LockResponse{ResponseHeader
// header = 1; bytes key = 2}.
const (
	lockMethod   = "/v3lockpb.Lock/Lock"
	lockReqName  = 1
	lockReqLease = 2
	lockRespKey  = 2
)

var errNoKey = errors.New("its answer holds no key")

// lock calls Lock with the lock's name and lease, and returns the key it
// answered with.
func (l *EtcdLockRPC) lock(ctx context.Context, lease clientv3.LeaseID) (string, error) {
	var req []byte
	req = protowire.AppendTag(req, lockReqName, protowire.BytesType)
	req = protowire.AppendString(req, l.name)
	req = protowire.AppendTag(req, lockReqLease, protowire.VarintType)
	req = protowire.AppendVarint(req, uint64(lease))
	var resp []byte
	err := l.cli.ActiveConnection().Invoke(ctx, lockMethod, &req, &resp,
		grpc.ForceCodec(rawCodec{}), grpc.WaitForReady(true))
	if err != nil {
		return "", fmt.Errorf("Lock: %w", err)
	}
	key, err := bytesField(resp, lockRespKey)
	if err != nil {
		return "", fmt.Errorf("Lock: %w", err)
	}
	return string(key), nil
}

// bytesField returns the bytes field num of the protobuf message b.
func bytesField(b []byte, num protowire.Number) ([]byte, error) {
	for len(b) > 0 {
		n, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		b = b[m:]
		if n == num && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			return v, nil
		}
		if m = protowire.ConsumeFieldValue(n, typ, b); m < 0 {
			return nil, protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil, errNoKey
}

// rawCodec hands gRPC messages already written as protobuf (*[]byte) and
// takes its answers so.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

// Name is the codec's content subtype: the messages are protobuf.
func (rawCodec) Name() string { return "proto" }

// Release implements Lock: a transaction deletes the holder's key if it is
// still there, and otherwise says whether another holds the lock now; then
// the lease is revoked.
func (l *EtcdLockRPC) Release(ctx context.Context, g Grant) error {
	l.mu.Lock()
	h := l.held[g.Token]
	delete(l.held, g.Token)
	l.mu.Unlock()
	if h == nil {
		return fmt.Errorf("etcd lock RPC %s %s: release: no grant with token %s", l.key, l.where, g.Token)
	}
	defer l.discard(ctx, h)
	resp, err := l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(g.Token), ">", 0)).
		Then(clientv3.OpDelete(g.Token)).
		Else(clientv3.OpGet(l.name+"/", clientv3.WithFirstCreate()...)).
		Commit()
	if err != nil {
		return fmt.Errorf("etcd lock RPC %s %s: release: %w", l.key, l.where, err)
	}
	switch {
	case resp.Succeeded:
		return nil
	case len(resp.Responses[0].GetResponseRange().Kvs) > 0:
		return ErrStolen
	}
	return ErrNotHeld
}

// discard stops keeping h's lease alive and revokes it, which deletes h's
// key if it is still there.
func (l *EtcdLockRPC) discard(ctx context.Context, h *rpcHold) {
	l.alive.drop(h.lease)
	h.stop()
	revoke(ctx, l.cli, h.lease, max(h.ttl, time.Second))
}

// Freeze implements Freezer as Etcd's does: the keep-alives of every grant
// held end, and thaw resumes nothing.
func (l *EtcdLockRPC) Freeze() (thaw func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.held {
		l.alive.drop(h.lease)
		h.stop()
	}
	return func() {}
}
