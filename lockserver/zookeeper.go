package lockserver

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// A ZooKeeperNode is a ZooKeeper ensemble the lock is kept on, as
// ZooKeeper's lock recipe (go-zookeeper's Lock, kazoo's) keeps it: each
// holder's and waiter's ephemeral sequential znode a child of the lock's
// znode (Config.Key), on its session, the holder the one of the lowest
// sequence number.
type ZooKeeperNode struct {
	Name    string   // the record's process for it: "zk-0"
	Servers []string // the ensemble's servers, host:port
	// Expired, when set, says whether the ensemble expired a session (by
	// its ID), as its servers' logs do (servers.ZooKeeper.SessionExpired);
	// nil: the servers' counts of expired sessions (mntr) are read, which
	// name no session.
	Expired func(ctx context.Context, session int64) (bool, error)
}

// The ZooKeeper record comes from a persistent recursive watch of the
// lock's znode (zkwire.go): every create and delete of a child, in zxid
// order. From them it derives who held the lock as the etcd record does: a
// znode that becomes the lowest of the line is granted (at its create, or
// at the delete of the one before it); one created behind another is
// refused; the holder's znode deleted is :expire when its session expired,
// else :delete (its holder's delete, or its session closed). The server
// says a session expired through its four-letter word mntr, whose
// zk_stale_sessions_expired counts the sessions its session tracker
// expired (on the leader): a count that rose since the last read was
// this one's session's, read at a delete whose session ended (its name
// gone) or has no name (a waiter's ended session's is read too, so its
// expiry is not taken for the next holder's). A count names no session:
// another's expiry, while a holder closed its session, was taken for the
// holder's. ZooKeeper's log says whose session it expired, but it is a
// file on the server's host: where the run started the servers, it reads
// them (ZooKeeperNode.Expired), and the count only for a session it
// does not know. mntr is a question any client may ask where the server allows it
// (4lw.commands.whitelist), and a server that does not leaves every
// delete :delete, as the log says. Each grant hands out the znode's czxid,
// the lock's fencing token, as a :fence. A session is named by the znode
// its lock puts beside the line (client.ZooKeeperClientPath), read when
// its first znode is: its stat says its session (ephemeralOwner). A znode
// deleted before the record read its stat has no czxid and no name: its
// grant is matched by its token, the znode's path, alone. The watch carries
// no time: an event is stamped when it came (this machine's clock on the
// history's), after it happened by the watch's latency.

// zkSessionTimeout is the session timeout the record asks for itself: longer than
// any pause of a server a run makes of its lease.
const zkSessionTimeout = 30 * time.Second

// A zkZnode is a znode of the lock's line.
type zkZnode struct {
	seq   int64
	czxid int64 // 0 when it was gone before its stat was read
	owner int64
}

// A zookeeperSource records one ensemble.
type zookeeperSource struct {
	rec   *Recorder
	index int
	node  ZooKeeperNode
	names string // the prefix of the sessions' names: Key + "-clients/"

	mu      sync.Mutex
	conn    *zkConn
	endConn *zkConn       // the connection the end's read went on; nil until Stop asks for it
	endMark int32         // the end's read's xid, at the least
	ended   chan struct{} // closed when the end's mark was taken

	live     map[string]zkZnode
	holder   string // the znode lowest in the line; "" when none
	owners   map[int64]string
	gone     map[int64]bool     // sessions seen expired
	expired  map[string]float64 // zk_stale_sessions_expired by server
	noMntr   bool               // no server answers mntr: expiries are not told
	grain    int64              // the servers' tickTime (ns), which a session may outlive its timeout by; 0 unknown
	server   int                // the server connected to, of node.Servers
	skipTo   int32              // the read whose mark ends the notes it saw already
	sess     *zkSession         // the record's session, taken up again after a lost connection
	cversion int32              // the lock's znode's creates seen: the next sequence number
	whole    bool               // the last watch set saw no change missed since the one before but waiters joining
	joined   []string           // the znodes the last watch set found that the record had not seen, by sequence
	unseen   int                // the znodes created and deleted while the watch was lost
	missed   string             // what it saw missed, in words
	lastSeen int64
	done     chan struct{}
}

