package checker

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/files"
)

// A Record is the lock server's record of a run (lockserver.edn,
// docs/history-format.md): what the lock's own server did to its keys,
// beside the history of what the clients asked and were told.
type Record struct {
	// Ops are the record's events, each an :info op whose :f is one of
	// history.ServerActs(), in the order of their :time.
	Ops []history.Op
	// Nodes are the lock nodes the events are of, in the order of their
	// first event ("redis-0", "etcd-0"…); the Ops' :process is not theirs.
	Nodes []string
	// LockNodes counts the nodes that acted on the lock's keys (more than
	// a :fence or a :gap). The record's checks judge one node's grants as
	// the lock's: of several (Redlock's, a majority of which grant), each
	// grants its own, and the history is checked alone.
	LockNodes int
	// Workers is the run's worker slots: a worker's connection is named
	// "worker-N", and its ops are those of process N and, after an :info
	// or a restart, of N+Workers, N+2*Workers… With 0, "worker-N" names
	// process N alone.
	Workers int
	// Slack is how far apart the record's clock and the history's may
	// put one instant, in ns: the record's events come stamped by the
	// server (MONITOR's microseconds; deadlines in milliseconds), the
	// history's ops by a reading of the run's Redis TIME taken before and
	// after each call and carried forward by the worker's own clock.
	// Events nearer than this to a call are taken as within it, and a
	// finding must rest on times further apart. 0 is the widest
	// :uncertainty of the record's events when it is wider than
	// DefaultSlack, else DefaultSlack: a record whose node's clock was
	// measured to 40 ms on a loaded machine cannot rest a finding on 2 ms.
	Slack int64
}

// DefaultSlack is Record.Slack when it is 0: a millisecond, the
// resolution of a key's deadline. A real run's release answered ok was
// stamped 75 ns before the server's record of the DEL it made.
const DefaultSlack = int64(1e6)

// ReadRecord reads the lock server's record at path (lockserver.edn), a
// regular file, for a run of workers worker slots (0: unknown), one event
// at a time: each must be an act of a lock server (history.ServerEventOf),
// in the order of its :time. Its errors say where it is malformed.
func ReadRecord(path string, workers int) (*Record, error) {
	f, err := files.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := history.NewServerReader(f, path)
	rec := &Record{Workers: workers}
	var locking []string // the nodes LockNodes counts
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return rec, nil
		}
		if err != nil {
			return nil, err
		}
		if n := len(rec.Ops); n > 0 && e.Time < rec.Ops[n-1].Time {
			return nil, fmt.Errorf("%s: event %d at %d comes before the one before it, at %d: a record is sorted by :time", path, e.Index, e.Time, rec.Ops[n-1].Time)
		}
		if !slices.Contains(rec.Nodes, e.Node) {
			rec.Nodes = append(rec.Nodes, e.Node)
		}
		if e.Act != history.SFence && e.Act != history.SGap && !slices.Contains(locking, e.Node) {
			locking = append(locking, e.Node)
			rec.LockNodes++
		}
		rec.Ops = append(rec.Ops, e.Op())
	}
}

// The kinds of lock call a process makes.
type callKind uint8

const (
	callAcquire callKind = iota
	callRelease
	callExtend
	callRenew
	callKinds
)

func kindOf(f history.Keyword) callKind {
	switch f {
	case history.FRelease:
		return callRelease
	case history.FExtend:
		return callExtend
	case history.FRenew:
		return callRenew
	}
	return callAcquire
}

// A lockCall is one call of a process to its lock as the history has it,
// kept for the record's checks; or a marker (retire) of an :info that
// retired a process in its section.
type lockCall struct {
	f               history.Keyword
	process         history.Process
	inv, done       int64 // done is math.MaxInt64 for a call that never completed
	invIdx, doneIdx int64
	typ             history.Type
	errv            any
	token           string // an acquire's :token
	fence, leaseNS  int64
	killed, retire  bool
}

