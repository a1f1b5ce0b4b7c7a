package topology

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	chunkSize = 32 << 10 // the most one read takes from a socket
	// queueLen chunks wait per direction before the reader stops reading;
	// then the bytes wait in the kernel, as behind a full TCP window.
	queueLen = 64
)

// A Link is a TCP proxy in the path of one network link. Clients dial Addr
// instead of the target; the nemesis cuts, slows or breaks what crosses.
type Link struct {
	ln        net.Listener
	ctx       context.Context // ended by Close: stops dials and an accept backoff
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	accepted atomic.Int64
	up, down counts       // clients to target, target to clients
	held     atomic.Int64 // reply chunks SlowReplies held

	mu     sync.Mutex
	target string
	cut    bool
	open   chan struct{} // closed while the link is not cut
	delay  time.Duration
	// replyDelay holds each reply (what the target sends) until this long
	// after the link read it; see SlowReplies.
	replyDelay time.Duration
	dropped    bool
	closed     bool
	conns      map[*conn]struct{}
	// parked holds the sides whose peer closed during a cut: as in a
	// partition, they learn of it only when the link heals.
	parked map[net.Conn]struct{}
}

// Stats are a link's counts since Listen.
type Stats struct {
	Accepted int64 // connections accepted, including those reset by Drop
	// Open counts the connections forwarded or held now, not the sides
	// kept until Heal after their peer closed during a cut.
	Open int64
	Up   Flow // from clients to the target
	Down Flow // from the target to clients
	// RepliesHeld counts the chunks of replies SlowReplies held back.
	RepliesHeld int64
}

// A Flow counts the bytes of one direction. Read-Written are held by a cut
// or a delay, or were lost with their connection.
type Flow struct {
	Read    int64 // bytes the link took from the sending side
	Written int64 // bytes it delivered to the other
}

// counts are a Flow's live counters.
type counts struct{ read, written atomic.Int64 }

func (c *counts) flow() Flow { return Flow{Read: c.read.Load(), Written: c.written.Load()} }

// Listen starts a link that accepts on a free 127.0.0.1 port and forwards
// each connection to target ("host:port").
func Listen(target string) (*Link, error) { return ListenOn("127.0.0.1", target) }

// ListenOn is Listen on a free port of the address ip: the root
// namespace's address on a Net, for clients on its hosts.
func ListenOn(ip, target string) (*Link, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("topology: link to %s: %w", target, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, fmt.Errorf("topology: link to %s: listen: %w", target, err)
	}
	open := make(chan struct{})
	close(open)
	ctx, stop := context.WithCancel(context.Background())
	l := &Link{ln: ln, ctx: ctx, stop: stop, target: target, open: open,
		conns: map[*conn]struct{}{}, parked: map[net.Conn]struct{}{}}
	l.wg.Go(l.accept)
	return l, nil
}

// Addr is the address clients dial instead of the target: "127.0.0.1:PORT",
// or the address ListenOn was given.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Target is where new connections are forwarded.
func (l *Link) Target() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.target
}

// Cut partitions the link: from now on no byte crosses it in either
// direction, on open connections and new ones. New connections are accepted
// but not forwarded, as when SYNs are lost rather than refused. Bytes sent
// meanwhile are held, as TCP retransmission holds them, and delivered in
// order after Heal — unless a side closes its connection meanwhile: then
// what was held is lost, and the other side, which learns nothing while the
// link is cut, is reset at Heal.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cut {
		l.cut = true
		l.open = make(chan struct{})
	}
}

// Slow delays every chunk that enters the link from now on by d, in both
// directions. A chunk never overtakes an earlier one on its connection.
// Slow(0) ends it; chunks already held keep their delay.
func (l *Link) Slow(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delay = d
}

// SlowReplies delays the target's replies only: from now on, every chunk
// the target sends that the link has not yet given the client — one it
// holds already included — reaches the client d after the link read it,
// while what clients send crosses as before. A request in flight goes on
// to the target at once and is carried out there; its client learns of
// it d late: the window of a client that trusts a late "yes" (a lease
// extended, by the reply's time, gone). A delay of both directions makes
// the request late too, which then finds the lease already gone.
// SlowReplies(0) ends it, and so does Heal; replies already held keep
// their delay. A chunk never overtakes an earlier one on its connection.
func (l *Link) SlowReplies(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.replyDelay = d
}

// Drop breaks the link: every open connection is reset on both sides, and
// new connections are reset at once, until Heal. A request in flight has an
// unknown outcome: it may have been forwarded or not.
func (l *Link) Drop() {
	l.mu.Lock()
	l.dropped = true
	conns := slices.Collect(maps.Keys(l.conns))
	parked := l.unpark()
	l.mu.Unlock()
	for _, c := range conns {
		c.end(true, nil)
	}
	for _, s := range parked {
		shut(s, true)
	}
}

