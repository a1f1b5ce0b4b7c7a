package lockserver

import (
	"math"
	"strconv"
	"strings"

	"github.com/hiatus-dev/hiatus/history"
)

// MONITOR logs the commands a server received, not what they did: a SET NX
// that found the key held and one that took it log alike. A model of the
// lock's key replays them, in the server's order and on its clock, to say
// what each did. With the server's keyspace notifications (ModeFull) it
// has the server's own word on each: the "set" a SET NX that wrote sends
// before its MONITOR line, the "expired" of a key the server found past
// its deadline; with the commands alone (ModeCommands) it decides by the
// deadlines it derived, which can be wrong only for a command within a
// millisecond of one (the server counts a deadline from the command's start,
// the line is stamped after it ran).

// An event is one act of a node's record, on the node's clock.
type event struct {
	us      int64 // the node's clock at the act, µs since the epoch
	act     history.Keyword
	key     string
	token   string
	client  string
	was     string
	command string
	// deadline is when the key expires, in ms on the node's clock as
	// Redis keeps it (it is expired once the clock is past it); 0 for none.
	deadline int64
	value    int64  // a fence's token
	reason   string // a gap's
	guess    bool   // what the record read of the key here may be wrong (model.unsure)
	// uncertainty is how far the act's stamp may be from when it ran, on
	// the history's clock (ns): the spread of the clock's measure it was
	// stamped through; 0 for a stamp of the history's clock itself.
	uncertainty int64
	grain       int64 // a grant's: how long past its lease the server may keep the key (ns); 0 unknown
}

// A keyState is the lock's key as the model has it.
type keyState struct {
	live     bool
	token    string
	deadline int64 // ms on the node's clock, as Redis keeps it; 0 for none
}

// A model replays one node's commands on the lock's key and fence counter.
type model struct {
	lock, fence string
	notify      bool // the server's notifications decide what a command did
	key         keyState
	fenceValue  int64
	// pending are the notifications of the lock's key and of the fence
	// counter since the last line: the effects of the next command that
	// touches them (Redis feeds MONITOR after it ran a command, and the
	// command's notifications before that).
	pending, pendingFence []string
	keyUS                 int64 // the last command on the lock's key's
	emit                  func(event)
	// unsure says the key's state rests on a guess (ModeCommands): a
	// command on it near its deadline (nearDeadline), read one way when
	// the server may have read it the other. Each event meanwhile is
	// marked a guess. It holds until the key's state is sure whatever
	// the server read: a command that sets it whatever it held (a DEL, a
	// SET without NX or XX), or a line past doubtUntil.
	unsure bool
	// doubtUntil is the latest deadline, in ms on the node's clock, that
	// a key the server may hold while the model is unsure can have: the
	// deadlines of the commands since the guess that may have set one,
	// whatever the model read of them. math.MaxInt64: one may never
	// expire.
	doubtUntil int64
}

// stampDoubtMS is how far, in ms, a MONITOR line's stamp may be from the
// instant Redis read its clock for the command: the server counts a
// deadline from the command's start, the line is stamped after it ran.
// A millisecond on a quiet machine (a command whose run straddles one);
// two allowed for a loaded one.
const stampDoubtMS = 2

// out emits e, marked a guess while the model is unsure.
func (m *model) out(e event) {
	e.guess = m.unsure
	m.emit(e)
}

// nearDeadline reports whether a command on the key whose line is stamped
// at us may have found it live or expired, read by the commands alone:
// the deadline the model derived from its granting line may be late by
// the doubt, and the command may have started that much before its line.
func (m *model) nearDeadline(us int64) bool {
	ms := us / 1000
	return !m.notify && m.key.live && m.key.deadline > 0 && ms > m.key.deadline-stampDoubtMS && ms <= m.key.deadline+stampDoubtMS
}

// doubt widens the doubt to a deadline (ms; 0 for none) a command may
// have set while the model is unsure.
func (m *model) doubt(deadline int64) {
	if !m.unsure {
		return
	}
	if deadline == 0 {
		deadline = math.MaxInt64
	}
	m.doubtUntil = max(m.doubtUntil, deadline)
}

// sure ends the doubt, the key's state being sure again.
func (m *model) sure() { m.unsure, m.doubtUntil = false, 0 }

// notice takes a keyspace notification about key.
func (m *model) notice(key, what string) {
	switch {
	case key == m.lock && (what == "expired" || what == "evicted"):
		// Not a command's: the server found the key past its deadline
		// (when a command touched it, or in its expiry cycle), or evicted it.
		// It expired at its deadline, unless a command the server found
		// it live for came after (a clock a millisecond apart).
		if m.key.live {
			m.expire(max(m.keyUS, expiryUS(m.key.deadline)), what)
		}
	case key == m.lock:
		m.pending = append(m.pending, what)
	case key == m.fence:
		m.pendingFence = append(m.pendingFence, what)
	}
}

// expiryUS is the first instant, in µs, at which a key whose deadline is
// ms counts as expired: once the clock's milliseconds are past it.
func expiryUS(ms int64) int64 { return (ms + 1) * 1000 }

