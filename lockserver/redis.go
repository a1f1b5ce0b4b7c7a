package lockserver

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/redis/go-redis/v9"
)

// A RedisNode is a Redis server the lock, or its fence counter, is kept on.
type RedisNode struct {
	Name string // the record's process for it: "redis-0"
	URL  string // where the recorder reaches it
	// OwnClock says its clock is not the history's: any server but the
	// run's own Redis, whose TIME stamps the history.
	OwnClock bool
}

// recordName is the name of the recorder's connections, which the record
// leaves out.
const recordName = "hiatus-record"

// A redisSource records one Redis node: a connection that subscribes to
// the lock's keyspace notifications and then MONITORs, read by one
// goroutine that replays the lines through the node's model.
type redisSource struct {
	rec   *Recorder
	index int // the node's process number in the journal
	node  RedisNode
	opt   *redis.Options
	side  *redis.Client // TIME, CLIENT LIST, the markers; named hiatus-record
	clock nodeClock
	m     model

	mu   sync.Mutex
	conn net.Conn // the MONITOR connection now; nil between connections
	br   *bufio.Reader

	names               map[string]string // client address -> its name
	asked               map[string]bool   // addresses looked up in CLIENT LIST
	script              string            // the client of the script whose inner commands come now
	lineUS              int64             // the line being read, on the node's clock
	lineH               int64             // and on the history's (unix ns)
	quoted, quotedFence string            // the key and the fence counter as MONITOR quotes them
	keyH                int64             // the last command on the lock's key, on the history's clock
	lastH               int64             // the last line's, on the history's clock (unix ns)
	synced              bool              // the state is known: lines count
	syncing             string            // the marker of the state read under way
	state               chan nodeState    // the state the marker's transaction read
	gapFrom             int64             // when sight was lost (unix ns), 0 for none
	gapWhy              string
	endMark             string        // the marker that ends the record
	ended               chan struct{} // closed when the end marker's line is read
	done                chan struct{} // closed when run returns
	endUS               int64         // the end marker's time, on the node's clock
	steps               steps         // the clock steps the run makes (StepClock)
	holding             *step         // the step whose markers frame the items held
	held                []item
	stepB               int64      // the first marker's stamp of the step held, history unix ns
	stepFake            int64      // the run's steps of the clock before the step held
	major               int        // the server's major version
	notify              *notifyUse // its use of the server's notifications (ModeFull)
	pushing             bool       // a notification is being taken, not a line
	// found is an expiry a notification said, kept until the line after
	// it: the command that found the key expired, or a later one.
	found *history.Op
}

// A nodeState is the lock's key and fence counter as a node had them.
type nodeState struct {
	key      keyState
	fence    int64
	relative bool // the deadline is a PTTL, from the marker's line
}

// newRedisSource prepares the record of node n; connect starts it.
func (r *Recorder) newRedisSource(ctx context.Context, index int, n RedisNode) (*redisSource, error) {
	opt, err := redis.ParseURL(n.URL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.Name, err)
	}
	side := *opt
	side.ClientName, side.MaxRetries, side.PoolSize = recordName, -1, 3 // one of them notifyUse.live
	side.ReadTimeout, side.WriteTimeout = time.Second, time.Second
	s := &redisSource{rec: r, index: index, node: n, opt: opt, side: redis.NewClient(&side),
		names: map[string]string{}, asked: map[string]bool{}, state: make(chan nodeState, 1),
		ended: make(chan struct{}), done: make(chan struct{}), endMark: marker("end")}
	s.clock = nodeClock{own: n.OwnClock, node: func(ctx context.Context) (time.Time, error) { return s.side.Time(ctx).Result() }, hist: r.hist,
		steps: &s.steps}
	s.m = model{lock: r.cfg.Key, fence: r.cfg.FenceKey, notify: r.cfg.Mode == ModeFull, emit: s.emit}
	if n.OwnClock {
		if _, ok := s.clock.firstSample(ctx); !ok {
			s.side.Close()
			return nil, fmt.Errorf("%s: its TIME beside the run's Redis's did not answer", n.Name)
		}
	}
	return s, nil
}

