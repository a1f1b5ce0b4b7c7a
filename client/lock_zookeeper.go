package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// A ZooKeeper is ZooKeeper's standard lock recipe as github.com/go-zookeeper/zk
// implements it (its Lock), used as its documentation shows. Each
// acquisition opens a session, whose timeout is the lease, and creates an
// ephemeral sequential znode under the lock's path /hiatus/KEY; the holder
// is the one whose znode has the lowest sequence number, and each other
// waits, watching, for the znode just before its own to go. The client
// keeps the session alive in the background (a ping every third of the
// timeout) until the release: a holder keeps the lock as long as its
// process runs and reaches the ensemble. A holder whose process stops
// (SIGSTOP) or is cut off sends no ping, and when the session times out the
// server expires it, deletes its znode, and the next waiter holds. The
// holder is not told until it talks to the server again: go-zookeeper's
// Lock has no way to say so, and a user of it, as here, goes on as if it
// held the lock.
//
// Each session says first whose it is, for the lock server's record
// (ZooKeeperClientPath), when the lock has a name (LockConfig.ClientName).
//
// Lock takes no context and waits on its watch without end, so each
// acquisition has a connection (a session) of its own, closed to give up:
// closing ends the session, which deletes the znode it may have created.
// Fenced, the token is the znode's czxid: the zxid of the transaction that
// created it, which rises from each holder to the next for as long as the
// ensemble keeps its data. The sequence number does not: it counts the
// lock path's children changes, and starts again from 0 when the path is
// deleted and made anew (TestZooKeeperFence shows both).
type ZooKeeper struct {
	servers []string
	where   string // "at SERVERS", for messages
	key     string
	path    string // the lock's znode: every holder's and waiter's are its children
	client  string // the worker's name, announced with each session (ZooKeeperClientPath); "" for none
	session time.Duration
	retry   time.Duration
	fenced  bool
	gate    *gate // what Freeze stops

	mu   sync.Mutex
	held map[string]*zkHold // by grant token
}

// A zkHold is one acquisition: its session, the Lock made on it, and its
// znode.
type zkHold struct {
	c       *zk.Conn
	lock    *zk.Lock
	session int64  // the session's ID at the grant
	node    string // the znode's path
}

// ZooKeeperPath is the znode under which the ZooKeeper locks named key keep
// their line: the holder's znode and each waiter's are its children.
func ZooKeeperPath(key string) string { return "/hiatus/" + strings.ReplaceAll(key, "/", "_") }

// ZooKeeperClientPath is where a ZooKeeper lock named key says whose a
// session is: an ephemeral znode of the session, holding the worker's
// name, created before any znode of the lock's. ZooKeeper's sessions carry
// no name, and the lock server's record names a session's znodes by it. It
// is beside the lock's znode, not under it: the recipe takes every child
// of that for a place in the line.
func ZooKeeperClientPath(key string, session int64) string {
	return ZooKeeperPath(key) + "-clients/" + strconv.FormatInt(session, 16)
}

// announce creates the worker's name at ZooKeeperClientPath of c's
// session, and the znodes above it the first time; nothing when the lock
// has no name.
func (l *ZooKeeper) announce(c *zk.Conn) error {
	if l.client == "" {
		return nil
	}
	dir := ZooKeeperPath(l.key) + "-clients"
	acl := zk.WorldACL(zk.PermAll)
	// The first request waits for the session: its ID is known after it.
	_, err := c.Create(dir, nil, 0, acl)
	if errors.Is(err, zk.ErrNoNode) {
		if _, err = c.Create("/hiatus", nil, 0, acl); err == nil || errors.Is(err, zk.ErrNodeExists) {
			_, err = c.Create(dir, nil, 0, acl)
		}
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("say whose session is whose: %w", err)
	}
	name := ZooKeeperClientPath(l.key, c.SessionID())
	if _, err := c.Create(name, []byte(l.client), zk.FlagEphemeral, acl); err != nil {
		return fmt.Errorf("say whose session %x is: %w", c.SessionID(), err)
	}
	return nil
}

func zooKeeperKind() LockKind {
	return LockKind{Name: "zookeeper", About: "ZooKeeper's lock recipe (go-zookeeper's Lock) on a session whose pings its client sends; fenced by the znode's czxid",
		Store: OnZooKeeper,
		New: func(ctx context.Context, cfg LockConfig) (Lock, error) {
			l, err := NewZooKeeper(ctx, cfg.Endpoints, cfg.Key, cfg.Lease, cfg.Retry, cfg.Fenced)
			if err == nil {
				l.client = cfg.ClientName
			}
			return l, err
		}}
}