// expire ends the key at us, by its deadline (or the server's eviction).
func (m *model) expire(us int64, why string) {
	e := event{us: us, act: history.SExpire, key: m.lock, token: m.key.token, deadline: m.key.deadline}
	if why == "evicted" {
		e.act, e.command = history.SDelete, "evicted"
	}
	m.out(e)
	m.key = keyState{}
}

// line takes one MONITOR line of the node, by client, and says what it did
// to the lock's key and the fence counter.
func (m *model) line(l monitorLine, client string) {
	// A command's notifications come just before its line: whatever is
	// pending belongs to this line, or to none.
	defer func() { m.pending, m.pendingFence = m.pending[:0], m.pendingFence[:0] }()
	name := ""
	if len(l.args) >= 2 {
		name = strings.ToLower(l.args[0])
	}
	// A script's own line: its inner commands follow, as "lua".
	onLock := name != "" && !isScript(name) && keyIn(name, l.args, m.lock)
	writes := onLock && !readOnly(name)
	if writes && m.nearDeadline(l.us) && !m.unsure {
		m.unsure, m.doubtUntil = true, m.key.deadline
	}
	// Past the deadline, but near it, the key expires at the next write
	// of it, which is then a guess: expired at another line (a read, a
	// script's, another key's), the write after it would be read surely.
	ms := l.us / 1000
	if !m.notify && m.key.live && m.key.deadline > 0 && ms > m.key.deadline && (writes || ms > m.key.deadline+stampDoubtMS) {
		m.expire(expiryUS(m.key.deadline), "")
	}
	if m.unsure && m.doubtUntil != math.MaxInt64 && ms > m.doubtUntil+stampDoubtMS && !m.key.live {
		m.sure() // every key the server may have held has expired
	}
	if name == "" || isScript(name) {
		return
	}
	c := cmd{name: name, args: l.args, us: l.us, client: client}
	onFence := m.fence != "" && keyIn(name, l.args, m.fence)
	if onFence || onLock {
		c.text = commandText(l.args, l.addr == "lua")
	}
	if onFence {
		m.fenceCommand(c)
	}
	if onLock {
		m.lockCommand(c)
	}
}

