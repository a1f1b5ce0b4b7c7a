// Package adapter speaks the lock adapter protocol: a lock written in any
// language runs as a child process and answers, one JSON object a line on
// its standard output, the requests hiatus writes one a line on its
// standard input (docs/adapter-protocol.md). It owns the protocol: the
// messages, starting an adapter and the hello it owes, matching answers to
// requests, what an adapter that misbehaves did, and the conformance check
// an adapter's author runs. What a lock's answers mean to a run — a grant,
// an expired release — is package client's.
package adapter

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/internal/printable"
)

// Protocol is the version of the protocol this package speaks; the init
// message carries it.
const Protocol = 1

// HelloTimeout bounds the wait for an adapter's hello: an interpreter's
// start and its imports (Node's and Python's take 0.1–0.5 s here).
const HelloTimeout = 10 * time.Second

// Answer types. An adapter answers every request with one of them.
const (
	TypeOK    = "ok"    // done: acquired, released, renewed
	TypeFail  = "fail"  // certainly not done; Reason says why
	TypeInfo  = "info"  // may or may not have been done (a timeout on the way to the server)
	TypeError = "error" // the request was not understood; nothing was done
	TypeHello = "hello" // the answer to init
)

// Report types: what an adapter writes of its own accord, answering no
// request (no in_reply_to): a renewal its library makes on its own, when
// it begins and when it is answered.
const (
	TypeRenewing = "renewing" // the library begins a renewal of a grant: renewal, token
	TypeRenewed  = "renewed"  // that renewal's answer: renewal, result, reason
)

// A Report is a line an adapter writes of its own accord: a renewal of a
// grant its library makes on its own, begun (TypeRenewing, written before
// the renewal is sent) or answered (TypeRenewed).
type Report struct {
	Type    string `json:"type"`
	Renewal int64  `json:"renewal"`          // the adapter's number for the renewal, the same in its two lines
	Token   string `json:"token,omitempty"`  // renewing: the grant's token
	Result  string `json:"result,omitempty"` // renewed: ok, fail or info, as a renew's answer
	Reason  string `json:"reason,omitempty"` // renewed: why, for fail and info (not-held, stolen, …)
}

// Reasons of a fail answer that mean more than their words.
const (
	ReasonBusy    = "busy"     // acquire: another holder has the lock
	ReasonNotHeld = "not-held" // release, renew: the lease had expired and no one holds the lock
	ReasonStolen  = "stolen"   // release, renew: the lease had expired and another holder has it
)

// Setup is what an adapter is told when it starts, in the init message:
// where the lock's server is, and the lock's name and lease.
type Setup struct {
	RedisURL string
	// RedisURLs are the Redis nodes the lock is kept on, in node order,
	// for a lock of several independent nodes (a Redlock; --adapter-store
	// redis-nodes): the first is RedisURL. Otherwise RedisURL alone.
	RedisURLs []string
	// PostgresURL is the run's PostgreSQL, for a lock kept there.
	PostgresURL string
	// ZooKeeper is the connect string (host:port,host:port) of the
	// ZooKeeper ensemble the run started for an adapter that keeps its
	// lock there (--adapter-store zookeeper); "" for none.
	ZooKeeper string
	// Etcd are the client URLs (http://host:port) of the etcd server the
	// run started for an adapter that keeps its lock there
	// (--adapter-store etcd); nil for none.
	Etcd []string
	// Sentinel is where the sentinels of a Redis they fail over are, for
	// an adapter that keeps its lock there (--adapter-store sentinel):
	// RedisURL is then "", since the primary is whichever they name.
	Sentinel Sentinel
	Lock     string
	// ClientName is the name the adapter's connections to the lock's
	// server are to give themselves (CLIENT SETNAME): the worker's, so
	// that the lock server's record says whose commands they are.
	ClientName string
	Lease      time.Duration
	Retry      time.Duration // the wait between attempts, for adapters that poll
	Hello      time.Duration // the wait for the hello; 0 for HelloTimeout
	// Trace, if set, takes every line sent and received, marked -> and
	// <-: a transcript of the exchange. It is not sent.
	Trace io.Writer
	// Reports, if set, takes each renewal the adapter reports of its
	// library's own (Report), in the order written, once its lines were
	// found well-formed and paired; it is called from the goroutine that
	// reads the adapter's answers, and must not block. Nil drops them.
	Reports func(Report)
	// Mark, if set, is the mark (NewMark) of a set of adapters, such as
	// a run's, whose owner kills what they leave behind once it is done
	// with them all (Reap(Mark)), even when no Close of theirs ran: their
	// worker was killed. If "", the adapter is a set of its own, and its
	// Close kills what it left. Either way every process the adapter
	// starts carries the mark in its environment (MarkEnv).
	Mark string
}