// NewZooKeeper returns the ZooKeeper lock named key on the ensemble whose
// servers are endpoints (host:port, or zookeeper://host:port), with
// sessions whose timeout is lease: the server grants no less than two of
// its ticks, nor more than its maxSessionTimeout. Acquire waits retry
// (default 5 ms) after a try that failed before trying again. NewZooKeeper
// checks that the ensemble answers, waiting for it as long as ctx lets it.
func NewZooKeeper(ctx context.Context, endpoints []string, key string, lease, retry time.Duration, fenced bool) (*ZooKeeper, error) {
	var servers []string
	for _, e := range endpoints {
		servers = append(servers, strings.TrimPrefix(e, "zookeeper://"))
	}
	l := &ZooKeeper{servers: servers, where: "at " + strings.Join(servers, ","), key: key, path: ZooKeeperPath(key),
		session: lease, retry: retryOr(retry), fenced: fenced, gate: &gate{}, held: map[string]*zkHold{}}
	if len(servers) == 0 {
		return nil, fmt.Errorf("zookeeper lock %s: no servers", key)
	}
	// Without this a wrong address would be found by the first Acquire,
	// which retries until its ctx ends.
	if err := retryUntil(ctx, l.retry, l.ping); err != nil {
		return nil, fmt.Errorf("zookeeper lock %s %s: %w", key, l.where, err)
	}
	return l, nil
}

// ping opens a session, reads the root, and closes it.
func (l *ZooKeeper) ping() error {
	c, err := l.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	_, _, err = c.Exists("/")
	return err
}

// retryUntil calls f until it succeeds or ctx ends, waiting retry between
// tries; it returns f's last error.
func retryUntil(ctx context.Context, retry time.Duration, f func() error) error {
	for {
		err := f()
		if err == nil || !wait(ctx, retry) {
			return err
		}
	}
}

// connect opens a session with the lock's timeout, through the lock's gate.
func (l *ZooKeeper) connect() (*zk.Conn, error) {
	c, _, err := zk.Connect(l.servers, l.session, zk.WithLogger(zkQuiet{}), zk.WithDialer(l.gate.dial))
	return c, err
}

// zkQuiet logs nothing: the client would log to the run's terminal each
// reconnect, which the history records already.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// Close releases every lock still held, by closing its session.
func (l *ZooKeeper) Close() error {
	l.mu.Lock()
	held := l.held
	l.held = map[string]*zkHold{}
	l.mu.Unlock()
	for _, h := range held {
		h.c.Close()
	}
	return nil
}

// Acquire implements Lock. It tries until the lock is had or ctx ends,
// waiting retry after a try that failed (the ensemble down, a session
// expired while it waited), and then returns ErrGaveUp. Every try that did
// not end with the lock is undone.
func (l *ZooKeeper) Acquire(ctx context.Context) (Grant, error) {
	return retryTries(ctx, l.retry, l.try)
}

// try makes one acquisition on a session of its own, and closes the
// session unless it returns a grant.
func (l *ZooKeeper) try(ctx context.Context) (Grant, error) {
	c, err := l.connect()
	if err != nil {
		return Grant{}, fmt.Errorf("zookeeper lock %s %s: %w", l.key, l.where, err)
	}
	h := &zkHold{c: c, lock: zk.NewLock(c, l.path, zk.WorldACL(zk.PermAll))}
	locked := make(chan error, 1)
	go func() {
		err := l.announce(c)
		if err == nil {
			err = h.lock.Lock()
		}
		locked <- err
	}()
	select {
	case err = <-locked:
	case <-ctx.Done():
		// Closing fails Lock's requests and watch (ErrClosing), and
		// ends the session, deleting whatever znode it created.
		c.Close()
		<-locked
		return Grant{}, ctx.Err()
	}
	if err == nil {
		err = l.find(h)
	}
	if err != nil {
		c.Close()
		return Grant{}, fmt.Errorf("zookeeper lock %s %s: %w", l.key, l.where, err)
	}
	h.session = c.SessionID()
	g := Grant{Token: h.node, Lease: l.session}
	if l.fenced {
		_, st, err := c.Exists(h.node)
		if err == nil && (st == nil || st.EphemeralOwner != c.SessionID()) {
			err = errors.New("session lost before the fence was read")
		}
		if err != nil {
			c.Close()
			return Grant{}, fmt.Errorf("zookeeper lock %s %s: fence: %w", l.key, l.where, err)
		}
		g.Fence = st.Czxid
	}
	l.mu.Lock()
	l.held[g.Token] = h
	l.mu.Unlock()
	return g, nil
}

// find sets h.node to the holder's znode: go-zookeeper's Lock keeps it to
// itself, but it returns only once its znode is the lowest of the path's
// children, so the lowest is the holder's, unless its session has ended
// since, which the znode's owner then says.
func (l *ZooKeeper) find(h *zkHold) error {
	children, _, err := h.c.Children(l.path)
	if err != nil {
		return err
	}
	first, ok := lowest(children)
	if !ok {
		return errors.New("granted, but the lock's path has no znode: the session ended")
	}
	node := l.path + "/" + first
	_, st, err := h.c.Exists(node)
	if err != nil {
		return err
	}
	if st == nil || st.EphemeralOwner != h.c.SessionID() {
		return errors.New("granted, but the lowest znode is not the session's: the session ended")
	}
	h.node = node
	return nil
}