// prepare checks the server can be recorded as the mode asks, and turns
// on the keyspace notifications ModeFull reads.
func (s *redisSource) prepare(ctx context.Context) error {
	info, err := s.side.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	v := infoField(info, "redis_version")
	s.major = majorOf(v)
	if s.rec.cfg.Mode == ModeFull {
		if s.major < 7 {
			return fmt.Errorf("Redis %s feeds MONITOR before it runs a command, and its notifications then follow the line: "+
				"--lock-server-record full needs Redis 7 or later (commands records its commands alone)", v)
		}
		s.notify, err = notifyOn(ctx, s.side)
		return err
	}
	return nil
}

// restore unregisters the recorder from the server's keyspace
// notifications, which the last recorder to end turns back (notifyOff).
func (s *redisSource) restore(ctx context.Context) {
	if s.notify != nil {
		_ = s.notify.off(ctx, s.side)
	}
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func majorOf(version string) int {
	n, _ := strconv.Atoi(strings.SplitN(version, ".", 2)[0])
	return n
}

// connect opens the MONITOR connection and has the node's state read in
// its stream.
func (s *redisSource) connect(ctx context.Context) error {
	if err := s.prepare(ctx); err != nil {
		return err
	}
	conn, err := s.dial(ctx)
	if err != nil {
		return err
	}
	br := bufio.NewReaderSize(conn, 1<<16)
	if err := s.handshake(ctx, conn, br); err != nil {
		conn.Close()
		return err
	}
	s.mu.Lock()
	s.conn, s.br, s.synced = conn, br, false
	s.mu.Unlock()
	s.seedNames(ctx)
	if err := s.sync(ctx); err != nil {
		s.closeConn()
		return err
	}
	return nil
}

// marker is a word no command of the run's sends: the argument of an
// ECHO the recorder finds in the stream.
func marker(what string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "hiatus-record-" + what + "-" + hex.EncodeToString(b[:])
}

// dial connects to the node as its URL says.
func (s *redisSource) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, s.opt.Network, s.opt.Addr)
	if err != nil {
		return nil, err
	}
	if s.opt.TLSConfig != nil {
		tc := tls.Client(conn, s.opt.TLSConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	return conn, nil
}

// handshake says HELLO 3 (with the URL's credentials), subscribes to the
// lock's keyspace notifications (ModeFull) and enters MONITOR.
func (s *redisSource) handshake(ctx context.Context, conn net.Conn, br *bufio.Reader) error {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	} else {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
	}
	defer conn.SetDeadline(time.Time{})
	hello := []string{"HELLO", "3"}
	if s.opt.Password != "" {
		hello = append(hello, "AUTH", cmp.Or(s.opt.Username, "default"), s.opt.Password)
	}
	hello = append(hello, "SETNAME", recordName)
	steps := [][]string{hello}
	if s.rec.cfg.Mode == ModeFull {
		sub := []string{"SUBSCRIBE", s.channel(s.rec.cfg.Key)}
		if s.rec.cfg.FenceKey != "" {
			sub = append(sub, s.channel(s.rec.cfg.FenceKey))
		}
		steps = append(steps, sub)
	}
	steps = append(steps, []string{"MONITOR"})
	for _, st := range steps {
		if _, err := conn.Write(appendCommand(nil, st...)); err != nil {
			return err
		}
		if err := awaitAnswer(br, strings.ToLower(st[0]), len(st)-1); err != nil {
			return fmt.Errorf("%s: %w", st[0], err)
		}
	}
	return nil
}

// awaitAnswer reads the answer to a command of the handshake: for
// SUBSCRIBE, one push a channel.
func awaitAnswer(br *bufio.Reader, name string, channels int) error {
	n := 1
	if name == "subscribe" {
		n = channels
	}
	for range n {
		v, err := readValue(br)
		if err != nil {
			return err
		}
		if err := v.err(); err != nil {
			return err
		}
	}
	return nil
}

// channel is the keyspace channel of key in the URL's database.
func (s *redisSource) channel(key string) string {
	return "__keyspace@" + strconv.Itoa(s.opt.DB) + "__:" + key
}

