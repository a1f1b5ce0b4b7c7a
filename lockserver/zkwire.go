package lockserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// The ZooKeeper record's session speaks ZooKeeper's protocol itself:
// go-zookeeper (the lock's client) has no persistent watch, and a one-shot
// watch set again after each event misses whatever is created and deleted
// between the event and the next watch, a short hold among them.
// ZooKeeper 3.6's AddWatch sets a persistent recursive watch, which the
// server keeps for the connection and fires for every change below the
// path, in zxid order. The protocol (jute) is a frame of a big-endian
// length, a header and a body; the few requests the record makes are here.

// ZooKeeper's operation codes, error codes and event types that the record
// uses.
const (
	zkOpExists       = 3
	zkOpGetData      = 4
	zkOpSync         = 9
	zkOpPing         = 11
	zkOpGetChildren2 = 12
	zkOpAddWatch     = 106
	zkOpClose        = -11

	zkErrNoNode = -101

	zkEventCreated = 1
	zkEventDeleted = 2

	zkXidWatch = -1
	zkXidPing  = -2

	zkWatchPersistentRecursive = 1
)

// zkHandshake bounds the wait for a server's answer to a connect.
const zkHandshake = time.Second

// errZkExpired says the session to take up is gone.
var errZkExpired = errors.New("the session expired")

// errZkNoNode is a request's answer that the znode does not exist.
var errZkNoNode = errors.New("no node")

// A zkStat is a znode's Stat, the fields the record reads.
type zkStat struct {
	czxid int64 // the zxid of the transaction that created it
	owner int64 // ephemeralOwner: the session whose it is; 0 for none
}

// A zkNote is what came on the connection, in the order it came: a watch's
// event, or the answer to a request that asked to be marked, which says
// that every event before it has come.
type zkNote struct {
	at     int64 // when it came, history unix ns
	event  int32 // the event's type; 0 for a mark
	path   string
	marked int32 // the request's xid, for a mark
}

// A zkConn is one connection and session of the record's.
type zkConn struct {
	conn    net.Conn
	timeout time.Duration // the session's, as the server gave it
	session zkSession
	clock   *historyClock

	wmu     sync.Mutex // one frame at a time
	mu      sync.Mutex
	xid     int32
	pending map[int32]zkPending
	notes   []zkNote
	more    *sync.Cond // a note came, or the connection ended
	err     error      // why the connection ended; nil while it runs
	done    chan struct{}
}

// A zkPending is a request waiting for its answer.
type zkPending struct {
	mark  bool
	reply chan zkReply
}

// A zkReply is a request's answer: its error code and body.
type zkReply struct {
	code int32
	body []byte
}

// A zkSession is a session's ID and password, to take it up again on
// another connection.
type zkSession struct {
	id     int64
	passwd []byte
}

// dialZk opens a session on the server at addr with the given timeout, or
// takes up resume's when it is not nil and the server still has it, and
// starts reading its connection and keeping it alive.
func dialZk(ctx context.Context, addr string, timeout time.Duration, clock *historyClock, resume *zkSession) (*zkConn, error) {
	d := net.Dialer{Timeout: sampleTimeout * 3}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId,
	// passwd, readOnly.
	sess := zkSession{passwd: make([]byte, 16)}
	if resume != nil {
		sess = *resume
	}
	var b zkBuf
	b.i32(0)
	b.i64(0) // the last zxid seen: none, which no server refuses
	b.i32(int32(timeout / time.Millisecond))
	b.i64(sess.id)
	b.bytes(sess.passwd)
	b.bool(false)
	// A server starting may take a connection it never answers: try
	// again soon rather than wait out the session.
	conn.SetDeadline(time.Now().Add(min(timeout, zkHandshake)))
	body, err := zkRoundTrip(conn, b)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	r := zkReader{b: body}
	r.i32() // protocolVersion
	got := time.Duration(r.i32()) * time.Millisecond
	sess.id = r.i64()
	sess.passwd = slices.Clone(r.buf())
	if r.err != nil || got <= 0 {
		conn.Close()
		if resume != nil && r.err == nil {
			return nil, errZkExpired
		}
		return nil, fmt.Errorf("connect to %s: the server gave no session", addr)
	}
	conn.SetDeadline(time.Time{})
	c := &zkConn{conn: conn, timeout: got, session: sess, clock: clock, pending: map[int32]zkPending{}, done: make(chan struct{})}
	c.more = sync.NewCond(&c.mu)
	go c.read()
	go c.ping()
	return c, nil
}

// zkRoundTrip writes a frame and reads the one that answers it.
func zkRoundTrip(conn net.Conn, b zkBuf) ([]byte, error) {
	if _, err := conn.Write(b.frame()); err != nil {
		return nil, err
	}
	return zkReadFrame(conn)
}