// A Sentinel is how a client finds the primary of a Redis its sentinels
// fail over, as init tells it.
type Sentinel struct {
	Addrs  []string `json:"sentinels,omitempty"`       // host:port of each sentinel
	Master string   `json:"sentinel_master,omitempty"` // the name they know the primary by
	// NAT maps an address a sentinel gives for a node (host:port) to the
	// one to dial, where they differ: the sentinels reach the nodes by
	// links that the failover cuts, the workers directly. ioredis's
	// natMap and go-redis's Dialer take it.
	NAT map[string]string `json:"sentinel_nat,omitempty"`
}

// Hello is what an adapter says of itself in answer to init.
type Hello struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Library string `json:"library,omitempty"` // the lock library and its version
	Fencing bool   `json:"fencing,omitempty"` // its grants carry a fencing token
	Renewal bool   `json:"renewal,omitempty"` // it takes renew requests
	// Sentinel says its lock is on the primary init's sentinels name: an
	// adapter told sentinels that does not say so would keep its lock
	// elsewhere (its library's default Redis), and is refused.
	Sentinel bool `json:"sentinel,omitempty"`
	// Key is the key the library keeps the lock that init named under,
	// when not that name (simple-redis-mutex's "@simple-redis-mutex:lock-"
	// and the name): the key the run's record of the lock's server
	// watches. "" for the name itself.
	Key string `json:"key,omitempty"`
}

// String says what the adapter said of itself, in one line, its words
// escaped for a terminal (printable.Escape): a hello that clears the
// screen and prints a verdict of its own shows as the escapes it is.
func (h Hello) String() string {
	yes := map[bool]string{true: "yes", false: "no"}
	return fmt.Sprintf("%s %s (%s), fencing %s, renewal %s", printable.Escape(h.Name), printable.Escape(h.Version),
		printable.Escape(h.Library), yes[h.Fencing], yes[h.Renewal])
}

// A Request is a message to an adapter. ID is set by Process.Request.
type Request struct {
	Type  string `json:"type"` // init, acquire, release, renew
	ID    int64  `json:"id"`
	Lock  string `json:"lock,omitempty"`
	Token string `json:"token,omitempty"` // release, renew: the grant's token
	// LeaseMS is the lease to acquire or renew for; WaitMS (acquire) how
	// long to keep trying before a fail "busy".
	LeaseMS int64 `json:"lease_ms,omitempty"`
	WaitMS  int64 `json:"wait_ms,omitempty"`
	// init only
	Protocol    int      `json:"protocol,omitempty"`
	RedisURL    string   `json:"redis_url,omitempty"`
	RedisURLs   []string `json:"redis_urls,omitempty"`
	PostgresURL string   `json:"postgres_url,omitempty"`
	// ZooKeeper is the ensemble's connect string, for an adapter that
	// keeps its lock on ZooKeeper.
	ZooKeeper string `json:"zookeeper,omitempty"`
	// EtcdEndpoints are the etcd server's client URLs, for an adapter
	// that keeps its lock on etcd.
	EtcdEndpoints []string `json:"etcd_endpoints,omitempty"`
	// Sentinel's fields are the request's own: sentinels,
	// sentinel_master, sentinel_nat.
	Sentinel
	RetryMS    int64  `json:"retry_ms,omitempty"`
	ClientName string `json:"client_name,omitempty"`
}

// An Answer is an adapter's answer to one request.
type Answer struct {
	Type      string `json:"type"`
	InReplyTo *int64 `json:"in_reply_to"`
	Reason    string `json:"reason,omitempty"`
	Token     string `json:"token,omitempty"`    // acquire: the holder's token, which release names
	Fence     int64  `json:"fence,omitempty"`    // acquire: the fencing token, if the lock has one
	LeaseMS   int64  `json:"lease_ms,omitempty"` // acquire: the lease granted, if not the one asked
	Hello
	// hasFence and hasLease say whether the adapter wrote fence and
	// lease_ms (and not null): 0 is a value out of the protocol, not none.
	hasFence, hasLease bool
}

