package lockserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// An EtcdNode is an etcd server the lock is kept on, as etcd's Mutex (and
// its server-side Lock RPC) keeps it: each holder's and waiter's key under
// the lock's prefix, attached to its lease, the holder the one created
// first.
type EtcdNode struct {
	Name      string   // the record's process for it: "etcd-0"
	Endpoints []string // its client URLs
}

// The etcd record comes from a watch of the lock's prefix from the
// revision the run began at: every put and delete of a key, with its
// revision and the lease it is attached to, in revision order. From them it
// derives who held the lock: a key that becomes the first of the line is
// granted (at its creation, or at the delete of the key before it); a key
// created behind another is refused; the holder's key deleted alone is
// :delete (the holder's unlock); deleted with its lease, as a revoke or
// an expiry deletes every key of a lease at once (the worker's name for
// the lease, client.EtcdClientKey, goes in the same revision), it is
// :delete before the earliest its lease could run out (etcd's time to
// live, asked at the key's put: a revoke), and after that :expire when
// etcd's count of expired leases (etcd_debugging_server_lease_expired_total,
// at /metrics) has risen since it was last read, or rises within a second
// (etcd counts an expiry once the revoke it makes has applied, which the
// watch may deliver first), else :delete. A rise read there may be another
// lease's, a waiter's whose count came late. Each grant hands out the
// key's creation revision, etcd's fencing token, as a :fence. A lease is
// named by the key its lock puts beside it, which the same watch sees
// first. The watch carries no time: an event is stamped when the watch delivered it
// (this machine's clock on the history's), after it happened by the
// watch's latency; its :command says its revision.

// An etcdKey is a key of the lock's line.
type etcdKey struct {
	created int64 // its creation revision
	lease   int64
	// expires is the earliest its lease could run out, on this process's
	// clock: when it was asked at the put for its time to live, which etcd
	// gives in whole seconds cut down, plus that. Zero when not known. A
	// lower bound while etcd's clock runs as this one does (no fault steps
	// it); a keep-alive only puts it later.
	expires time.Time
}

// An etcdSource records one etcd server.
type etcdSource struct {
	rec     *Recorder
	index   int
	node    EtcdNode
	cli     *clientv3.Client
	line    string // the prefix of the lock's keys: Key + "/"
	clients string // the prefix of the lease names: Key + "-clients/"
	metrics string // the URL of its metrics
	start   int64  // the revision the record begins after

	names   map[int64]string // lease -> the worker whose it is
	ended   map[int64]int64  // lease -> the revision its name was deleted at
	live    map[string]etcdKey
	holder  string // the key first in the line; "" when none
	expired float64
	hc      *http.Client

	cancel context.CancelFunc
	done   chan struct{}
	queue  chan stamped // the watch's responses, stamped, waiting to be taken
	mu     sync.Mutex
	seen   int64 // the last revision the watch delivered
}

// startEtcd connects to the etcd node, reads the line as it stands and
// starts watching it.
func (r *Recorder) startEtcd(ctx context.Context, index int, n EtcdNode) (*etcdSource, error) {
	if len(n.Endpoints) == 0 {
		return nil, fmt.Errorf("%s: no endpoints", n.Name)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: n.Endpoints, Logger: zap.NewNop(), DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.Name, err)
	}
	s := &etcdSource{rec: r, index: index, node: n, cli: cli, line: r.cfg.Key + "/", clients: r.cfg.Key + "-clients/",
		metrics: strings.TrimRight(n.Endpoints[0], "/") + "/metrics", names: map[int64]string{}, ended: map[int64]int64{},
		live: map[string]etcdKey{}, queue: make(chan stamped, watchQueue),
		hc: &http.Client{Timeout: sampleTimeout}, done: make(chan struct{})}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.Get(gctx, r.cfg.Key, clientv3.WithPrefix())
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("record %s: read the lock's keys: %w", n.Name, err)
	}
	s.start = resp.Header.Revision
	for _, kv := range resp.Kvs {
		s.put(gctx, kv)
	}
	s.holder = s.first()
	s.expired, _ = s.expiredLeases(gctx)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = stop
	w := cli.Watch(wctx, r.cfg.Key, clientv3.WithPrefix(), clientv3.WithRev(s.start+1), clientv3.WithPrevKV())
	go s.run(wctx, w)
	return s, nil
}

// put takes a key put, silently: a name, or a key of the line.
func (s *etcdSource) put(ctx context.Context, kv *mvccpb.KeyValue) {
	k := string(kv.Key)
	switch {
	case strings.HasPrefix(k, s.clients):
		if id, ok := s.clientLease(k); ok {
			s.names[id] = string(kv.Value)
		}
	case strings.HasPrefix(k, s.line):
		s.live[k] = etcdKey{created: kv.CreateRevision, lease: kv.Lease, expires: s.expires(ctx, kv.Lease)}
	}
}