// startZooKeeper connects to the ensemble, sets the watch, reads the line
// as it stands and starts taking the watch's events.
func (r *Recorder) startZooKeeper(ctx context.Context, index int, n ZooKeeperNode) (*zookeeperSource, error) {
	if len(n.Servers) == 0 {
		return nil, fmt.Errorf("%s: no servers", n.Name)
	}
	s := &zookeeperSource{rec: r, index: index, node: n, names: r.cfg.Key + "-clients/", ended: make(chan struct{}),
		owners: map[int64]string{}, gone: map[int64]bool{}, expired: map[string]float64{}, done: make(chan struct{})}
	if err := s.connect(ctx); err != nil {
		return nil, fmt.Errorf("record %s: %w", n.Name, err)
	}
	if err := s.firstExpiries(ctx); err != nil {
		s.noMntr = true
		r.logf("%s: %v: a session's expiry is recorded as a delete", n.Name, err)
	}
	var err error
	if s.grain, err = s.tick(ctx); err != nil {
		r.logf("%s: %v: the grants do not say the tick a session may outlive its timeout by, and an orphan of a paused holder is held to the timeout alone", n.Name, err)
	}
	go s.run(context.WithoutCancel(ctx))
	return s, nil
}

// connect opens a session on the first server that gives one, from the
// one last used, sets the watch and reads the line as it stands.
func (s *zookeeperSource) connect(ctx context.Context) error {
	var err error
	for range s.node.Servers {
		addr := s.node.Servers[s.server]
		var c *zkConn
		c, err = dialZk(ctx, addr, zkSessionTimeout, s.rec.hist, s.sess)
		if err == errZkExpired {
			c, err = dialZk(ctx, addr, zkSessionTimeout, s.rec.hist, nil)
		}
		if err == nil {
			if err = s.watch(ctx, c); err == nil {
				return nil
			}
			c.close()
		}
		err = fmt.Errorf("%s: %w", addr, err)
		s.server = (s.server + 1) % len(s.node.Servers)
	}
	return err
}

// watch sets the watch on c and reads the line: the events that come
// before the read's mark it has seen already. Set again after a lost
// connection, it says whether the line is as the record left it (whole):
// no znode created since (the lock's znode's cversion counts its
// children's creates) and none deleted, so that nothing happened that the
// record did not see.
func (s *zookeeperSource) watch(ctx context.Context, c *zkConn) error {
	ctx, cancel := context.WithTimeout(ctx, endWait)
	defer cancel()
	key := s.rec.cfg.Key
	if err := c.addWatch(ctx, key); err != nil {
		return fmt.Errorf("watch %s: %w", key, err)
	}
	xid, children, err := c.children(ctx, key)
	if err != nil && err != errZkNoNode {
		return fmt.Errorf("read %s: %w", key, err)
	}
	live := map[string]zkZnode{}
	s.joined = s.joined[:0]
	for _, ch := range children.names {
		p := key + "/" + ch
		if seq, ok := zkSeq(ch); ok {
			if z, ok := s.live[p]; ok {
				live[p] = z
				continue
			}
			live[p] = s.znode(ctx, c, p, seq)
			s.joined = append(s.joined, p)
		}
	}
	slices.SortFunc(s.joined, func(a, b string) int { return cmp.Compare(live[a].seq, live[b].seq) })
	gone := 0
	for p := range s.live {
		if _, ok := live[p]; !ok {
			gone++
		}
	}
	created := int(children.cversion - s.cversion)
	s.missed = fmt.Sprintf("%d znodes created and %d deleted meanwhile", created, gone)
	s.unseen = max(created-len(s.joined), 0)
	// Whole: nothing changed; or the holder is still the holder, so that
	// every znode created meanwhile (of a higher sequence number) waited
	// behind it, refused, and every one deleted was a waiter's.
	kept := s.holder != ""
	if _, ok := live[s.holder]; !ok {
		kept = false
	}
	s.whole = s.live != nil && (created == 0 && gone == 0 || kept && lowestOf(live) == s.holder)
	s.live, s.cversion = live, children.cversion
	if !s.whole {
		s.holder = s.lowest()
	}
	s.skipTo = xid
	s.mu.Lock()
	s.conn, s.sess = c, &c.session
	s.mu.Unlock()
	return nil
}