// Heal ends Cut, Drop and SlowReplies, not Slow: held bytes flow again
// and new connections are forwarded.
func (l *Link) Heal() {
	l.mu.Lock()
	l.dropped, l.replyDelay = false, 0
	if l.cut {
		l.cut = false
		close(l.open)
	}
	parked := l.unpark()
	l.mu.Unlock()
	for _, s := range parked {
		// A reset, not a FIN: what this side sent during the cut is lost.
		shut(s, true)
	}
}

// Close stops listening, closes every connection and waits until the
// link's goroutines have ended. It may be called more than once.
func (l *Link) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		conns := slices.Collect(maps.Keys(l.conns))
		parked := l.unpark()
		l.mu.Unlock()
		l.stop()
		if err := l.ln.Close(); err != nil {
			l.closeErr = fmt.Errorf("topology: link to %s: close: %w", l.Target(), err)
		}
		for _, c := range conns {
			c.end(false, nil)
		}
		for _, s := range parked {
			shut(s, false)
		}
		l.wg.Wait()
	})
	return l.closeErr
}

// Awaiting reports whether a connection the link forwards has a request in
// flight: its client sent bytes that the target has not yet answered,
// whether the link holds them (a delay's, a cut's) or the target has them.
// (A protocol of requests and answers, as PostgreSQL's and Redis's are.)
func (l *Link) Awaiting() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		if c.awaiting.Load() {
			return true
		}
	}
	return false
}

// Stats returns the link's counts now.
func (l *Link) Stats() Stats {
	l.mu.Lock()
	open := len(l.conns)
	l.mu.Unlock()
	return Stats{Accepted: l.accepted.Load(), Open: int64(open), Up: l.up.flow(), Down: l.down.flow(), RepliesHeld: l.held.Load()}
}

// unpark empties the parked set and returns what it held; l.mu is held.
func (l *Link) unpark() []net.Conn {
	parked := slices.Collect(maps.Keys(l.parked))
	clear(l.parked)
	return parked
}

// accept serves connections until the listener is closed.
func (l *Link) accept() {
	var backoff time.Duration
	for {
		client, err := l.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors, say: wait as net/http does, rather
			// than spin or stop serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
				continue
			case <-l.ctx.Done():
				return
			}
		}
		backoff = 0
		l.serve(client)
	}
}

// serve starts forwarding a connection just accepted, or resets it when
// the link is dropped.
func (l *Link) serve(client net.Conn) {
	l.accepted.Add(1)
	ctx, cancel := context.WithCancel(l.ctx)
	c := &conn{l: l, client: client, done: make(chan struct{}), cancel: cancel}
	l.mu.Lock()
	closed, dropped := l.closed, l.dropped
	if !closed && !dropped {
		l.conns[c] = struct{}{}
	}
	l.mu.Unlock()
	if closed || dropped {
		cancel()
		shut(client, dropped)
		return
	}
	up := make(chan chunk, queueLen)
	l.wg.Go(func() { c.read(client, up, &l.up) })
	l.wg.Go(func() { c.forward(ctx, up) })
}

// A chunk is what one read took from a socket, when, and when it may be
// written.
type chunk struct {
	b         []byte
	read, due time.Time
}

// chunk is what a read took now, due when Slow says.
func (l *Link) chunk(b []byte) chunk {
	l.mu.Lock()
	d := l.delay
	l.mu.Unlock()
	now := time.Now()
	return chunk{b: bytes.Clone(b), read: now, due: now.Add(d)}
}

// A conn is one proxied connection: the client's side, accepted by the
// link, and the target's, dialed once the link lets bytes through. Each
// direction has a reader, which queues chunks, and a writer, which delivers
// them; so a delay holds each chunk for d without limiting the throughput.
type conn struct {
	l      *Link
	client net.Conn
	done   chan struct{}      // closed by end
	cancel context.CancelFunc // cancels the dial
	once   sync.Once
	halves atomic.Int32 // directions whose EOF has been passed on
	// awaiting: the client has sent bytes since the target's last answer
	// was given to it.
	awaiting atomic.Bool

	// Guarded by l.mu:
	server   net.Conn // nil until dialed
	ended    bool
	parkDial bool // the client closed during a cut while the dial was under way
}

// forward dials the target once the link lets bytes through, starts the
// target-to-client direction, then delivers the client's bytes.
func (c *conn) forward(ctx context.Context, up <-chan chunk) {
	defer c.cancel()
	if !c.pass() {
		return
	}
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", c.l.Target())
	if err != nil {
		c.end(true, nil) // the client sees a reset, as from a host that refuses
		return
	}
	if !c.attach(server) {
		return
	}
	down := make(chan chunk, queueLen)
	c.l.wg.Go(func() { c.read(server, down, &c.l.down) })
	c.l.wg.Go(func() { c.write(c.client, down, &c.l.down) })
	c.write(server, up, &c.l.up)
}