// keepCall keeps the lock call o completes, invoked at time inv, op
// invIdx.
func (t *lockTracker) keepCall(o *history.Op, inv, invIdx int64) {
	c := lockCall{f: o.F, process: o.Process, inv: inv, invIdx: invIdx, done: o.Time, doneIdx: o.Index,
		typ: o.Type, errv: o.Error, killed: o.Type == history.Info && o.Error == history.ErrKilled}
	if holder, _, ok := o.Process.Renews(); ok {
		c.process, c.token = holder, tokenString(o.Get(history.KeyToken)) // a renewal is its holder's call
	}
	if o.F == history.FAcquire && o.Type == history.Ok {
		c.token = tokenString(o.Get(history.KeyToken))
		c.fence, _ = history.Int(o.Get(history.KeyFence))
		if ms, ok := history.Int(o.Get(history.KeyLeaseMS)); ok {
			c.leaseNS = ms * 1e6
		}
	}
	t.calls = append(t.calls, c)
}

// keepOpen keeps the acquires never completed, at the history's end.
func (t *lockTracker) keepOpen() {
	for p, lp := range t.procs.All() {
		if lp.waiting {
			t.calls = append(t.calls, lockCall{f: history.FAcquire, process: p, inv: lp.invTime, invIdx: lp.invIdx,
				done: math.MaxInt64, doneIdx: -1, typ: history.Info})
		}
	}
}

// tokenString is a token as the record and the history compare it.
func tokenString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case history.Keyword:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return string(history.AppendValue(nil, v))
}

// A serverEvent is an event of the record, as the checks read it.
type serverEvent struct {
	index, time int64
	act         history.Keyword
	key         string
	token, was  string
	client      string
	command     string
	deadline    int64 // history.Unset: none; a :gap's :until
	value       int64 // a :fence's token
	why         string
	guess       bool  // the record's guess (history.KeyGuess)
	uncertainty int64 // how far time may be off (history.KeyUncertainty)
	grain       int64 // a grant's: how long past its lease the server may keep the key (history.KeyExpiryGrain)
}

// readRecord reads the record's events, in time order; bad counts those it
// cannot read (an act it does not know, an event without a :time), and
// first describes the first.
func readRecord(r *Record) (evs []serverEvent, bad int, first string) {
	acts := map[history.Keyword]bool{}
	for _, a := range history.ServerActs() {
		acts[a] = true
	}
	for i, o := range r.Ops {
		if !acts[o.F] || o.Time == history.Unset {
			if bad++; bad == 1 {
				first = fmt.Sprintf("the record's event %d (%s at :time %d) is no act of a lock server", i, canon(o.F), o.Time)
			}
			continue
		}
		e := serverEvent{index: o.Index, time: o.Time, act: o.F, deadline: history.Unset,
			key: tokenString(o.Get(history.KeyKey)), token: tokenString(o.Get(history.KeyToken)), was: tokenString(o.Get(history.KeyWas)),
			client: tokenString(o.Get(history.KeyClient)), command: tokenString(o.Get(history.KeyCommand))}
		if d, ok := history.Int(o.Get(history.KeyDeadline)); ok {
			e.deadline = d
		}
		e.guess, _ = o.Get(history.KeyGuess).(bool)
		e.uncertainty, _ = history.Int(o.Get(history.KeyUncertainty))
		e.grain, _ = history.Int(o.Get(history.KeyExpiryGrain))
		if o.F == history.SGap {
			e.deadline = math.MaxInt64 // never seen again
			if u, ok := history.Int(o.Get(history.KeyUntil)); ok {
				e.deadline = u
			}
			e.why, _ = o.Value.(string)
		}
		e.value, _ = history.Int(o.Value)
		if e.index == history.Unset {
			e.index = int64(i)
		}
		evs = append(evs, e)
	}
	slices.SortStableFunc(evs, func(a, b serverEvent) int { return cmp.Compare(a.time, b.time) })
	return evs, bad, first
}

// The ways a key's span ends.
const (
	endNone = iota // the record ends with the key held
	endExpire
	endDelete
	endOverwrite
	endGrant // the server granted it again while it held a token: no removal in the record
)