// zkSeq is a line's znode's sequence number: the digits after its last
// "lock-" (go-zookeeper's) or "__" (kazoo's "…__lock__N").
func zkSeq(name string) (int64, bool) {
	i := strings.LastIndex(name, "lock-")
	j := i + len("lock-")
	if i < 0 {
		i = strings.LastIndex(name, "__")
		j = i + len("__")
	}
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[j:], 10, 64)
	return n, err == nil
}

// znode reads the stat of the line's znode p, and names its session.
func (s *zookeeperSource) znode(ctx context.Context, c *zkConn, p string, seq int64) zkZnode {
	l := newLookup(p, seq)
	s.lookup(ctx, c, l)
	return s.known(l)
}

// A zkLookup is what the record read of a line's znode: its stat, and its
// session's name (client.ZooKeeperClientPath).
type zkLookup struct {
	path  string
	z     zkZnode
	name  string
	named bool          // name was read: the session's name, or "" when it has none
	err   error         // why the stat was not read
	done  chan struct{} // closed when the lookup is done
}

func newLookup(p string, seq int64) *zkLookup {
	return &zkLookup{path: p, z: zkZnode{seq: seq}, done: make(chan struct{})}
}

// lookup reads the stat of l's znode and its session's name.
func (s *zookeeperSource) lookup(ctx context.Context, c *zkConn, l *zkLookup) {
	defer close(l.done)
	st, err := c.stat(ctx, l.path)
	if err != nil {
		l.err = err // gone already (its delete follows), or the connection ended
		return
	}
	l.z.czxid, l.z.owner = st.czxid, st.owner
	if l.z.owner != 0 {
		d, err := c.data(ctx, s.names+strconv.FormatInt(l.z.owner, 16))
		if err == nil || err == errZkNoNode {
			l.name, l.named = string(d), true
		}
	}
}

// known takes what lookup l read, once it is done: the znode, and its
// session's name.
func (s *zookeeperSource) known(l *zkLookup) zkZnode {
	<-l.done
	if l.err != nil {
		s.rec.logf("%s: read %s: %v: its session is not named", s.node.Name, l.path, l.err)
	}
	if _, ok := s.owners[l.z.owner]; !ok && l.named {
		s.owners[l.z.owner] = l.name
	}
	return l.z
}

// A zkTaken is a note of the connection, and for a create of the line's,
// the lookup of its znode, under way.
type zkTaken struct {
	note zkNote
	look *zkLookup
}

// prefetch passes c's notes on to notes, starting each create's lookup as
// its note comes: looked up when the record takes the event, behind the
// events before it, a znode held briefly was gone, its holder unnamed
// (beside two CPU burners, a run's every holder from some point on). It
// closes notes when the connection ends, with err why, or when stop is
// closed.
func (s *zookeeperSource) prefetch(ctx context.Context, c *zkConn, notes chan<- zkTaken, err *error, stop <-chan struct{}) {
	defer close(notes)
	for {
		n, ok, e := c.next()
		if !ok {
			*err = e
			return
		}
		t := zkTaken{note: n}
		if seq, ok := s.lineSeq(n); ok && n.marked == 0 && n.event == zkEventCreated {
			t.look = newLookup(n.path, seq)
			go s.lookup(ctx, c, t.look)
		}
		select {
		case notes <- t:
		case <-stop:
			return
		}
	}
}

// lineSeq is the sequence number of the znode of note n when it is one of
// the lock's line.
func (s *zookeeperSource) lineSeq(n zkNote) (int64, bool) {
	if path.Dir(n.path) != s.rec.cfg.Key {
		return 0, false // the lock's znode itself
	}
	return zkSeq(path.Base(n.path))
}

// lowest is the znode first in the line.
func (s *zookeeperSource) lowest() string { return lowestOf(s.live) }

// lowestOf is the znode first in the line live.
func lowestOf(live map[string]zkZnode) string {
	best, seq := "", int64(0)
	for p, z := range live {
		if best == "" || z.seq < seq {
			best, seq = p, z.seq
		}
	}
	return best
}