// zkReadFrame reads one frame's body.
func zkReadFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 16<<20 {
		return nil, fmt.Errorf("a frame of %d bytes", size)
	}
	body := make([]byte, size)
	_, err := io.ReadFull(r, body)
	return body, err
}

// A frameReader reads frames from receives each stamped with its time:
// a frame is stamped with the receive that completed it.
type frameReader struct {
	recv func([]byte) (int, int64, error)
	buf  []byte
	at   int64 // the last receive's stamp
	tmp  []byte
}

// frame reads the next frame's body, and its stamp.
func (r *frameReader) frame() ([]byte, int64, error) {
	for {
		if len(r.buf) >= 4 {
			size := int(binary.BigEndian.Uint32(r.buf))
			if size > 16<<20 {
				return nil, 0, fmt.Errorf("a frame of %d bytes", size)
			}
			if len(r.buf) >= 4+size {
				body := slices.Clone(r.buf[4 : 4+size])
				r.buf = r.buf[4+size:]
				return body, r.at, nil
			}
		}
		n, at, err := r.recv(r.tmp)
		if n > 0 {
			if at == 0 {
				at = time.Now().UnixNano() // not stamped: when it was read
			}
			r.buf, r.at = append(r.buf, r.tmp[:n]...), at
		}
		if err != nil {
			return nil, 0, err
		}
	}
}

// read reads the connection until it ends: answers go to their requests,
// events (and marks) to the notes, stamped as the kernel received them.
func (c *zkConn) read() {
	var err error
	fr := frameReader{recv: stampedReads(c.conn), tmp: make([]byte, 64<<10)}
	for {
		// The server answers a ping within the session's timeout, and
		// a ping goes every third of it.
		c.conn.SetReadDeadline(time.Now().Add(c.timeout * 2 / 3))
		var body []byte
		var local int64
		if body, local, err = fr.frame(); err != nil {
			break
		}
		at := local + c.clock.localNS
		r := zkReader{b: body}
		xid, _, code := r.i32(), r.i64(), r.i32()
		if r.err != nil {
			err = r.err
			break
		}
		switch xid {
		case zkXidPing:
		case zkXidWatch:
			typ, _, path := r.i32(), r.i32(), r.str()
			c.note(zkNote{at: at, event: typ, path: path})
		default:
			c.mu.Lock()
			p, ok := c.pending[xid]
			delete(c.pending, xid)
			c.mu.Unlock()
			if ok {
				if p.mark {
					c.note(zkNote{at: at, marked: xid})
				}
				p.reply <- zkReply{code: code, body: r.b[r.at:]}
			}
		}
	}
	c.conn.Close()
	c.mu.Lock()
	c.err = err
	for _, p := range c.pending {
		close(p.reply)
	}
	c.pending = nil
	c.more.Broadcast()
	c.mu.Unlock()
	close(c.done)
}

// note queues a note for next.
func (c *zkConn) note(n zkNote) {
	c.mu.Lock()
	c.notes = append(c.notes, n)
	c.more.Signal()
	c.mu.Unlock()
}

// next waits for the next note; ok is false once the connection has ended
// and every note came before was taken, err then why it ended.
func (c *zkConn) next() (n zkNote, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.notes) == 0 && c.pending != nil {
		c.more.Wait()
	}
	if len(c.notes) == 0 {
		return n, false, c.err
	}
	n = c.notes[0]
	c.notes = c.notes[1:]
	return n, true, nil
}

// ping keeps the session alive until the connection ends.
func (c *zkConn) ping() {
	t := time.NewTicker(c.timeout / 3)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		var b zkBuf
		b.i32(zkXidPing)
		b.i32(zkOpPing)
		if c.write(b) != nil {
			return
		}
	}
}

// write sends a frame.
func (c *zkConn) write(b zkBuf) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout / 3))
	_, err := c.conn.Write(b.frame())
	if err != nil {
		c.conn.Close() // the reader then ends the connection
	}
	return err
}

// call sends request op with body and waits for its answer; mark has the
// answer marked in the notes. It returns the request's xid.
func (c *zkConn) call(ctx context.Context, op int32, body zkBuf, mark bool) (int32, []byte, error) {
	reply := make(chan zkReply, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return 0, nil, fmt.Errorf("the connection ended: %v", c.err)
	}
	c.xid++
	xid := c.xid
	c.pending[xid] = zkPending{mark: mark, reply: reply}
	c.mu.Unlock()
	var b zkBuf
	b.i32(xid)
	b.i32(op)
	b = append(b, body...)
	if err := c.write(b); err != nil {
		return xid, nil, err
	}
	select {
	case r, ok := <-reply:
		switch {
		case !ok:
			return xid, nil, errors.New("the connection ended")
		case r.code == zkErrNoNode:
			return xid, nil, errZkNoNode
		case r.code != 0:
			return xid, nil, fmt.Errorf("ZooKeeper error %d", r.code)
		}
		return xid, r.body, nil
	case <-ctx.Done():
		c.conn.Close() // its answer would come out of turn
		return xid, nil, ctx.Err()
	}
}

