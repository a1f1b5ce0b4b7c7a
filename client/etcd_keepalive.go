package client

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/hiatus-dev/hiatus/history"
)

// keepAlives records the keep-alives an etcd client sends, on its own, of
// the leases of the grants held — the renewals of etcd's locks — as :renew
// ops of each grant's holder's renewer (history.ByLibrary): a keep-alive
// is begun as the client sends its request on the LeaseKeepAlive stream
// and ends as the answer for its lease comes, :ok while the lease lives
// (TTL > 0), :fail :lost when the server no longer has it. The client may
// send a lease's next keep-alive before the last is answered; the answers
// come in order, and are paired so. It watches the stream from the inside,
// as a gRPC stream interceptor: the client offers no other view of them.
type keepAlives struct {
	mu      sync.Mutex
	grants  map[clientv3.LeaseID]heldGrant
	pending map[clientv3.LeaseID][]renewing
}

// dialOption is the interceptor that watches the client's keep-alives.
func (k *keepAlives) dialOption() grpc.DialOption {
	return grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" {
			return s, err
		}
		return &keepAliveStream{ClientStream: s, k: k}, nil
	})
}

// hold has the keep-alives of lease id recorded as renewals of g, which
// the Acquire under ctx took; drop ends it, once the lease is no longer
// kept alive for a grant held (released, given up, frozen).
func (k *keepAlives) hold(ctx context.Context, id clientv3.LeaseID, g Grant) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.grants == nil {
		k.grants, k.pending = map[clientv3.LeaseID]heldGrant{}, map[clientv3.LeaseID][]renewing{}
	}
	k.grants[id] = heldGrant{ctx: context.WithoutCancel(ctx), g: g}
}

func (k *keepAlives) drop(id clientv3.LeaseID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.grants, id)
	delete(k.pending, id) // never answered now: of unknown outcome in the history
}

// sent begins the renewal a keep-alive of lease id is, for a grant held.
func (k *keepAlives) sent(id clientv3.LeaseID) {
	k.mu.Lock()
	held, ok := k.grants[id]
	k.mu.Unlock()
	if !ok {
		return // a lease of no grant held: a try under way, or one given up
	}
	h, isHolder := holderOf(held.ctx)
	if !isHolder {
		return
	}
	rn := h.begin(held.ctx, history.ByLibrary, held.g)
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, still := k.grants[id]; still {
		k.pending[id] = append(k.pending[id], rn)
	}
}

// answered ends the oldest keep-alive of lease id not yet answered.
func (k *keepAlives) answered(id clientv3.LeaseID, ttl int64) {
	k.mu.Lock()
	q := k.pending[id]
	if len(q) == 0 {
		k.mu.Unlock()
		return
	}
	rn := q[0]
	k.pending[id] = q[1:]
	k.mu.Unlock()
	var err error
	if ttl <= 0 {
		err = ErrLost // the server has no such lease: it ran out, or was revoked
	}
	rn.end(context.Background(), err)
}

// A keepAliveStream is the client's LeaseKeepAlive stream, watched.
type keepAliveStream struct {
	grpc.ClientStream
	k *keepAlives
}

func (s *keepAliveStream) SendMsg(m any) error {
	if req, ok := m.(*pb.LeaseKeepAliveRequest); ok {
		s.k.sent(clientv3.LeaseID(req.ID))
	}
	return s.ClientStream.SendMsg(m)
}

func (s *keepAliveStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if resp, ok := m.(*pb.LeaseKeepAliveResponse); ok && err == nil {
		s.k.answered(clientv3.LeaseID(resp.ID), resp.TTL)
	}
	return err
}
