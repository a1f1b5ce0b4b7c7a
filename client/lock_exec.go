package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/history"
)

// ExecPrefix marks a lock name that is an adapter's command:
// "exec:python3 adapters/python/redis_py_lock.py".
const ExecPrefix = "exec:"

// ErrLockGone is returned by a lock that can no longer be used at all: an
// adapter that exited or broke the protocol. The worker stops.
var ErrLockGone = errors.New("lock: gone")

// A Refused is a request the lock certainly did not carry out: the
// adapter said fail, or was gone before it was asked.
type Refused struct{ Reason string }

func (r *Refused) Error() string { return r.Reason }

// An Exec is a lock of any language: an adapter process that speaks the
// lock adapter protocol (package adapter, docs/adapter-protocol.md). The
// worker starts it as its child, in its process group, so that a pause of
// the worker freezes the adapter with it, as a GC pause freezes a whole
// application. Fenced, it takes the adapter's fencing token when its hello
// says it has one, and an INCR of FenceKey otherwise, as the other locks.
// With an adapter that renews, a watchdog renews each grant every lease/3
// while it is held.
type Exec struct {
	p         *adapter.Process
	key       string
	lease     time.Duration
	retry     time.Duration
	opTimeout time.Duration
	fence     fencer
	watch     sync.WaitGroup
	stop      chan struct{} // closes to end the watchdog of the grant held
	// renewing keeps the watchdog's renewals and Extend's apart: the
	// adapter is asked one thing at a time.
	renewing sync.Mutex
	// grants are the grants held, by token, with their Acquire's context,
	// for the renewals the adapter reports of its library's own; reports
	// takes those reports to the goroutine that records them.
	grantsMu sync.Mutex
	grants   map[string]heldGrant
	reports  chan adapter.Report
}

// A heldGrant is a grant an adapter gave and the context of the Acquire
// that took it: its holder, whose renewer records its renewals.
type heldGrant struct {
	ctx context.Context
	g   Grant
}

// execWait is how long an acquire asks the adapter to keep trying before
// it answers busy: short enough that a run's end is noticed soon after.
const execWait = 500 * time.Millisecond

// execKind is the lock of an adapter's command: kept on one Redis, as the
// adapter is told (LockConfig.RedisURL). Its start is bounded by the
// hello's own timeout, not by the run's end.
func execKind(name, command string) LockKind {
	return LockKind{Name: name, About: "a lock adapter's command", Store: OnRedis, Extends: true,
		New: func(ctx context.Context, cfg LockConfig) (Lock, error) {
			return NewExec(context.WithoutCancel(ctx), command, cfg, os.Stderr)
		}}
}

// NewExec starts the adapter command and waits for its hello. Its
// standard error, and complaints about its answers, go to stderr.
func NewExec(ctx context.Context, command string, cfg LockConfig, stderr io.Writer) (*Exec, error) {
	reports := make(chan adapter.Report, 1024)
	report := func(r adapter.Report) {
		select {
		case reports <- r:
		default: // hundreds behind: the recorder is stuck, not the adapter's fault
		}
	}
	p, err := adapter.Start(ctx, command, adapter.Setup{RedisURL: cfg.RedisURL, RedisURLs: cfg.NodeURLs, PostgresURL: cfg.PostgresURL, ZooKeeper: cfg.zooKeeper(), Etcd: cfg.etcd(), Sentinel: cfg.Sentinel, Lock: cfg.Key, Lease: cfg.Lease,
		Retry: cfg.Retry, Hello: cfg.Hello, Mark: cfg.AdapterMark, Reports: report, ClientName: cfg.ClientName}, stderr)
	if err != nil {
		return nil, err
	}
	if pg, err := syscall.Getpgid(p.PID()); err == nil && pg != syscall.Getpgrp() {
		fmt.Fprintf(stderr, "hiatus: adapter %q left its worker's process group (setsid?): a pause of the worker will not freeze it\n", command)
	}
	l := &Exec{p: p, key: cfg.Key, lease: cfg.Lease, retry: retryOr(cfg.Retry), opTimeout: cfg.OpTimeout,
		fence:  fencer{Redis: cfg.Redis, Key: cfg.FenceKey, On: cfg.Fenced && !p.Hello.Fencing},
		grants: map[string]heldGrant{}, reports: reports}
	go l.recordReports()
	return l, nil
}