// run takes the watch's events until the end's mark, connecting again
// after each loss of the watch; what was missed meanwhile is a gap.
func (s *zookeeperSource) run(ctx context.Context) {
	defer close(s.done)
	for {
		err := s.take(ctx)
		if err == nil {
			return
		}
		select {
		case <-s.rec.stopping:
			return // the end says what it did not see
		default:
		}
		from := max(s.lastSeen, 1)
		if from == 1 {
			from = s.rec.hist.now()
		}
		s.rec.logf("%s: the watch: %v", s.node.Name, err)
		if !s.reconnect(ctx) || s.stopped() {
			s.gap(from, 0, fmt.Sprintf("the watch of %s: %v", s.node.Name, err))
			return
		}
		if s.whole {
			// The line did not change while the record did not see it,
			// but for waiters refused behind the holder: when, it
			// cannot say, but by now.
			now := s.rec.hist.now()
			for _, p := range s.joined {
				z := s.live[p]
				s.emit(now, event{act: history.SRefuse, token: s.holder, client: s.owners[z.owner],
					command: fmt.Sprintf("create %s session %x (zxid %d), while the watch was lost", p, z.owner, z.czxid)})
			}
			for range s.unseen {
				s.emit(now, event{act: history.SRefuse, token: s.holder, command: "a znode created and deleted while the watch was lost"})
			}
			// A waiter's session that expired meanwhile is not the
			// next delete's.
			s.expiries(ctx)
			continue
		}
		now := s.rec.hist.now()
		s.gap(from, now, fmt.Sprintf("the watch of %s: %v; %s", s.node.Name, err, s.missed))
		if s.holder != "" {
			s.grant(now, s.holder, "the line as it stood after the gap")
		}
	}
}

// stopped reports whether the record is stopping, and if so ends the
// session the watch was just set again on: the end may have closed the
// one before, and waits for run.
func (s *zookeeperSource) stopped() bool {
	select {
	case <-s.rec.stopping:
	default:
		return false
	}
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	c.closeSession(context.Background())
	return true
}

// take takes the notes of the connection until the end's mark (nil) or
// the connection's end (why).
func (s *zookeeperSource) take(ctx context.Context) error {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	// A run's notes are hundreds: the buffer is for a record behind them.
	notes, stop := make(chan zkTaken, 1024), make(chan struct{})
	var ended error
	go s.prefetch(ctx, c, notes, &ended, stop)
	defer close(stop)
	for t := range notes {
		n := t.note
		s.lastSeen = n.at
		switch {
		case s.skipTo != 0:
			if n.marked == s.skipTo {
				s.skipTo = 0
			}
		case n.marked != 0:
			if s.isEnd(c, n.marked) {
				return nil // close ends the session
			}
		default:
			s.event(ctx, c, t)
		}
	}
	c.close()
	if ended == nil {
		ended = fmt.Errorf("the connection ended")
	}
	return ended
}

// isEnd reports whether the mark xid of c is the end's, and says so to
// end. The end's read is the one marked read of c from endMark on: the
// others are the watch's first.
func (s *zookeeperSource) isEnd(c *zkConn, xid int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.endConn != c || xid < s.endMark {
		return false
	}
	close(s.ended)
	return true
}

// reconnect tries to connect again every 10 ms until it does, or the
// record ends; it reports whether it did. Soon, so that the watch is set
// again before the lock's clients, which wait longer between their tries
// (go-zookeeper a second once it has tried every server), change the line.
func (s *zookeeperSource) reconnect(ctx context.Context) bool {
	return s.rec.retryConnect(ctx, 10*time.Millisecond, s.connect)
}