// seedNames learns the names of the connections open before MONITOR
// began; later ones say theirs in the stream (HELLO … SETNAME, CLIENT
// SETNAME).
func (s *redisSource) seedNames(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	list, err := s.side.ClientList(ctx).Result()
	if err != nil {
		return
	}
	for _, line := range strings.Split(list, "\n") {
		var addr, name, flags string
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "addr":
				addr = v
			case "name":
				name = v
			case "flags":
				flags = v
			}
		}
		if strings.Contains(flags, "M") {
			name = history.ClientPrimary
		}
		if addr != "" {
			s.names[addr], s.asked[addr] = name, true
		}
	}
}

// sync reads the lock's key and fence counter in one transaction whose
// last command, an ECHO of a marker, shows in the MONITOR stream where the
// state held: lines before it are left out, lines after it replayed on it.
func (s *redisSource) sync(ctx context.Context) error {
	mark := marker("sync")
	s.syncing = mark
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var get, fence *redis.StringCmd
	var at *redis.DurationCmd
	_, err := s.side.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, s.rec.cfg.Key)
		if s.major >= 7 {
			at = p.PExpireTime(ctx, s.rec.cfg.Key)
		} else {
			at = p.PTTL(ctx, s.rec.cfg.Key) // from the marker's time: applyState
		}
		if s.rec.cfg.FenceKey != "" {
			fence = p.Get(ctx, s.rec.cfg.FenceKey)
		}
		p.Echo(ctx, mark)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read the lock's key: %w", err)
	}
	var st nodeState
	if tok, err := get.Result(); err == nil {
		st.key = keyState{live: true, token: tok}
		if d, err := at.Result(); err == nil && d > 0 {
			st.key.deadline, st.relative = d.Milliseconds(), s.major < 7
		}
	}
	if fence != nil {
		st.fence, _ = fence.Int64()
	}
	// A state read before a lost connection, whose marker never came, is
	// stale: this one replaces it (the channel holds one).
	select {
	case <-s.state:
	default:
	}
	s.state <- st
	return nil
}

// run reads the node's stream until the record ends, connecting again
// after each loss of it; what was missed meanwhile is a gap.
func (s *redisSource) run(ctx context.Context) {
	defer close(s.done)
	for {
		err := s.read(ctx)
		select {
		case <-s.ended:
			return
		default:
		}
		s.gapFrom = max(s.lastH, 1)
		if s.gapFrom == 1 {
			s.gapFrom = s.rec.hist.now()
		}
		s.gapWhy = fmt.Sprintf("the MONITOR connection to %s: %v", s.node.Name, err)
		if !s.reconnect(ctx) {
			return
		}
	}
}

// reconnect tries to connect again every 100 ms until it does, or the
// record ends; it reports whether it did. At once, the first time: a
// connection a failover killed (a sentinel's CLIENT KILL TYPE normal)
// comes back at once.
func (s *redisSource) reconnect(ctx context.Context) bool {
	return s.rec.retryConnect(ctx, 100*time.Millisecond, s.connect)
}

// read reads the stream until it breaks or the end marker's line comes.
func (s *redisSource) read(ctx context.Context) error {
	s.mu.Lock()
	br := s.br
	s.mu.Unlock()
	defer s.closeConn()
	defer s.sendFound(0)
	for {
		if s.rec.cfg.readHook != nil {
			s.rec.cfg.readHook()
		}
		v, err := readValue(br)
		if err != nil {
			return err
		}
		switch v.kind {
		case '+':
			if !s.worth(v.str) {
				continue
			}
			l, err := parseMonitor(v.str)
			if err != nil {
				s.rec.logf("%s: %v", s.node.Name, err)
				continue
			}
			if s.holding != nil && !s.stepMarker(l) {
				if s.hold(ctx, item{line: l}) {
					return nil
				}
				continue
			}
			if s.line(ctx, l) {
				return nil
			}
		case '>':
			if s.holding != nil {
				if s.hold(ctx, item{push: &v}) {
					return nil
				}
				continue
			}
			s.push(v)
		}
	}
}