// attach records the dialed side, unless c has ended meanwhile: then the
// side is parked if the client closed during the cut that still lasts, as
// it would have been had the dial been quicker, and reset otherwise.
func (c *conn) attach(server net.Conn) bool {
	l := c.l
	l.mu.Lock()
	ended := c.ended
	park := ended && c.parkDial && l.cut && !l.dropped && !l.closed
	switch {
	case !ended:
		c.server = server
	case park:
		l.parked[server] = struct{}{}
	}
	l.mu.Unlock()
	if ended && !park {
		shut(server, true)
	}
	return !ended
}

// read queues what src sends, each chunk stamped with when it is due.
func (c *conn) read(src net.Conn, q chan<- chunk, f *counts) {
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f.read.Add(int64(n))
			if src == c.client {
				c.awaiting.Store(true)
			}
			select {
			case q <- c.l.chunk(buf[:n]):
			case <-c.done:
				return
			}
		}
		if err != nil {
			c.hangUp(src, err, q)
			return
		}
	}
}

// hangUp handles src's end. During a cut the other side is parked until
// Heal and what was held is lost; otherwise an EOF is passed on after the
// queued bytes, and an error (a reset) at once.
func (c *conn) hangUp(src net.Conn, err error, q chan<- chunk) {
	reset := !errors.Is(err, io.EOF)
	l := c.l
	l.mu.Lock()
	other := c.client
	if src == c.client {
		other = c.server
	}
	park := l.cut && !l.dropped && !l.closed && !c.ended
	if park {
		c.ended = true // no writer passes now, even if Heal comes before end
		if other != nil {
			l.parked[other] = struct{}{}
		}
		c.parkDial = other == nil
	}
	l.mu.Unlock()
	switch {
	case park:
		c.end(reset, other)
	case reset:
		c.end(true, nil)
	default:
		close(q)
	}
}

// write delivers q's chunks to dst in order, each once due and while the
// link is not cut, then passes on the EOF.
func (c *conn) write(dst net.Conn, q <-chan chunk, f *counts) {
	for {
		var ch chunk
		var ok bool
		select {
		case ch, ok = <-q:
		case <-c.done:
			return
		}
		if !ok {
			c.halfClose(dst)
			return
		}
		if !c.sleepUntil(ch.due) || !c.pass() {
			return
		}
		if dst == c.client && !c.answer(ch) {
			return
		}
		if _, err := dst.Write(ch.b); err != nil {
			c.end(true, nil)
			return
		}
		f.written.Add(int64(len(ch.b)))
	}
}

// answer is the link's last step before it gives the client ch, a chunk
// of its reply: held first, while SlowReplies says (the delay is read,
// and the request marked answered, in one hold of the link's lock, so
// that a request SlowReplies saw in flight has its reply held); then the
// request is marked answered — before the write, since after it the
// client's next request could be read, and marked, first. False if c
// ends first.
func (c *conn) answer(ch chunk) bool {
	l := c.l
	l.mu.Lock()
	d := l.replyDelay
	if d <= 0 || !time.Now().Before(ch.read.Add(d)) {
		c.awaiting.Store(false)
		l.mu.Unlock()
		return true
	}
	l.mu.Unlock()
	l.held.Add(1)
	if !c.sleepUntil(ch.read.Add(d)) || !c.pass() {
		return false
	}
	c.awaiting.Store(false)
	return true
}

// halfClose passes an EOF on to dst, which can still send; once both
// directions have passed theirs, the connection is over.
func (c *conn) halfClose(dst net.Conn) {
	if !c.pass() {
		return
	}
	cw, ok := dst.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		c.end(true, nil)
		return
	}
	if c.halves.Add(1) == 2 {
		c.end(false, nil)
	}
}

// sleepUntil waits until due; false if c ends first.
func (c *conn) sleepUntil(due time.Time) bool {
	wait := time.Until(due)
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

// pass waits until the link lets bytes through; false if c ends first.
func (c *conn) pass() bool {
	for {
		c.l.mu.Lock()
		cut, open, ended := c.l.cut, c.l.open, c.ended
		c.l.mu.Unlock()
		if ended {
			return false
		}
		if !cut {
			return true
		}
		select {
		case <-open:
		case <-c.done:
			return false
		}
	}
}

// end closes both sides, with a reset if asked, except keep: the link holds
// that one open until Heal, and a past deadline wakes its reader and writer.
func (c *conn) end(reset bool, keep net.Conn) {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.ended = true
		delete(c.l.conns, c)
		server, parkDial := c.server, c.parkDial
		c.l.mu.Unlock()
		close(c.done)
		if !parkDial {
			c.cancel() // else the dial is left to finish, for attach to park
		}
		for _, s := range []net.Conn{c.client, server} {
			switch {
			case s == nil:
			case s == keep:
				_ = s.SetDeadline(time.Unix(1, 0))
			default:
				shut(s, reset)
			}
		}
	})
}

// shut closes s; with reset, linger 0 makes it an RST instead of a FIN.
func shut(s net.Conn, reset bool) {
	if tc, ok := s.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = s.Close()
}