// event takes one event of the watch, and for a create its lookup.
func (s *zookeeperSource) event(ctx context.Context, c *zkConn, t zkTaken) {
	n := t.note
	seq, ok := s.lineSeq(n)
	if !ok {
		return
	}
	switch n.event {
	case zkEventCreated:
		s.cversion = max(s.cversion, int32(seq)+1)
		z := s.known(t.look)
		s.live[n.path] = z
		cmd := fmt.Sprintf("create %s session %x (zxid %d)", n.path, z.owner, z.czxid)
		if s.holder == "" {
			s.grant(n.at, n.path, cmd)
			return
		}
		s.emit(n.at, event{act: history.SRefuse, token: s.holder, client: s.owners[z.owner], command: cmd})
	case zkEventDeleted:
		z, ok := s.live[n.path]
		delete(s.live, n.path)
		expired := ok && s.sessionExpired(ctx, c, z.owner)
		if !ok || n.path != s.holder {
			return // a waiter gave up its place, or a znode of before
		}
		cmd := fmt.Sprintf("delete %s", n.path)
		e := event{act: history.SDelete, token: n.path, client: s.owners[z.owner], command: cmd}
		if expired {
			e = event{act: history.SExpire, token: n.path, command: cmd + fmt.Sprintf(": its session %x expired", z.owner)}
		}
		s.emit(n.at, e)
		s.holder = ""
		if next := s.lowest(); next != "" {
			s.grant(n.at, next, cmd)
		}
	}
}

// grant makes p the holder, at h, by the command cmd; its czxid is its
// fencing token.
func (s *zookeeperSource) grant(h int64, p, cmd string) {
	s.holder = p
	z := s.live[p]
	s.emit(h, event{act: history.SGrant, token: p, client: s.owners[z.owner], command: cmd})
	if z.czxid > 0 {
		s.emit(h, event{act: history.SFence, token: p, client: s.owners[z.owner], value: z.czxid, command: cmd})
	}
}

// sessionExpired reports whether session's znode is gone because the
// session expired: it did before, or a server counts a session expired
// since it last did. A session whose name (client.ZooKeeperClientPath)
// is still there has not ended, and its znode went by its own delete: the
// servers' count is read only for a session that ended, or has no name.
// Read at every delete, mntr cost the lock a tenth of its writes
// (docs/performance.md).
func (s *zookeeperSource) sessionExpired(ctx context.Context, c *zkConn, session int64) bool {
	if s.gone[session] {
		return true
	}
	if s.noMntr && s.node.Expired == nil {
		return false
	}
	if session != 0 && s.owners[session] != "" {
		if _, err := c.stat(ctx, s.names+strconv.FormatInt(session, 16)); err == nil {
			return false
		}
	}
	if s.node.Expired != nil && session != 0 {
		ok, err := s.node.Expired(ctx, session)
		// The count is read all the same, so that an expiry the logs
		// told is not a rise the next count-read end takes for its own.
		more, _ := s.expiries(ctx)
		if err == nil {
			if ok {
				s.gone[session] = true
			}
			return ok
		}
		s.rec.logf("%s: whether session %x expired: %v: the servers' count of expiries says", s.node.Name, session, err)
		return more
	}
	if s.noMntr {
		return false
	}
	more, err := s.expiries(ctx)
	if err != nil || !more {
		return false
	}
	if session != 0 {
		s.gone[session] = true
	}
	return true
}

// expiries reads each server's count of the sessions it expired, and
// reports whether one rose since it was last read; err when no server
// told it.
func (s *zookeeperSource) expiries(ctx context.Context) (bool, error) {
	type count struct {
		n   float64
		err error
	}
	counts := make([]count, len(s.node.Servers))
	var wg sync.WaitGroup
	for i, addr := range s.node.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[i].n, counts[i].err = staleSessionsExpired(ctx, addr)
		}()
	}
	wg.Wait()
	more, told := false, false
	var err error
	for i, addr := range s.node.Servers {
		if counts[i].err != nil {
			err = counts[i].err
			continue
		}
		told = true
		if n, ok := s.expired[addr]; ok && counts[i].n > n {
			more = true
		}
		s.expired[addr] = counts[i].n // a restarted server counts from 0
	}
	if !told {
		return false, err
	}
	return more, nil
}