// lowest returns the child with the lowest sequence number: the suffix
// after its last "lock-" (go-zookeeper's) or "__" (kazoo's, as go-zookeeper
// reads it).
func lowest(children []string) (string, bool) {
	seq := func(name string) int {
		_, s, ok := cutLast(name, "lock-")
		if !ok {
			_, s, _ = cutLast(name, "__")
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return -1
		}
		return n
	}
	children = slices.DeleteFunc(slices.Clone(children), func(c string) bool { return seq(c) < 0 })
	if len(children) == 0 {
		return "", false
	}
	return slices.MinFunc(children, func(a, b string) int { return seq(a) - seq(b) }), true
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// Release implements Lock: it deletes the holder's znode, as
// go-zookeeper's Unlock does, on the holder's session. A session that has
// changed since the grant had expired (the client opens a new one after it
// is told so): the server deleted the znode then, and the path's children
// say whether another holds the lock. A delete whose answer was lost is
// tried again, and a znode then gone on the same session was deleted by it.
// The session is closed either way.
func (l *ZooKeeper) Release(ctx context.Context, g Grant) error {
	l.mu.Lock()
	h := l.held[g.Token]
	delete(l.held, g.Token)
	l.mu.Unlock()
	if h == nil {
		return fmt.Errorf("zookeeper lock %s %s: release: no grant with token %s", l.key, l.where, g.Token)
	}
	defer h.c.Close()
	lost, err := l.delete(ctx, h)
	switch {
	case err != nil:
		return fmt.Errorf("zookeeper lock %s %s: release: %w", l.key, l.where, err)
	case !lost:
		return nil
	}
	// The znode is gone: who holds the lock now? Looked at on the new
	// session, which may still be being opened.
	var children []string
	err = retryUntil(ctx, l.retry, func() (err error) {
		children, _, err = h.c.Children(l.path)
		if errors.Is(err, zk.ErrNoNode) {
			children, err = nil, nil
		}
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("zookeeper lock %s %s: release: the znode was gone; %w", l.key, l.where, err)
	case len(children) > 0:
		return ErrStolen
	}
	return ErrNotHeld
}

// delete deletes h's znode, and says whether it was gone before: its
// session had changed, or the znode was not there at the first delete that
// reached the server. While the connection is down (the delete never sent,
// or its answer lost) it tries again, until ctx ends.
func (l *ZooKeeper) delete(ctx context.Context, h *zkHold) (lost bool, err error) {
	sent := false
	for {
		if h.c.SessionID() != h.session {
			return true, nil
		}
		err := h.c.Delete(h.node, -1)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, zk.ErrNoNode):
			return !sent, nil
		case !errors.Is(err, zk.ErrNoServer) && !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrSessionExpired):
			return false, err
		}
		sent = sent || !errors.Is(err, zk.ErrNoServer) // ErrNoServer: it never left
		if !wait(ctx, l.retry) {
			return false, err
		}
	}
}

// Freeze implements Freezer: every connection of the lock stops, as it
// does in a stopped process: nothing it sends leaves, nothing it receives
// is read, and no new one is dialled; the session's pings stop with them,
// and the server expires the session once its timeout has passed. thaw lets
// them go: the client then finds its connection timed out, dials again,
// and learns that its session expired, as a process resumed after its
// session timeout does.
func (l *ZooKeeper) Freeze() (thaw func()) { return l.gate.close() }

// A gate stops connections while it is closed: a frozen process's.
type gate struct {
	mu     sync.Mutex
	closed chan struct{} // closed when the gate opens again; nil while open
}

// close closes the gate, and returns what opens it.
func (g *gate) close() (open func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		return func() {}
	}
	ch := make(chan struct{})
	g.closed = ch
	return func() {
		g.mu.Lock()
		g.closed = nil
		g.mu.Unlock()
		close(ch)
	}
}

// pass waits while the gate is closed.
func (g *gate) pass() {
	g.mu.Lock()
	ch := g.closed
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// dial is a zk.Dialer whose connections pass the gate.
func (g *gate) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	g.pass()
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return gatedConn{c, g}, nil
}

// A gatedConn is a connection through a gate: a write waits for the gate
// before it is sent, and what a read got (its bytes or its error, a
// deadline's) is handed over only once the gate is open.
type gatedConn struct {
	net.Conn
	g *gate
}

func (c gatedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.g.pass()
	return n, err
}

func (c gatedConn) Write(b []byte) (int, error) {
	c.g.pass()
	return c.Conn.Write(b)
}
