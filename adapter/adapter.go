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
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
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
	Lock     string
	Lease    time.Duration
	Retry    time.Duration // the wait between attempts, for adapters that poll
	Hello    time.Duration // the wait for the hello; 0 for HelloTimeout
	// Trace, if set, takes every line sent and received, marked -> and
	// <-: a transcript of the exchange. It is not sent.
	Trace io.Writer
}

// Hello is what an adapter says of itself in answer to init.
type Hello struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Library string `json:"library,omitempty"` // the lock library and its version
	Fencing bool   `json:"fencing,omitempty"` // its grants carry a fencing token
	Renewal bool   `json:"renewal,omitempty"` // it takes renew requests
}

// String says what the adapter said of itself, in one line.
func (h Hello) String() string {
	yes := map[bool]string{true: "yes", false: "no"}
	return fmt.Sprintf("%s %s (%s), fencing %s, renewal %s", h.Name, h.Version, h.Library, yes[h.Fencing], yes[h.Renewal])
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
	Protocol int    `json:"protocol,omitempty"`
	RedisURL string `json:"redis_url,omitempty"`
	RetryMS  int64  `json:"retry_ms,omitempty"`
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
}

// String is the answer as the adapter wrote it (not its Hello's words).
func (a Answer) String() string {
	b, _ := json.Marshal(a)
	return string(b)
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
	log        io.Writer  // complaints: late, doubled or stray answers
	wmu        sync.Mutex // serializes writes to stdin
	trace      io.Writer  // the transcript, if asked for (Setup.Trace)
	traceMu    sync.Mutex
	mu         sync.Mutex
	next       int64
	wait       map[int64]pending
	done       map[int64]string  // requests answered lately, by type: a second answer is a complaint
	late       map[int64]pending // requests given up on, until their answer comes
	broken     error             // why the adapter is gone; nil while it runs
	complaints []string          // what it did wrong that hiatus could live with
	gone       chan struct{}     // closed when broken is set
	exited     chan struct{}     // closed when the process has been waited for
}

type pending struct {
	kind, lock string
	ch         chan Answer
}

// Start starts the adapter command (run by /bin/sh, as a shell would),
// sends it init and waits up to s.Hello (HelloTimeout if 0) for its hello. Its standard
// error goes to stderr; so do complaints about its answers. It is killed
// if this process dies.
func Start(ctx context.Context, command string, s Setup, stderr io.Writer) (*Process, error) {
	// "exec" makes the shell become the adapter, so that signals and
	// exits are the adapter's own.
	cmd := exec.Command("/bin/sh", "-c", "exec "+command)
	cmd.Stderr = stderr
	// A child of the adapter's own may hold its stderr open long after it
	// exited: Wait gives up on the pipe a second after the exit.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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
	p := &Process{Command: command, cmd: cmd, stdin: stdin, stdout: stdout, log: stderr, trace: s.Trace, wait: map[int64]pending{},
		done: map[int64]string{}, late: map[int64]pending{}, gone: make(chan struct{}), exited: make(chan struct{})}
	go p.read(stdout)
	a, err := p.Request(ctx, Request{Type: "init", Protocol: Protocol, RedisURL: s.RedisURL, Lock: s.Lock,
		LeaseMS: s.Lease.Milliseconds(), RetryMS: s.Retry.Milliseconds()}, cmp.Or(s.Hello, HelloTimeout))
	switch {
	case err != nil:
		p.Close()
		return nil, fmt.Errorf("adapter %q did not say hello: %w", command, errors.Unwrap(err))
	case a.Type != TypeHello:
		p.Close()
		return nil, fmt.Errorf("adapter %q answered init with %q, not hello: %s", command, a.Type, a.Reason)
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
// adapter is gone. An answer of any type is returned as it is.
func (p *Process) Request(ctx context.Context, r Request, timeout time.Duration) (Answer, error) {
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
		var a Answer
		if err := json.Unmarshal(line, &a); err != nil || a.InReplyTo == nil || a.Type == "" {
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
		complaint = fmt.Sprintf("answered %s request %d (%s) after hiatus had given up on it; dropped", late.kind, id, a.Type)
	case answered:
		complaint = fmt.Sprintf("answered %s request %d twice; the first answer counts, this one (%s) is dropped", kind, id, a.Type)
	default:
		complaint = fmt.Sprintf("answered request %d (%s), which hiatus never sent; dropped", id, a.Type)
	}
	p.mu.Lock()
	p.complaints = append(p.complaints, complaint)
	p.mu.Unlock()
	fmt.Fprintf(p.log, "hiatus: adapter %q %s\n", p.Command, complaint)
}

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
// answers twice to one request, answers to none it waits for.
func (p *Process) Complaints() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.complaints...)
}

// Close ends the adapter: its standard input closes, which tells it to
// exit; one still running 2 s later, or stopped, is killed.
func (p *Process) Close() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped adapter could not read its EOF
	_ = p.stdin.Close()
	select {
	case <-p.exited:
		return
	case <-time.After(2 * time.Second):
	}
	fmt.Fprintf(p.log, "hiatus: adapter %q did not exit within 2 s of its input closing; killed\n", p.Command)
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(time.Second):
		// A child of the adapter holds its output open: stop reading it.
		_ = p.stdout.Close()
		<-p.exited
	}
}

// traced writes a line of the exchange to the trace, if there is one.
func (p *Process) traced(dir string, line []byte) {
	if p.trace != nil {
		p.traceMu.Lock()
		fmt.Fprintf(p.trace, "%s %s\n", dir, line)
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