// firstExpiries reads the servers' counts of expired sessions a first
// time. A server slow to answer is asked again, twice: beside other work,
// a server's first mntr once took longer than sampleTimeout, and the run's
// record told no expiry. One that answers without the count does not
// allow mntr, and is not asked again.
func (s *zookeeperSource) firstExpiries(ctx context.Context) error {
	for try := 1; ; try++ {
		_, err := s.expiries(ctx)
		var ne net.Error
		if err == nil || try == 3 || !errors.As(err, &ne) || !ne.Timeout() {
			return err
		}
	}
}

// staleSessionsExpired asks the server at addr, by mntr, how many sessions
// it has expired.
func staleSessionsExpired(ctx context.Context, addr string) (float64, error) {
	v, err := fourLetter(ctx, addr, "mntr", "zk_stale_sessions_expired")
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(v), 64)
}

// fourLetter asks the server at addr the four-letter word word, and
// returns what follows key on the line of its answer that begins with it.
func fourLetter(ctx context.Context, addr, word, key string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte(word)); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%s at %s: %w", word, addr, err)
	}
	return "", fmt.Errorf("%s at %s tells no %s (4lw.commands.whitelist must name %s)", word, addr, strings.TrimSuffix(key, "="), word)
}

// emit sends an event at h (history unix ns) to the journal. h is this
// machine's clock where the history's stands to it, known to the spread
// of that measure.
func (s *zookeeperSource) emit(h int64, e event) {
	ev := event{act: e.act, key: s.rec.cfg.Key, token: e.token, client: e.client, command: e.command, value: e.value,
		uncertainty: s.rec.hist.spread}
	if e.act == history.SGrant {
		ev.grain = s.grain
	}
	o := s.rec.op(s.index, h, ev)
	s.rec.send(o)
}

// gap says the record lost sight of the ensemble from from until until
// (history unix ns; 0: never again).
func (s *zookeeperSource) gap(from, until int64, why string) {
	o := s.rec.op(s.index, from, event{act: history.SGap, key: s.rec.cfg.Key, reason: why})
	if until > 0 {
		o.Extra[history.KeyUntil] = until - s.rec.hist.startNS
	}
	s.rec.send(o)
}

// end waits until the watch has delivered every change the ensemble made
// before it was called, and stops it.
func (s *zookeeperSource) end(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, endWait)
	defer cancel()
	defer s.close()
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	key := s.rec.cfg.Key
	// The server answers a read after every event of the changes before
	// it: a sync first, for a server behind its leader.
	err := c.sync(ctx, key)
	if err == nil {
		s.mu.Lock()
		// Set before the read is sent: its mark cannot come first.
		s.endConn, s.endMark = c, c.lastXid()+1
		s.mu.Unlock()
		_, _, err = c.children(ctx, key)
		if err == errZkNoNode {
			err = nil
		}
	}
	if err == nil {
		select {
		case <-s.ended:
			return
		case <-s.done:
			select {
			case <-s.ended: // closed before done: the end was seen
				return
			default:
			}
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil {
		err = fmt.Errorf("the watch ended first")
	}
	s.gap(s.rec.hist.now(), 0, fmt.Sprintf("%s did not show the record's end: %v", s.node.Name, err))
}

// close ends the record's session and stops the watch, once its
// goroutine is done.
func (s *zookeeperSource) close() {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	c.closeSession(context.Background())
	<-s.done
}

// tick asks the ensemble's servers, by conf, for their tickTime: a session
// expires at the first tick boundary past its timeout (ZooKeeper's
// ExpiryQueue rounds each expiry up to the next tick), so a holder that fell
// silent keeps its znode up to a tick past its timeout. The first answer is
// taken: an ensemble shares one configuration.
func (s *zookeeperSource) tick(ctx context.Context) (int64, error) {
	var err error
	for _, addr := range s.node.Servers {
		var t time.Duration
		if t, err = zkConfTick(ctx, addr); err == nil {
			return int64(t), nil
		}
	}
	return 0, err
}

// zkConfTick asks the server at addr its tickTime, by conf.
func zkConfTick(ctx context.Context, addr string) (time.Duration, error) {
	v, err := fourLetter(ctx, addr, "conf", "tickTime=")
	if err != nil {
		return 0, err
	}
	ms, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || ms <= 0 {
		return 0, fmt.Errorf("conf at %s: tickTime=%s is no count of milliseconds", addr, v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