// parseAnswer reads an answer line as the adapter wrote it.
func parseAnswer(line []byte) (Answer, error) {
	var a Answer
	if err := json.Unmarshal(line, &a); err != nil {
		return a, err
	}
	var has struct {
		Fence   json.RawMessage `json:"fence"`
		LeaseMS json.RawMessage `json:"lease_ms"`
	}
	if err := json.Unmarshal(line, &has); err != nil {
		return a, err
	}
	given := func(v json.RawMessage) bool { return len(v) > 0 && string(v) != "null" }
	a.hasFence, a.hasLease = given(has.Fence), given(has.LeaseMS)
	return a, nil
}

// maxLeaseMS is the longest lease hiatus can count in a time.Duration.
const maxLeaseMS = math.MaxInt64 / int64(time.Millisecond)

// outside says how a grant, a's answer to an acquire, breaks the protocol
// for an adapter that said hello h, or "" if it does not: it carries its
// token, its fence if h says fencing (a positive integer) and its lease,
// if it gives one, as a positive number of milliseconds. Such a grant is
// no grant: a fence of 0 would be recorded as none, a lease of -1000 ms
// dropped for the one asked, and the history would say what did not
// happen.
func outside(a Answer, h Hello) string {
	switch {
	case a.Type != TypeOK:
		return ""
	case a.Token == "":
		return "a grant without a token: its release could not name it"
	case h.Fencing && !a.hasFence:
		return "a grant without a fence, yet its hello said fencing"
	case h.Fencing && a.Fence <= 0:
		return fmt.Sprintf("fence %d: its hello said fencing, and a fencing token is a positive integer", a.Fence)
	case a.hasLease && a.LeaseMS <= 0:
		return fmt.Sprintf("lease_ms %d: a lease granted is a positive number of milliseconds", a.LeaseMS)
	case a.hasLease && a.LeaseMS > maxLeaseMS:
		return fmt.Sprintf("lease_ms %d: more than hiatus can count (%d)", a.LeaseMS, maxLeaseMS)
	}
	return ""
}

// String is the answer as the adapter wrote it (not its Hello's words).
func (a Answer) String() string {
	b, _ := json.Marshal(a)
	return string(b)
}

// said is the answer's type and reason, for a message: fail "busy". Its
// type is escaped for a terminal, its reason quoted.
func (a Answer) said() string {
	return fmt.Sprintf("%s %q", printable.Escape(a.Type), a.Reason)
}

// Quoted is what an adapter wrote on its standard error, for a message:
// each line escaped for a terminal (printable.Lines) and indented, so that
// none of it can pass for a line of hiatus's own.
func Quoted(stderr string) string {
	return "    " + strings.ReplaceAll(printable.Lines(stderr), "\n", "\n    ")
}