// lastXid is the xid of the last request sent.
func (c *zkConn) lastXid() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.xid
}

// pathReq is a request's body of a path and a watch flag.
func pathReq(path string, watch bool) zkBuf {
	var b zkBuf
	b.str(path)
	b.bool(watch)
	return b
}

// addWatch sets a persistent recursive watch on path.
func (c *zkConn) addWatch(ctx context.Context, path string) error {
	var b zkBuf
	b.str(path)
	b.i32(zkWatchPersistentRecursive)
	_, _, err := c.call(ctx, zkOpAddWatch, b, false)
	return err
}

// stat reads path's Stat.
func (c *zkConn) stat(ctx context.Context, path string) (zkStat, error) {
	_, body, err := c.call(ctx, zkOpExists, pathReq(path, false), false)
	if err != nil {
		return zkStat{}, err
	}
	r := zkReader{b: body}
	return r.stat()
}

// data reads path's data.
func (c *zkConn) data(ctx context.Context, path string) ([]byte, error) {
	_, body, err := c.call(ctx, zkOpGetData, pathReq(path, false), false)
	if err != nil {
		return nil, err
	}
	r := zkReader{b: body}
	d := r.buf()
	return d, r.err
}

// zkChildren are a znode's children, and its cversion: how many it has
// had created (the next sequence number).
type zkChildren struct {
	names    []string
	cversion int32
}

// children reads path's children, marked: every event before the read is
// in the notes before its mark.
func (c *zkConn) children(ctx context.Context, path string) (int32, zkChildren, error) {
	xid, body, err := c.call(ctx, zkOpGetChildren2, pathReq(path, false), true)
	if err != nil {
		return xid, zkChildren{}, err
	}
	r := zkReader{b: body}
	n := r.i32()
	var out zkChildren
	for i := int32(0); i < n && r.err == nil; i++ {
		out.names = append(out.names, r.str())
	}
	// Stat: czxid, mzxid, ctime, mtime, version, then cversion.
	r.take(4*8 + 4)
	out.cversion = r.i32()
	return xid, out, r.err
}

// sync has the server this connection is on catch up with the leader.
func (c *zkConn) sync(ctx context.Context, path string) error {
	var b zkBuf
	b.str(path)
	_, _, err := c.call(ctx, zkOpSync, b, false)
	return err
}

// closeSession ends the session: a session left to expire would be
// counted among the sessions the server expired, which tell a lock's
// session's expiry, in this record or a later one.
func (c *zkConn) closeSession(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	c.call(ctx, zkOpClose, nil, false)
	c.close()
}

// close ends the connection and waits for its reader.
func (c *zkConn) close() {
	c.conn.Close()
	<-c.done
}

// A zkBuf is a jute encoding being built.
type zkBuf []byte

func (b *zkBuf) i32(v int32) { *b = binary.BigEndian.AppendUint32(*b, uint32(v)) }
func (b *zkBuf) i64(v int64) { *b = binary.BigEndian.AppendUint64(*b, uint64(v)) }
func (b *zkBuf) bytes(v []byte) {
	b.i32(int32(len(v)))
	*b = append(*b, v...)
}
func (b *zkBuf) str(v string) { b.bytes([]byte(v)) }
func (b *zkBuf) bool(v bool) {
	if v {
		*b = append(*b, 1)
		return
	}
	*b = append(*b, 0)
}

// frame is b with its length before it.
func (b zkBuf) frame() []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// A zkReader decodes a jute body; err is the first thing that did not fit.
type zkReader struct {
	b   []byte
	at  int
	err error
}

func (r *zkReader) take(n int) []byte {
	if r.err != nil || n < 0 || r.at+n > len(r.b) {
		if r.err == nil {
			r.err = errors.New("a short answer")
		}
		return nil
	}
	p := r.b[r.at : r.at+n]
	r.at += n
	return p
}

func (r *zkReader) i32() int32 {
	if p := r.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *zkReader) i64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (r *zkReader) buf() []byte {
	n := r.i32()
	if n < 0 {
		return nil // jute's null
	}
	return r.take(int(n))
}

func (r *zkReader) str() string { return string(r.buf()) }

// stat reads a Stat: czxid, mzxid, ctime, mtime, version, cversion,
// aversion, ephemeralOwner, dataLength, numChildren, pzxid.
func (r *zkReader) stat() (zkStat, error) {
	var s zkStat
	s.czxid = r.i64()
	r.take(3*8 + 3*4)
	s.owner = r.i64()
	r.take(4 + 4 + 8)
	return s, r.err
}