// first is the key first in the line: the one created first.
func (s *etcdSource) first() string {
	best, rev := "", int64(0)
	for k, v := range s.live {
		if best == "" || v.created < rev {
			best, rev = k, v.created
		}
	}
	return best
}

// run takes the watch's events until it ends. Each response is stamped
// as it comes, and taken in turn: taking one may wait (leaseExpired), and
// the next must not be stamped late for it.
func (s *etcdSource) run(ctx context.Context, w clientv3.WatchChan) {
	defer close(s.done)
	go func() {
		defer close(s.queue)
		for resp := range w {
			s.queue <- stamped{s.rec.hist.now(), time.Now(), resp}
		}
	}()
	failed := false
	for r := range s.queue {
		if failed {
			continue // drained until the watch ends
		}
		if err := r.resp.Err(); err != nil {
			s.rec.logf("%s: the watch: %v", s.node.Name, err)
			s.gap(fmt.Sprintf("the watch of %s: %v", s.node.Name, err))
			failed = true
			continue
		}
		for _, ev := range r.resp.Events {
			if id, ok := s.clientLease(string(ev.Kv.Key)); ok && ev.Type == clientv3.EventTypeDelete {
				s.ended[id] = ev.Kv.ModRevision
			}
		}
		for _, ev := range r.resp.Events {
			s.event(ctx, r.h, r.at, ev)
		}
		// A response of events is cut at a revision before the header's
		// when they are many (etcd's syncWatchers): the next holds the
		// rest. A progress notification, which holds none, is the
		// header's.
		rev := r.resp.Header.Revision
		if n := len(r.resp.Events); n > 0 {
			rev = r.resp.Events[n-1].Kv.ModRevision
		}
		s.mu.Lock()
		s.seen = max(s.seen, rev)
		s.mu.Unlock()
	}
}

// A stamped is a response of the watch, and when it came.
type stamped struct {
	h    int64     // on the history's clock
	at   time.Time // on this process's
	resp clientv3.WatchResponse
}

// watchQueue is how many of the watch's responses wait to be taken
// before the next is stamped late.
const watchQueue = 1 << 14

// clientLease is the lease that key, a worker's name for it, names.
func (s *etcdSource) clientLease(key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, s.clients)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 16, 64)
	return id, err == nil
}

// event takes one event of the watch, delivered at h (history unix ns),
// at on this process's clock.
func (s *etcdSource) event(ctx context.Context, h int64, at time.Time, ev *clientv3.Event) {
	k := string(ev.Kv.Key)
	if !strings.HasPrefix(k, s.line) {
		if ev.Type == clientv3.EventTypePut {
			s.put(ctx, ev.Kv)
		}
		return
	}
	rev := ev.Kv.ModRevision
	switch {
	case ev.Type == clientv3.EventTypePut && ev.IsCreate():
		s.put(ctx, ev.Kv)
		cmd := fmt.Sprintf("put %s lease %x (revision %d)", k, ev.Kv.Lease, rev)
		if s.holder == "" {
			s.grant(h, k, cmd)
			return
		}
		s.emit(h, event{act: history.SRefuse, token: s.holder, client: s.names[ev.Kv.Lease], command: cmd})
	case ev.Type == clientv3.EventTypeDelete:
		gone, ok := s.live[k]
		delete(s.live, k)
		if !ok {
			return // a key of before
		}
		if k != s.holder {
			// A waiter gave up its place, or its lease ran out: that
			// expiry is its own, and counts for no holder's delete after.
			s.leaseExpired(ctx, gone, rev, at, 0)
			return
		}
		cmd := fmt.Sprintf("delete %s (revision %d)", k, rev)
		e := event{act: history.SDelete, token: k, client: s.names[gone.lease], command: cmd}
		if s.leaseExpired(ctx, gone, rev, at, countSettle) {
			e = event{act: history.SExpire, token: k, command: cmd + ": its lease expired"}
		}
		s.emit(h, e)
		s.holder = ""
		if next := s.first(); next != "" {
			s.grant(h, next, cmd)
		}
	}
}

// grant makes key the holder, at h, by the command cmd; its creation
// revision is its fencing token.
func (s *etcdSource) grant(h int64, key, cmd string) {
	s.holder = key
	k := s.live[key]
	s.emit(h, event{act: history.SGrant, token: key, client: s.names[k.lease], command: cmd})
	s.emit(h, event{act: history.SFence, token: key, client: s.names[k.lease], value: k.created, command: cmd})
}