// An Error is a request that got no answer, or could not be sent: the
// adapter is gone, broke the protocol, or was too slow. Sent says whether
// the adapter may have acted on the request (its outcome is unknown) or
// certainly did not.
type Error struct {
	Adapter string // the adapter's command
	Request string // the request's type
	ID      int64
	Sent    bool
	Err     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("adapter %q: %s request %d: %v", e.Adapter, e.Request, e.ID, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Errors a request may end in; each also says what the adapter did.
var (
	ErrNoAnswer = errors.New("no answer in time")
	ErrGone     = errors.New("the adapter is gone") // it exited or broke the protocol; see the wrapped reason
	// ErrProtocol is an answer outside the protocol, returned with the
	// answer: the adapter acted, but what it said of it cannot be taken.
	ErrProtocol = errors.New("an answer outside the protocol")
)

// A goneError is ErrGone with its reason: the adapter exited, or broke the
// protocol and was stopped (it was still running: "gone" alone would
// send its author looking for a crash).
type goneError struct {
	stopped bool
	why     error
}

func (e goneError) Error() string {
	if e.stopped {
		return fmt.Sprintf("hiatus stopped the adapter: %v", e.why)
	}
	return fmt.Sprintf("%v: %v", ErrGone, e.why)
}

func (e goneError) Is(target error) bool { return target == ErrGone }

// A Process is a running adapter.
type Process struct {
	Command string
	Hello   Hello

	cmd        *exec.Cmd
	stdin      io.WriteCloser
	stdout     io.ReadCloser
	log        *stderrLog // its standard error, and complaints: late, doubled or stray answers
	wmu        sync.Mutex // serializes writes to stdin
	trace      io.Writer  // the transcript, if asked for (Setup.Trace)
	traceMu    sync.Mutex
	mu         sync.Mutex
	next       int64
	wait       map[int64]pending
	done       map[int64]string  // requests answered lately, by type: a second answer is a complaint
	late       map[int64]pending // requests given up on, until their answer comes
	broken     error             // why the adapter is gone; nil while it runs
	complaints []string          // what it did wrong that hiatus could live with: the first maxComplaints
	complained int               // how many complaints there were
	gone       chan struct{}     // closed when broken is set
	exited     chan struct{}     // closed when the process has been waited for
	mark       string            // MarkEnv's value in its environment
	reaps      bool              // Close kills what it left (Setup.Mark was "")
	reapOnce   sync.Once
	left       []Leftover // what Close killed
	reports    func(Report)
	renewing   map[int64]bool // renewals reported begun and not yet answered
	reported   int            // renewals reported answered
}

type pending struct {
	kind, lock string
	ch         chan Answer
}

// Start starts the adapter command (run by /bin/sh, as a shell would),
// sends it init and waits up to s.Hello (HelloTimeout if 0) for its hello. Its standard
// error goes to stderr, up to StderrBudget bytes; so do complaints about
// its answers. It is killed if this process dies.
func Start(ctx context.Context, command string, s Setup, stderr io.Writer) (*Process, error) {
	// "exec" makes the shell become the adapter, so that signals and
	// exits are the adapter's own.
	cmd := exec.Command("/bin/sh", "-c", "exec "+command)
	errlog := newStderrLog(stderr, command, StderrBudget)
	cmd.Stderr = errlog // a pipe, read at once, even past the budget
	// A child of the adapter's own may hold its stderr open long after it
	// exited: Wait gives up on the pipe a second after the exit.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Its children inherit the mark, however they leave it: Reap finds them.
	mark := NewMark()
	if s.Mark != "" {
		mark = s.Mark + "." + mark
	}
	cmd.Env = append(os.Environ(), MarkEnv+"="+mark)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("adapter %q: %w", command, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("adapter %q: %w", command, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("adapter %q: start: %w", command, err)
	}
	p := &Process{Command: command, cmd: cmd, stdin: stdin, stdout: stdout, log: errlog, trace: s.Trace, wait: map[int64]pending{},
		done: map[int64]string{}, late: map[int64]pending{}, gone: make(chan struct{}), exited: make(chan struct{}),
		mark: mark, reaps: s.Mark == "", reports: s.Reports, renewing: map[int64]bool{}}
	go p.read(stdout)
	urls := s.RedisURLs
	if len(urls) == 0 && s.RedisURL != "" {
		urls = []string{s.RedisURL}
	}
	a, err := p.Request(ctx, Request{Type: "init", Protocol: Protocol, RedisURL: s.RedisURL, RedisURLs: urls, PostgresURL: s.PostgresURL, ZooKeeper: s.ZooKeeper, EtcdEndpoints: s.Etcd, Sentinel: s.Sentinel, Lock: s.Lock,
		LeaseMS: s.Lease.Milliseconds(), RetryMS: s.Retry.Milliseconds(), ClientName: s.ClientName}, cmp.Or(s.Hello, HelloTimeout))
	switch {
	case err != nil:
		p.Close()
		return nil, fmt.Errorf("adapter %q did not say hello: %w", command, errors.Unwrap(err))
	case a.Type != TypeHello:
		p.Close()
		return nil, fmt.Errorf("adapter %q answered init with %q, not hello: %s", command, a.Type, printable.Escape(a.Reason))
	case a.Name == "":
		p.Close()
		return nil, fmt.Errorf("adapter %q said hello without a name", command)
	}
	p.Hello = a.Hello
	return p, nil
}

// PID is the adapter's process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the adapter, unless it is gone: through its process
// handle, so that a PID reused since can never be hit.
func (p *Process) Signal(sig os.Signal) error {
	if p.Err() != nil {
		return nil
	}
	return p.cmd.Process.Signal(sig)
}

// Request sends r and waits up to timeout for its answer. It fails with
// an *Error when no answer came: ctx ended, the time ran out, or the
// adapter is gone. An answer of any type is returned as it is; one outside
// the protocol (see outside) comes with an *Error that wraps ErrProtocol.
func (p *Process) Request(ctx context.Context, r Request, timeout time.Duration) (Answer, error) {
	a, err := p.request(ctx, r, timeout)
	if err != nil || r.Type != "acquire" {
		return a, err
	}
	if why := outside(a, p.Hello); why != "" {
		return a, &Error{Adapter: p.Command, Request: r.Type, ID: *a.InReplyTo, Sent: true, Err: fmt.Errorf("%w: %s", ErrProtocol, why)}
	}
	return a, nil
}

func (p *Process) request(ctx context.Context, r Request, timeout time.Duration) (Answer, error) {
	ch := make(chan Answer, 1)
	p.mu.Lock()
	r.ID = p.next
	p.next++
	fail := func(sent bool, err error) (Answer, error) {
		return Answer{}, &Error{Adapter: p.Command, Request: r.Type, ID: r.ID, Sent: sent, Err: err}
	}
	if p.broken != nil {
		p.mu.Unlock()
		return fail(false, p.broken)
	}
	line, err := json.Marshal(r)
	if err != nil {
		p.mu.Unlock()
		return fail(false, err)
	}
	p.wait[r.ID] = pending{kind: r.Type, lock: r.Lock, ch: ch}
	p.mu.Unlock()
	// Not under mu: an adapter that does not read blocks its writer, not
	// the reading of its answers.
	p.wmu.Lock()
	p.traced("->", line)
	_, err = p.stdin.Write(append(line, '\n'))
	p.wmu.Unlock()
	if err != nil {
		p.mu.Lock()
		delete(p.wait, r.ID)
		p.mu.Unlock()
		// A write to a closed pipe reached no one: nothing was done. The
		// adapter has gone, or is going: say how it ended, not the pipe.
		select {
		case <-p.gone:
			return fail(false, p.reason())
		case <-time.After(time.Second):
			return fail(false, fmt.Errorf("%w: write: %v", ErrGone, err))
		}
	}
	select {
	case a := <-ch:
		return a, nil
	case <-p.gone:
		if !p.forget(r.ID) {
			return <-ch, nil // it answered, then went
		}
		return fail(true, p.reason())
	case <-ctx.Done():
	case <-p.running(timeout):
	}
	if !p.forget(r.ID) {
		return <-ch, nil // the answer came as the wait ended: it counts
	}
	if ctx.Err() != nil {
		return fail(true, ctx.Err())
	}
	return fail(true, fmt.Errorf("%w (%v)", ErrNoAnswer, timeout))
}

// running returns a channel closed once this process has run for d: time
// it spent stopped (SIGSTOP of the worker and its adapter together) does
// not count, or every request in flight across a pause would time out at
// the moment both wake, before the adapter could answer.
func (p *Process) running(d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	step := min(max(d/10, time.Millisecond), 50*time.Millisecond)
	go func() {
		defer close(done)
		tick := time.NewTicker(step)
		defer tick.Stop()
		last := time.Now()
		for counted := time.Duration(0); counted < d; {
			select {
			case now := <-tick.C:
				// A tick far later than due means the process was
				// stopped (or starved): that stretch is not counted.
				if gap := now.Sub(last); gap < 4*step {
					counted += gap
				}
				last = now
			case <-p.gone:
				return
			}
		}
	}()
	return done
}

// forget stops waiting for the answer to id, and says whether it was still
// awaited: false means deliver took it, and its answer is on its way.
// An acquire given up on is remembered, so that a grant answered late is
// given back.
func (p *Process) forget(id int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.wait[id]
	if ok {
		delete(p.wait, id)
		p.late[id] = w
	}
	return ok
}

func (p *Process) reason() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.broken
}

// Err says why the adapter is gone, or nil while it runs.
func (p *Process) Err() error { return p.reason() }

// Gone is closed once the adapter is gone (Err says why).
func (p *Process) Gone() <-chan struct{} { return p.gone }

// read matches the adapter's answers to their requests until its output
// ends or it writes something that is no answer; then the adapter is gone.
func (p *Process) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var why error
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		p.traced("<-", line)
		if isReport(line) {
			p.report(line)
			continue
		}
		a, err := parseAnswer(line)
		if err != nil || a.InReplyTo == nil || a.Type == "" {
			why = fmt.Errorf("it wrote %q, which is no answer (want a JSON object with type and in_reply_to)", clip(line))
			break
		}
		p.deliver(a)
	}
	if why == nil && sc.Err() != nil {
		why = fmt.Errorf("reading its output: %v", sc.Err())
	}
	stopped := why != nil
	if stopped {
		_ = p.cmd.Process.Kill() // it broke the protocol: nothing it says can be trusted
		_ = p.stdout.Close()     // a child of its own may hold the pipe open
	}
	err := p.cmd.Wait()
	p.log.close(p.cmd.Process.Pid) // its stderr is read to its end
	if why == nil {
		why = fmt.Errorf("it exited (%v)", exitWords(err))
	}
	p.mu.Lock()
	p.broken = goneError{stopped: stopped, why: why}
	p.mu.Unlock()
	close(p.gone)
	close(p.exited)
}