// isScript reports whether a command runs a script, whose inner commands
// MONITOR shows after it.
func isScript(name string) bool {
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

// keyIn reports whether a command acts on key: its first argument, or for
// the commands that take several keys, any of them.
func keyIn(name string, args []string, key string) bool {
	switch name {
	case "del", "unlink", "exists", "touch":
		for _, a := range args[1:] {
			if a == key {
				return true
			}
		}
		return false
	}
	return args[1] == key
}

// A cmd is one command on the lock's key or the fence counter.
type cmd struct {
	name   string
	args   []string
	us     int64
	client string
	text   string
}

func (c cmd) event(act history.Keyword, key string) event {
	return event{us: c.us, act: act, key: key, client: c.client, command: c.text}
}

// did reports whether the command wrote, as the server's notifications say
// (one of what) when they decide, else as the model's guess says.
func (m *model) did(guess bool, what ...string) bool {
	if !m.notify {
		return guess
	}
	for _, p := range m.pending {
		for _, w := range what {
			if p == w {
				return true
			}
		}
	}
	return false
}

// fenceCommand takes a command on the fence counter.
func (m *model) fenceCommand(c cmd) {
	by := int64(1)
	switch c.name {
	case "incr":
	case "incrby":
		n, err := strconv.ParseInt(arg(c.args, 2), 10, 64)
		if err != nil {
			return
		}
		by = n
	case "del", "unlink", "set":
		// The run resets the counter before the workers start; a worker
		// does not touch it but by INCR.
		m.fenceValue = 0
		if c.name == "set" {
			m.fenceValue, _ = strconv.ParseInt(arg(c.args, 2), 10, 64)
		}
		return
	default:
		return
	}
	if m.notify && !containsAny(m.pendingFence, "incrby") {
		return // the server did not count it (not an integer)
	}
	m.fenceValue += by
	e := c.event(history.SFence, m.fence)
	e.value = m.fenceValue
	m.out(e)
}

// lockCommand takes a command on the lock's key.
func (m *model) lockCommand(c cmd) {
	m.keyUS = c.us
	switch c.name {
	case "set":
		m.set(c)
	case "del", "unlink", "getdel":
		if m.did(m.key.live, "del") {
			m.remove(c)
		}
		m.sure() // the key is gone, whatever it held
	case "pexpire", "expire", "pexpireat", "expireat":
		m.expireCommand(c)
	case "persist":
		m.doubt(0)
		if m.did(m.key.live && m.key.deadline > 0, "persist") {
			m.key.deadline = 0
			m.renewed(c)
		}
	default:
		if readOnly(c.name) {
			return
		}
		if m.notify && containsAny(m.pending, "del") {
			m.remove(c)
		}
	}
}

// readOnly reports whether a command on the key only reads it.
func readOnly(name string) bool {
	switch name {
	case "get", "getrange", "pttl", "ttl", "exists", "strlen", "type", "pexpiretime", "expiretime", "object", "dump":
		return true
	}
	return false
}

// remove ends the key by command c.
func (m *model) remove(c cmd) {
	e := c.event(history.SDelete, m.lock)
	e.token = m.key.token
	m.out(e)
	m.key = keyState{}
}

// renewed says the key's deadline moved, by command c.
func (m *model) renewed(c cmd) {
	e := c.event(history.SRenew, m.lock)
	e.token, e.deadline = m.key.token, m.key.deadline
	m.out(e)
}

// set takes a SET of the lock's key.
func (m *model) set(c cmd) {
	if len(c.args) < 3 {
		return
	}
	o, ok := parseSet(c.args[3:], c.us)
	if !ok {
		return
	}
	guess := true
	switch {
	case o.nx:
		guess = !m.key.live
	case o.xx:
		guess = m.key.live
	}
	val := c.args[2]
	if o.keepTTL {
		m.doubt(0) // a key the server found expired takes none
	} else {
		m.doubt(o.deadline) // the server may have read it the other way
	}
	if !m.did(guess, "set") {
		if o.nx {
			e := c.event(history.SRefuse, m.lock)
			e.token = m.key.token
			m.out(e)
		}
		return
	}
	deadline := o.deadline
	if o.keepTTL {
		deadline = m.key.deadline
	}
	var e event
	switch {
	case !m.key.live:
		e = c.event(history.SGrant, m.lock)
	case m.key.token == val:
		e = c.event(history.SRenew, m.lock)
	default:
		e = c.event(history.SOverwrite, m.lock)
		e.was = m.key.token
	}
	m.key = keyState{live: true, token: val, deadline: deadline}
	e.token, e.deadline = val, deadline
	m.out(e)
	if !o.nx && !o.xx && !o.keepTTL {
		m.sure() // it wrote, whatever the key held
	}
}

// setOptions are a SET's options that matter to the key.
type setOptions struct {
	nx, xx, keepTTL bool
	deadline        int64 // ms on the node's clock; 0 for none
}

// parseSet reads a SET's options (after the value), run at us.
func parseSet(opts []string, us int64) (setOptions, bool) {
	var o setOptions
	for i := 0; i < len(opts); i++ {
		switch strings.ToLower(opts[i]) {
		case "nx":
			o.nx = true
		case "xx":
			o.xx = true
		case "get":
		case "keepttl":
			o.keepTTL = true
		case "px", "ex", "pxat", "exat":
			if i+1 >= len(opts) {
				return o, false
			}
			d, ok := deadlineOf(strings.ToLower(opts[i]), opts[i+1], us)
			if !ok {
				return o, false
			}
			o.deadline = d
			i++
		default:
			return o, false
		}
	}
	return o, true
}

// deadlineOf is the deadline, in ms on the node's clock, that an expiry of
// unit ("px", "ex", "pxat", "exat"; "pexpire"… alike) and amount n set by
// a command run at us.
func deadlineOf(unit, n string, us int64) (int64, bool) {
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return 0, false
	}
	switch unit {
	case "px", "pexpire":
		return us/1000 + v, true
	case "ex", "expire":
		return us/1000 + v*1000, true
	case "pxat", "pexpireat":
		return v, true
	case "exat", "expireat":
		return v * 1000, true
	}
	return 0, false
}

// expireCommand takes a PEXPIRE, EXPIRE, PEXPIREAT or EXPIREAT of the key:
// a deadline in the past deletes it.
func (m *model) expireCommand(c cmd) {
	d, ok := deadlineOf(c.name, arg(c.args, 2), c.us)
	if !ok {
		return
	}
	guess := m.key.live && expireAllowed(strings.ToLower(arg(c.args, 3)), m.key.deadline, d)
	past := d <= c.us/1000
	m.doubt(d)
	switch {
	case m.notify && containsAny(m.pending, "del"), !m.notify && guess && past:
		m.remove(c)
	case m.did(guess && !past, "expire"):
		m.key.deadline = d
		m.renewed(c)
	}
}

// expireAllowed applies PEXPIRE's NX, XX, GT and LT to a key whose
// deadline is old (0 for none), given the new one.
func expireAllowed(opt string, old, d int64) bool {
	switch opt {
	case "nx":
		return old == 0
	case "xx":
		return old != 0
	case "gt":
		return old != 0 && d > old
	case "lt":
		return old == 0 || d < old
	}
	return true
}

// end closes the record of the node at us: a key past its deadline then
// expired.
func (m *model) end(us int64) {
	if m.key.live && m.key.deadline > 0 && us/1000 > m.key.deadline {
		m.expire(expiryUS(m.key.deadline), "")
	}
}

func arg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

func containsAny(xs []string, want ...string) bool {
	for _, x := range xs {
		for _, w := range want {
			if x == w {
				return true
			}
		}
	}
	return false
}