// push takes a pushed keyspace notification: [message channel event].
func (s *redisSource) push(v respValue) {
	if !s.synced || len(v.elems) != 3 || v.elems[0].str != "message" {
		return
	}
	_, key, ok := strings.Cut(v.elems[1].str, "__:")
	if ok {
		s.pushing = true
		s.m.notice(key, v.elems[2].str)
		s.pushing = false
	}
}

func (s *redisSource) closeConn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// line takes one MONITOR line; it reports true at the end marker's.
func (s *redisSource) line(ctx context.Context, l monitorLine) bool {
	if l.db != s.opt.DB {
		return false
	}
	return s.stamped(ctx, l, s.clock.stamp(ctx, l.us))
}

// stamped takes one MONITOR line stamped h (history unix ns); it reports
// true at the end marker's.
func (s *redisSource) stamped(ctx context.Context, l monitorLine, h int64) bool {
	s.sendFound(h)
	s.lineUS, s.lineH = l.us, h
	s.lastH = max(s.lastH, s.lineH)
	s.learnName(l)
	if len(l.args) == 2 && strings.EqualFold(l.args[0], "echo") {
		if st, first, ok := s.steps.marked(l.args[1]); ok {
			return s.stepMarked(ctx, st, first)
		}
		switch l.args[1] {
		case s.syncing:
			s.synced = true
			s.applyState()
			return false
		case s.endMark:
			s.endUS = l.us
			close(s.ended)
			return true
		}
	}
	if !s.synced {
		return false
	}
	name := ""
	if len(l.args) > 0 {
		name = strings.ToLower(l.args[0])
	}
	client := ""
	switch {
	case l.addr == "lua":
		client = s.script
	case isScript(name):
		s.script = s.clientOf(ctx, l.addr)
	case s.mentions(l):
		client = s.clientOf(ctx, l.addr)
	}
	s.m.line(l, client)
	if s.m.keyUS == l.us {
		s.keyH = s.lineH // a command on the key: live until here, at least
	}
	return false
}

// applyState sets the model to the state the sync read, and ends a gap.
func (s *redisSource) applyState() {
	st := <-s.state
	if st.relative {
		st.key.deadline += s.lineUS / 1000
	}
	s.m.key, s.m.fenceValue = st.key, st.fence
	s.m.pending, s.m.pendingFence = s.m.pending[:0], s.m.pendingFence[:0]
	if s.gapFrom != 0 {
		s.emitGap(s.gapFrom, s.lineH, s.gapWhy)
		s.gapFrom = 0
	}
}

// mentions reports whether a line names the lock's key or fence counter.
func (s *redisSource) mentions(l monitorLine) bool {
	for _, a := range l.args {
		if a == s.rec.cfg.Key || a == s.rec.cfg.FenceKey && a != "" {
			return true
		}
	}
	return false
}

// learnName takes the name a connection gives itself.
func (s *redisSource) learnName(l monitorLine) {
	if len(l.args) < 2 || l.addr == "lua" {
		return
	}
	switch strings.ToLower(l.args[0]) {
	case "hello":
		for i := 1; i+1 < len(l.args); i++ {
			if strings.EqualFold(l.args[i], "setname") {
				s.names[l.addr], s.asked[l.addr] = l.args[i+1], true
			}
		}
	case "client":
		if len(l.args) == 3 && strings.EqualFold(l.args[1], "setname") {
			s.names[l.addr], s.asked[l.addr] = l.args[2], true
		}
	}
}

// clientOf is the name of the connection at addr: as it said it, or as
// CLIENT LIST says (a replica's link to its primary is "primary").
func (s *redisSource) clientOf(ctx context.Context, addr string) string {
	if !s.asked[addr] {
		s.asked[addr] = true
		s.seedNames(ctx)
	}
	if n := s.names[addr]; n != recordName {
		return n
	}
	return history.ClientRun
}