// recordReports records each renewal the adapter reports of its library's
// own as a :renew op of the renewer of the grant's holder (by
// history.ByAdapter), stamped when its lines are read: the adapter writes
// renewing before it sends the renewal, so the invocation's time may
// follow the sending by the pipe's latency and a TIME's. A renewal of a
// grant not held (given up, released) is not recorded. It ends when the
// adapter's output does, with the renewals then open never completed.
func (l *Exec) recordReports() {
	open := map[int64]renewing{}
	for {
		select {
		case r := <-l.reports:
			l.recordReport(open, r)
		case <-l.p.Gone():
			// Every report was queued before the adapter was gone:
			// take those select left behind.
			for {
				select {
				case r := <-l.reports:
					l.recordReport(open, r)
				default:
					return
				}
			}
		}
	}
}

// recordReport records one report's line: a renewal begun or answered.
func (l *Exec) recordReport(open map[int64]renewing, r adapter.Report) {
	if r.Type == adapter.TypeRenewed {
		if rn, ok := open[r.Renewal]; ok {
			delete(open, r.Renewal)
			var err error // ok
			if r.Result != adapter.TypeOK {
				err = l.answered(adapter.Answer{Type: r.Result, Reason: r.Reason})
			}
			rn.end(context.Background(), err)
		}
		return
	}
	l.grantsMu.Lock()
	held, ok := l.grants[r.Token]
	l.grantsMu.Unlock()
	if !ok {
		return // a grant not held: given up, or released
	}
	if h, isHolder := holderOf(held.ctx); isHolder {
		open[r.Renewal] = h.begin(held.ctx, history.ByAdapter, held.g)
	}
}

// PID is the adapter's process ID.
func (l *Exec) PID() int { return l.p.PID() }

// Complaints are what the adapter did wrong that hiatus could live with
// (an answer twice to one request, one to a request never sent), in the
// order it did them: adapter.Process.Complaints.
func (l *Exec) Complaints() []string { return l.p.Complaints() }

// Freeze implements Freezer: it stops the adapter (SIGSTOP), as a worker
// about to stop itself whole does (the application is both; whoever
// resumes the worker's process group resumes the adapter too), and thaw
// resumes it (SIGCONT). An adapter already gone is left alone.
func (l *Exec) Freeze() (thaw func()) {
	_ = l.p.Signal(syscall.SIGSTOP)
	return func() { _ = l.p.Signal(syscall.SIGCONT) }
}

// Close ends the adapter.
func (l *Exec) Close() error {
	l.stopWatch()
	l.p.Close()
	return nil
}