// deliver hands a to the request it answers, or complains of it. A grant
// answered after hiatus gave up on its acquire is given back at once:
// no one would ever release it.
func (p *Process) deliver(a Answer) {
	id := *a.InReplyTo
	p.mu.Lock()
	w, ok := p.wait[id]
	kind, answered := p.done[id]
	late, wasLate := p.late[id]
	switch {
	case ok:
		delete(p.wait, id)
		p.remember(id, w.kind)
	case wasLate:
		delete(p.late, id)
		p.remember(id, late.kind)
	}
	p.mu.Unlock()
	var complaint string
	switch {
	case ok:
		w.ch <- a
		return
	case wasLate && late.kind == "acquire" && a.Type == TypeOK && a.Token != "":
		complaint = fmt.Sprintf("granted the lock in answer to acquire request %d after hiatus had given up on it; released at once", id)
		go p.Request(context.Background(), Request{Type: "release", Lock: late.lock, Token: a.Token}, HelloTimeout) //nolint:errcheck // best effort
	case wasLate:
		complaint = fmt.Sprintf("answered %s request %d (%s) after hiatus had given up on it; dropped", late.kind, id, printable.Escape(a.Type))
	case answered:
		complaint = fmt.Sprintf("answered %s request %d twice; the first answer counts, this one (%s) is dropped", kind, id, printable.Escape(a.Type))
	default:
		complaint = fmt.Sprintf("answered request %d (%s), which hiatus never sent; dropped", id, printable.Escape(a.Type))
	}
	p.complain(complaint)
}