// emit sends an event of the model to the journal.
//
// Its node times go to the history's clock by the offset the line was
// stamped by: a line read after a step that ran before it has its
// deadlines counted on the clock it ran under. An expiry is after the last
// command the server found the key live for (a step of the node's clock
// past the deadline, since, expired it at the step), and not after the
// line it is found at.
func (s *redisSource) emit(e event) {
	off := s.lineUS*1000 - s.lineH
	h := s.lineH
	if e.us != s.lineUS {
		h = e.us*1000 - off
		if e.act == history.SExpire {
			h = max(h, s.keyH)
		}
		if !s.pushing {
			// Found at this line: not after it. A notification comes
			// after the last line read, which bounds nothing (the lines
			// the record does not parse, most of the stream, do not move
			// lineH: an expiry 300 ms after a SET with nothing on the key
			// between was stamped at the SET); the line after it does
			// (sendFound).
			h = min(h, s.lineH)
		}
	}
	e.uncertainty = s.clock.uncertainty()
	o := s.rec.op(s.index, h, e)
	if e.guess {
		o.Extra[history.KeyGuess] = true
	}
	if e.deadline > 0 {
		o.Extra[history.KeyDeadline] = expiryUS(e.deadline)*1000 - off - s.rec.hist.startNS
	}
	if s.node.OwnClock {
		o.Extra[history.KeyNodeTime] = e.us*1000 - s.rec.hist.startNS
	}
	if s.pushing {
		s.sendFound(0)
		s.found = &o
		return
	}
	s.rec.send(o)
}

// sendFound sends the expiry a notification said, at a time not after
// next (history unix ns; 0 for none), the stamp of the line that came
// after it. The deadline it is stamped by is the granting SET's line's
// millisecond plus the lease, where Redis counts from the command's start:
// a SET whose run straddled a millisecond gives a deadline a millisecond
// late, and the SET that found the key expired would sort before the
// expiry, a grant while the key still held the lock.
func (s *redisSource) sendFound(next int64) {
	if s.found == nil {
		return
	}
	o := *s.found
	s.found = nil
	if next > 0 {
		// Not before the last command that found the key live, though a
		// step's offset may stamp the next line before it.
		o.Time = max(min(o.Time, next-s.rec.hist.startNS), s.keyH-s.rec.hist.startNS)
	}
	s.rec.send(o)
}

// emitGap says sight of the node was lost from (unix ns) until until (0:
// never regained).
func (s *redisSource) emitGap(from, until int64, why string) {
	o := s.rec.op(s.index, from, event{act: history.SGap, key: s.rec.cfg.Key, reason: why})
	if until > 0 {
		o.Extra[history.KeyUntil] = until - s.rec.hist.startNS
	}
	s.rec.send(o)
}

// end has the node log the end marker and waits, up to wait, for its
// line: every command the node ran before it is then in the record. A
// node that does not answer ends in a gap.
func (s *redisSource) end(ctx context.Context, wait time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := s.side.Echo(ctx, s.endMark).Err()
	if err == nil {
		select {
		case <-s.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil {
		select {
		case <-s.ended:
		default:
			err = errors.New("its connection was lost")
		}
	}
	if err != nil {
		s.closeConn()
		<-s.done
		from, why := s.gapFrom, s.gapWhy
		if from == 0 {
			from, why = max(s.lastH, s.rec.hist.startNS), fmt.Sprintf("%s did not show the record's end: %v", s.node.Name, err)
		}
		s.emitGap(from, 0, why)
		return
	}
	s.m.end(s.endUS)
}

// worth reports whether a MONITOR line may matter to the record: one that
// names the lock's key or fence counter (a script's lines do, through its
// KEYS), a marker of the recorder's, or a connection naming itself. The
// others — every op's TIME on the run's Redis, most of the stream — are
// left unparsed.
func (s *redisSource) worth(raw string) bool {
	if s.quoted == "" {
		s.quoted = quoteArg(s.rec.cfg.Key)
		if s.rec.cfg.FenceKey != "" {
			s.quotedFence = quoteArg(s.rec.cfg.FenceKey)
		}
	}
	return strings.Contains(raw, s.quoted) || s.quotedFence != "" && strings.Contains(raw, s.quotedFence) ||
		strings.Contains(raw, `"hiatus-record-`) || strings.Contains(raw, "etname") || strings.Contains(raw, "ETNAME")
}