// Acquire implements Lock: it asks until the adapter grants the lock or
// ctx ends. A request under way is not cut short when ctx ends.
func (l *Exec) Acquire(ctx context.Context) (Grant, error) {
	for {
		if ctx.Err() != nil {
			return Grant{}, ErrGaveUp
		}
		patience := execWait
		if d, ok := ctx.Deadline(); ok {
			patience = max(min(patience, time.Until(d)), time.Millisecond) // the adapter gives up when the caller would
		}
		req := adapter.Request{Type: "acquire", Lock: l.key, LeaseMS: l.lease.Milliseconds(), WaitMS: patience.Milliseconds()}
		asked := time.Now()
		a, err := l.p.Request(context.WithoutCancel(ctx), req, patience+l.timeout())
		if errors.Is(err, adapter.ErrProtocol) && a.Token != "" {
			// A grant out of the protocol (a fence of 0, a lease of
			// -1000 ms) is no grant: recorded as the adapter's fault,
			// of unknown outcome, and given back, as no one else would.
			_, _ = l.p.Request(context.WithoutCancel(ctx), adapter.Request{Type: "release", Lock: l.key, Token: a.Token}, l.timeout())
		}
		if err != nil {
			return Grant{}, l.failed(err)
		}
		switch {
		case a.Type == adapter.TypeFail && a.Reason == adapter.ReasonBusy:
			if time.Since(asked) < patience/2 {
				wait(ctx, l.retry) // it did not wait as asked: do not spin
			}
			continue
		case a.Type != adapter.TypeOK:
			return Grant{}, l.answered(a)
		}
		g := Grant{Token: a.Token, Lease: l.lease}
		if a.LeaseMS > 0 {
			g.Lease = time.Duration(a.LeaseMS) * time.Millisecond
		}
		if l.p.Hello.Fencing {
			g.Fence = a.Fence
		} else if g.Fence, err = l.fence.fence(ctx); err != nil {
			_ = l.Release(ctx, g) // best effort: no one else would give it back
			return Grant{}, err
		}
		if l.p.Hello.Renewal {
			l.startWatch(ctx, g)
		}
		l.grantsMu.Lock()
		l.grants[g.Token] = heldGrant{ctx: context.WithoutCancel(ctx), g: g}
		l.grantsMu.Unlock()
		return g, nil
	}
}

// Release implements Lock.
func (l *Exec) Release(ctx context.Context, g Grant) error {
	l.stopWatch()
	l.grantsMu.Lock()
	delete(l.grants, g.Token)
	l.grantsMu.Unlock()
	// Its own time, not what stopWatch left of ctx's: a renewal in
	// flight may have taken it, and the release would go out expired.
	a, err := l.p.Request(context.WithoutCancel(ctx), adapter.Request{Type: "release", Lock: l.key, Token: g.Token}, l.timeout())
	if err != nil {
		return l.failed(err)
	}
	if a.Type == adapter.TypeOK {
		return nil
	}
	return l.answered(a)
}

// Extend implements Extender with a renew request; an adapter whose hello
// said renewal: false takes none.
func (l *Exec) Extend(ctx context.Context, g Grant) error {
	if !l.p.Hello.Renewal {
		return &Refused{Reason: fmt.Sprintf("adapter %q takes no renew requests (its hello said renewal: false)", l.p.Command)}
	}
	return l.renewGrant(ctx, g)
}

// renewGrant asks the adapter to renew g: nil when it did; any fail not
// renewed, with its reason as given.
func (l *Exec) renewGrant(ctx context.Context, g Grant) error {
	a, err := l.renew(ctx, g)
	switch {
	case err != nil:
		return l.failed(err)
	case a.Type == adapter.TypeOK:
		return nil
	}
	return l.answered(a)
}

// startWatch renews g every lease/3 until stopWatch, or until a renewal
// fails: the lock is lost, and its release will say so. Each renewal is
// recorded as ctx, the Acquire's, says (RecordRenewal).
func (l *Exec) startWatch(ctx context.Context, g Grant) {
	ctx = context.WithoutCancel(ctx) // the grant outlives the run's end: its section is finished
	l.stop = make(chan struct{})
	l.watch.Add(1)
	go func(stop <-chan struct{}) {
		defer l.watch.Done()
		t := time.NewTicker(max(g.Lease/3, time.Millisecond))
		defer t.Stop()
		renew := func(ctx context.Context) error { return l.renewGrant(ctx, g) }
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if RecordRenewal(ctx, history.ByWatchdog, g, renew) != nil {
				return
			}
		}
	}(l.stop)
}