// complain notes what the adapter did wrong that hiatus can live with,
// and logs the first maxComplaints such.
func (p *Process) complain(complaint string) {
	p.mu.Lock()
	p.complained++
	n := p.complained
	if n <= maxComplaints {
		p.complaints = append(p.complaints, complaint)
	}
	p.mu.Unlock()
	switch {
	case n < maxComplaints:
		p.log.say("hiatus: adapter %q %s", p.Command, complaint)
	case n == maxComplaints:
		p.log.say("hiatus: adapter %q %s; its further complaints are counted, not logged", p.Command, complaint)
	}
}

// isReport says line is a report (Report): a JSON object of a report's
// type, answering no request.
func isReport(line []byte) bool {
	var head struct {
		Type      string          `json:"type"`
		InReplyTo json.RawMessage `json:"in_reply_to"`
	}
	return json.Unmarshal(line, &head) == nil && len(head.InReplyTo) == 0 && (head.Type == TypeRenewing || head.Type == TypeRenewed)
}

// report takes a line the adapter wrote of its own accord: a renewal its
// library began or had answered. One that is malformed, or does not pair
// (answered but never begun, begun twice), is a complaint, and dropped.
func (p *Process) report(line []byte) {
	var r Report
	err := json.Unmarshal(line, &r)
	var why string
	switch {
	case err != nil:
		why = fmt.Sprintf("wrote a report that is not one (%v)", err)
	case r.Type == TypeRenewing && r.Token == "":
		why = fmt.Sprintf("reported renewal %d begun without the grant's token", r.Renewal)
	case r.Type == TypeRenewing && p.renewing[r.Renewal]:
		why = fmt.Sprintf("reported renewal %d begun twice", r.Renewal)
	case r.Type == TypeRenewed && !p.renewing[r.Renewal]:
		why = fmt.Sprintf("reported renewal %d answered, which it never reported begun", r.Renewal)
	case r.Type == TypeRenewed && r.Result != TypeOK && r.Result != TypeFail && r.Result != TypeInfo:
		why = fmt.Sprintf("reported renewal %d answered %q, which is no result (ok, fail, info)", r.Renewal, printable.Escape(r.Result))
	}
	if why != "" {
		p.complain(why)
		return
	}
	if r.Type == TypeRenewing {
		p.renewing[r.Renewal] = true
	} else {
		delete(p.renewing, r.Renewal)
		p.mu.Lock()
		p.reported++
		p.mu.Unlock()
	}
	if p.reports != nil {
		p.reports(r)
	}
}