// A span is one token's hold of a key in the record: from the grant (or
// overwrite) that gave it the token to what took it away.
type span struct {
	key, token, client string
	start              int64
	startEv            int // index into the events
	end                int64
	endEv              int // -1 when the record ends with the key held
	endHow             int
	deadline           int64 // its last deadline; history.Unset: none
	lease              int64 // the deadline its grant set, less the grant's time; 0 if none
	grain              int64 // how long past its lease the server may keep it (its grant's :expiry-grain)
	// Who held it, by the history.
	holder  int // index into the calls of the acquire it answered; -1 none
	status  holdStatus
	why     whyNone // without a holder: why no acquire took it
	after   int     // the index of the call behind why, -1 if none
	heldTo  int64   // with a holder: when its section ended (math.MaxInt64: it may never have)
	endCall int     // the call that ended the section, -1 if none
	dead    bool    // it ended because its process was killed
}

// Why no acquire took a span's token.
type whyNone uint8

const (
	whyNoCall whyNone = iota // no acquire of its worker was under way
	whyLater                 // its acquire was answered with a later grant
	whyOther                 // its acquire was answered with another (matched by token)
	whyFailed                // its acquire failed
	whyGaveUp                // its acquire was given up when the run ended
	whyUndone                // (words only) whyGaveUp, and the give-up deleted its key
	whyHeld                  // (an acquire took it)
)

// words says why, naming the acquire op.
func (w whyNone) words(op int64) string {
	switch w {
	case whyLater:
		return fmt.Sprintf("the library never told its worker of it (its acquire, op %d, was answered with a later grant)", op)
	case whyOther:
		return fmt.Sprintf("the library never told its worker of it (its acquire, op %d, was answered with another grant)", op)
	case whyFailed:
		return fmt.Sprintf("its acquire (op %d) failed, saying it took nothing", op)
	case whyGaveUp:
		return fmt.Sprintf("its acquire (op %d) was given up when the run ended", op)
	case whyUndone:
		return fmt.Sprintf("its acquire (op %d) was given up when the run ended, and the give-up deleted its key", op)
	}
	if op >= 0 {
		return fmt.Sprintf("no acquire of its worker was under way (the last before it, op %d, had ended)", op)
	}
	return "no acquire of its worker was under way"
}

// How a span's token was held, by the history.
type holdStatus uint8

const (
	holdNone  holdStatus = iota // no process was told of it
	holdKnown                   // an acquire answered with it: holder
	holdMaybe                   // an acquire of unknown outcome may have been
)

// spans cuts the events into the spans of each key, and lists the grants
// the server made while a key still held a live token (liveGrants: the
// indexes of the spans so begun).
func spans(evs []serverEvent) (out []span, liveGrants []int) {
	open := map[string]int{} // key -> its open span
	for i, e := range evs {
		j, held := open[e.key]
		if held && out[j].deadline != history.Unset && out[j].deadline <= e.time && e.act != history.SExpire {
			closeSpan(&out[j], out[j].deadline, -1, endExpire) // it lapsed unrecorded
			delete(open, e.key)
			held = false
		}
		switch e.act {
		case history.SGrant, history.SOverwrite:
			how := endOverwrite
			if e.act == history.SGrant {
				how = endGrant
			}
			if held {
				closeSpan(&out[j], e.time, i, how)
				if e.act == history.SGrant {
					liveGrants = append(liveGrants, len(out))
				}
			}
			s := span{key: e.key, token: e.token, client: e.client, start: e.time, startEv: i, endEv: -1, deadline: e.deadline, holder: -1, after: -1, endCall: -1, grain: e.grain}
			if e.deadline != history.Unset {
				s.lease = e.deadline - e.time
			}
			open[e.key] = len(out)
			out = append(out, s)
		case history.SRenew:
			if held {
				out[j].deadline = e.deadline
			}
		case history.SDelete, history.SExpire:
			if held {
				how := endDelete
				if e.act == history.SExpire {
					how = endExpire
				}
				closeSpan(&out[j], e.time, i, how)
				delete(open, e.key)
			}
		}
	}
	for _, j := range open {
		out[j].end = math.MaxInt64
	}
	return out, liveGrants
}

func closeSpan(s *span, at int64, ev, how int) {
	s.end, s.endEv, s.endHow = at, ev, how
}