// renew asks the adapter to renew g, and waits for its answer.
func (l *Exec) renew(ctx context.Context, g Grant) (adapter.Answer, error) {
	l.renewing.Lock()
	defer l.renewing.Unlock()
	req := adapter.Request{Type: "renew", Lock: l.key, Token: g.Token, LeaseMS: g.Lease.Milliseconds()}
	return l.p.Request(context.WithoutCancel(ctx), req, l.timeout())
}

func (l *Exec) stopWatch() {
	if l.stop != nil {
		close(l.stop)
		l.stop = nil
	}
	l.watch.Wait()
}

func (l *Exec) timeout() time.Duration {
	if l.opTimeout <= 0 {
		return DefaultOpTimeout
	}
	return l.opTimeout
}

// answered turns an answer other than ok into the error the history
// records: a release's lapse as ErrNotHeld or ErrStolen, a refusal as
// a Refused (:fail), an info answer as an unknown outcome (:info).
func (l *Exec) answered(a adapter.Answer) error {
	reason := a.Reason
	if reason == "" {
		reason = "(no reason given)"
	}
	switch {
	case a.Type == adapter.TypeFail && a.Reason == adapter.ReasonNotHeld:
		return ErrNotHeld
	case a.Type == adapter.TypeFail && a.Reason == adapter.ReasonStolen:
		return ErrStolen
	case a.Type == adapter.TypeFail:
		return &Refused{Reason: reason}
	case a.Type == adapter.TypeInfo:
		return fmt.Errorf("adapter: outcome unknown: %s", reason)
	case a.Type == adapter.TypeError:
		return &Refused{Reason: fmt.Sprintf("adapter %q did not understand the request: %s", l.p.Command, reason)}
	}
	// No answer the protocol knows: whether it acted is unknown (:info).
	return fmt.Errorf("adapter %q answered %q, which is no answer type (ok, fail, info, error): outcome unknown",
		l.p.Command, strings.TrimSpace(a.Type))
}

// failed is a request that got no answer: unknown outcome if it was sent,
// a refusal if not; and the lock is gone with its adapter.
func (l *Exec) failed(err error) error {
	var ae *adapter.Error
	if errors.As(err, &ae) && errors.Is(err, adapter.ErrGone) {
		if !ae.Sent {
			return fmt.Errorf("%w: %w", ErrLockGone, &Refused{Reason: err.Error()})
		}
		return fmt.Errorf("%w: %w", ErrLockGone, err)
	}
	return err
}

// LockLabel is a short name for the lock called name, for tables, plots and
// directory names: the name itself, or for an adapter "exec-" and the base
// name of its program or script, without extension ("exec:node
// adapters/node/redlock.js" is exec-redlock), or of its directory when the
// script is a package's entry point (main.js, index.js, __main__.py).
func LockLabel(name string) string {
	cmd, ok := strings.CutPrefix(name, ExecPrefix)
	if !ok {
		return name
	}
	prog := adapterProgram(strings.Fields(cmd))
	base := filepath.Base(prog)
	if ext := filepath.Ext(base); strings.ContainsFunc(ext, unicode.IsLetter) {
		base = strings.TrimSuffix(base, ext) // a script's .py or .js, not a version's .3
	}
	if dir := filepath.Base(filepath.Dir(prog)); dir != "." && (base == "main" || base == "index" || base == "__main__") {
		base = dir
	}
	base = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return '-'
	}, base)
	return "exec-" + base
}

// adapterProgram is the field of an adapter's command that names its
// program or script: the last with a file's extension (an interpreter's
// script, after the interpreter and its options), else the last path,
// else the last field that is neither a flag nor a variable's setting.
func adapterProgram(fields []string) string {
	var script, path, last string
	for _, f := range fields {
		switch {
		case strings.HasPrefix(f, "-") || strings.Contains(f, "="):
		case strings.ContainsFunc(filepath.Ext(f), unicode.IsLetter):
			script = f
		case strings.Contains(f, "/"):
			path = f
		default:
			last = f
		}
	}
	return cmp.Or(script, path, last)
}