// countSettle is how long a holder's delete waits for etcd's count of
// expired leases to rise, once its lease could have run out: etcd counts
// an expiry after the revoke it makes has applied, which the watch may
// have delivered already (beside two CPU burners, a waiter's count came
// after the next holder's revoke).
const countSettle = time.Second

// leaseExpired reports whether the lease of k, whose key a delete at
// revision rev took, delivered at at, is gone because it expired: the
// lease ended with the key (its worker's name went in the same revision,
// as a revoke or an expiry takes every key of a lease at once, where an
// unlock takes the key alone; without a name, the lease is gone now), it
// could have run out by then, and etcd counts a lease expired since it
// last did, or does within settle.
func (s *etcdSource) leaseExpired(ctx context.Context, k etcdKey, rev int64, at time.Time, settle time.Duration) bool {
	if k.lease == 0 {
		return false
	}
	if _, named := s.names[k.lease]; (named && s.ended[k.lease] != rev) || (!named && s.outlived(ctx, k.lease)) {
		return false // the key alone was deleted
	}
	if at.Before(k.expires) {
		// A count that rose meanwhile is another lease's, unless a delete
		// still waiting to be taken is its.
		if len(s.queue) == 0 {
			s.counted(ctx)
		}
		return false // revoked: it could not have run out
	}
	deadline := time.Now().Add(settle)
	for {
		before := s.expired
		if s.counted(ctx) && s.expired > before {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// counted reads etcd's count of expired leases into s.expired, and
// reports whether it could.
func (s *etcdSource) counted(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	n, err := s.expiredLeases(ctx)
	if err != nil {
		return false
	}
	s.expired = n
	return true
}

// outlived reports whether etcd holds the lease still.
func (s *etcdSource) outlived(ctx context.Context, lease int64) bool {
	ttl, err := s.timeToLive(ctx, lease)
	return err == nil && ttl.TTL > 0
}

// timeToLive asks etcd for the lease's time to live, within sampleTimeout.
func (s *etcdSource) timeToLive(ctx context.Context, lease int64) (*clientv3.LeaseTimeToLiveResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	return s.cli.TimeToLive(ctx, clientv3.LeaseID(lease))
}

// expires is the earliest the lease could run out, asked now; zero when
// etcd does not say.
func (s *etcdSource) expires(ctx context.Context, lease int64) time.Time {
	if lease == 0 {
		return time.Time{}
	}
	asked := time.Now()
	ttl, err := s.timeToLive(ctx, lease)
	if err != nil || ttl.TTL <= 0 || ttl.TTL > ttl.GrantedTTL {
		return time.Time{} // a lessor not yet the leader's says forever
	}
	return asked.Add(time.Duration(ttl.TTL) * time.Second)
}

// expiredLeases reads etcd's count of the leases that expired.
func (s *etcdSource) expiredLeases(ctx context.Context) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metrics, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "etcd_debugging_server_lease_expired_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("etcd reports no etcd_debugging_server_lease_expired_total")
}

// emit sends an event at h (history unix ns) to the journal. h is this
// machine's clock where the history's stands to it, known to the spread
// of that measure.
func (s *etcdSource) emit(h int64, e event) {
	o := s.rec.op(s.index, h, event{act: e.act, key: s.rec.cfg.Key, token: e.token, client: e.client, command: e.command, value: e.value,
		uncertainty: s.rec.hist.spread})
	s.rec.send(o)
}

// gap says the record lost sight of the node from now on.
func (s *etcdSource) gap(why string) {
	s.rec.send(s.rec.op(s.index, s.rec.hist.now(), event{act: history.SGap, key: s.rec.cfg.Key, reason: why}))
}

// end waits until the watch has delivered every revision up to the
// node's now, and stops it.
func (s *etcdSource) end(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, endWait)
	defer cancel()
	defer s.close()
	resp, err := s.cli.Get(ctx, s.rec.cfg.Key, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		s.gap(fmt.Sprintf("%s did not show the record's end: %v", s.node.Name, err))
		return
	}
	// A progress notification says the watch has reached a revision.
	for {
		if err := s.cli.RequestProgress(ctx); err != nil {
			s.gap(fmt.Sprintf("%s did not show the record's end: %v", s.node.Name, err))
			return
		}
		if s.reached(resp.Header.Revision) {
			return
		}
		select {
		case <-ctx.Done():
			s.gap(fmt.Sprintf("%s did not show the record's end: %v", s.node.Name, ctx.Err()))
			return
		case <-s.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// reached reports whether the watch has delivered revision rev.
func (s *etcdSource) reached(rev int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen >= rev
}

// close stops the watch and the client, once the watch's goroutine is done.
func (s *etcdSource) close() {
	s.cancel()
	<-s.done
	s.cli.Close()
}