// Reported is how many renewals of its library's own the adapter has
// reported answered.
func (p *Process) Reported() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reported
}

// maxComplaints is how many complaints of one adapter are kept and logged:
// one that answers requests never sent, as fast as it can, would fill the
// log and the memory.
const maxComplaints = 20

// remember notes that request id was answered, forgetting those long
// past: a second answer comes right after the first.
func (p *Process) remember(id int64, kind string) {
	p.done[id] = kind
	if len(p.done) > 1024 {
		for old := range p.done {
			if old < id-512 {
				delete(p.done, old)
			}
		}
	}
}

// Complaints are what the adapter did wrong that hiatus could live with:
// answers twice to one request, answers to none it waits for. Only the
// first few are kept: Complained counts them all.
func (p *Process) Complaints() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.complaints...)
}

// Complained is how many complaints there were, kept or not.
func (p *Process) Complained() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.complained
}

// Close ends the adapter: its standard input closes, which tells it to
// exit; one still running 2 s later, or stopped, is killed. Then, unless
// its Setup named a set of adapters to reap together, what it left
// running is killed (Reap), and said in the log: Left lists them.
func (p *Process) Close() {
	p.end()
	if !p.reaps {
		return
	}
	p.reapOnce.Do(func() {
		left, err := Reap(p.mark)
		p.mu.Lock()
		p.left = left
		p.mu.Unlock()
		if len(left) > 0 {
			p.log.say("hiatus: adapter %q left %s running after it exited: killed. "+
				"An adapter's processes must end with it (no setsid, no daemon)", p.Command, Leftovers(left))
		}
		if err != nil {
			p.log.say("hiatus: adapter %q: %v", p.Command, err)
		}
	})
}

// end ends the adapter process itself.
func (p *Process) end() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped adapter could not read its EOF
	_ = p.stdin.Close()
	select {
	case <-p.exited:
		return
	case <-time.After(2 * time.Second):
	}
	p.log.say("hiatus: adapter %q did not exit within 2 s of its input closing; killed", p.Command)
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(time.Second):
		// A child of the adapter holds its output open: stop reading it.
		_ = p.stdout.Close()
		<-p.exited
	}
}

// Left lists the processes the adapter left running, which Close killed.
func (p *Process) Left() []Leftover {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Leftover(nil), p.left...)
}

// traced writes a line of the exchange to the trace, if there is one,
// escaped for the terminal it is shown on: JSON takes a bidi override or
// a C1 control as it is, and a line that is no JSON anything.
func (p *Process) traced(dir string, line []byte) {
	if p.trace != nil {
		p.traceMu.Lock()
		fmt.Fprintf(p.trace, "%s %s\n", dir, printable.Escape(string(line)))
		p.traceMu.Unlock()
	}
}

// exitWords says how a process ended.
func exitWords(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by " + ws.Signal().String()
		}
		return fmt.Sprintf("status %d", ee.ExitCode())
	}
	if err != nil {
		return err.Error()
	}
	return "status 0"
}

// clip shortens a line for a message.
func clip(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}
