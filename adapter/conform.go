package adapter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hiatus-dev/hiatus/internal/printable"
)

// ErrNonconforming is returned by Conform when an adapter failed a check.
var ErrNonconforming = errors.New("the adapter does not conform to the protocol")

// CheckClientName is the client_name Conform tells the adapters it checks.
const CheckClientName = "hiatus-adapter-check"

// Conform runs the conformance check of the adapter command against the
// Redis at redisURL, on a lock of its own: hello; acquire; contention
// between two adapter processes; release; the release of a lock whose
// lease expired; fencing and renewal when the adapter says it has them; a
// request it cannot understand; exit when its input closes, and nothing of
// either process left running (what is, is killed). It says on out,
// in plain words, what each check found, and what to fix.
//
// With trace, every line of the first process's exchange is written to out
// too, as it happens.
func Conform(ctx context.Context, command, redisURL string, out io.Writer, trace bool) error {
	return ConformAt(ctx, command, Setup{RedisURL: redisURL}, out, trace)
}

// ConformAt is Conform with the servers at: the Redis at.RedisURL (and
// at.RedisURLs, for a lock on several nodes), and the ZooKeeper ensemble
// at.ZooKeeper, the etcd server at.Etcd or the sentinels at.Sentinel for
// an adapter that keeps its lock there (every server field of at is told).
// Its other fields (the lock, its lease, the trace) are the check's own.
func ConformAt(ctx context.Context, command string, at Setup, out io.Writer, trace bool) error {
	c := &conformance{ctx: ctx, out: out, command: command,
		lock: fmt.Sprintf("hiatus:adapter-check:%d:%d", os.Getpid(), time.Now().UnixNano())}
	s := at // the servers; what follows is the check's own
	s.Lock, s.Lease, s.Retry, s.ClientName = c.lock, 2*time.Second, 5*time.Millisecond, CheckClientName
	s.Hello, s.Trace, s.Reports, s.Mark = 0, nil, nil, ""
	if trace {
		s.Trace = out
	}
	a, err := c.start("hello", s)
	s.Trace = nil
	if err != nil {
		return ErrNonconforming
	}
	defer a.Close()
	h := a.Hello
	if len(s.Sentinel.Addrs) > 0 && !h.Sentinel {
		c.fail("hello", h.String()+": told sentinels, it did not say sentinel: true, so its lock would be kept elsewhere (its library's default Redis)")
		return ErrNonconforming
	}
	c.pass("hello", h.String())
	b, err := c.start("a second process", s)
	if err != nil {
		return ErrNonconforming
	}
	defer b.Close()
	c.contention(a, b)
	c.expiry(a, b)
	if h.Fencing {
		c.fencing(a)
	}
	if h.Renewal {
		c.renewal(a, b)
		c.lapsedRenewal(a, b)
	}
	c.malformed(a)
	if n := a.Reported() + b.Reported(); n > 0 {
		c.pass("renewal reports", fmt.Sprintf("%d renewals its library made on its own reported, each begun (renewing) and answered (renewed)", n))
	}
	for _, p := range []*Process{a, b} {
		if cs := p.Complaints(); len(cs) > 0 {
			c.fail("answers", fmt.Sprintf("it %s (and %d more such)", cs[0], p.Complained()-1))
		}
	}
	c.exit(a, b)
	if c.failed > 0 {
		fmt.Fprintf(out, "\n%d of %d checks failed\n", c.failed, c.checks)
		return ErrNonconforming
	}
	if c.warned > 0 {
		fmt.Fprintf(out, "\n%d checks passed, %d warned: read the warn lines, what they say is what the lock lets an application believe\n", c.checks, c.warned)
		return nil
	}
	fmt.Fprintf(out, "\nall %d checks passed\n", c.checks)
	return nil
}

type conformance struct {
	ctx            context.Context
	out            io.Writer
	command, lock  string
	checks, failed int
	warned         int // checks that passed the protocol with a warn about the lock
}

// pass, fail and warn say what a check found, on a line (and those of
// what it quotes of the adapter's stderr, indented). What the adapter
// said is escaped where it is quoted, so that it can make no line of its
// own; these escape the rest too, as a last guard for the terminal.
func (c *conformance) pass(check, what string) {
	c.checks++
	fmt.Fprintf(c.out, "ok    %-22s %s\n", check, printable.Lines(what))
}

func (c *conformance) fail(check, what string) {
	c.checks++
	c.failed++
	fmt.Fprintf(c.out, "FAIL  %-22s %s\n", check, printable.Lines(what))
}

func (c *conformance) warn(check, what string) {
	c.warned++
	fmt.Fprintf(c.out, "warn  %-22s %s\n", check, printable.Lines(what))
}

// start starts an adapter process, keeping what it writes on stderr to
// show when it fails.
func (c *conformance) start(check string, s Setup) (*Process, error) {
	var stderr Tail
	p, err := Start(c.ctx, c.command, s, &stderr)
	if err != nil {
		why := err.Error()
		if t := stderr.String(); t != "" {
			why += "; it wrote on stderr:\n" + Quoted(t)
		}
		c.fail(check, why)
	}
	return p, err
}

// ask sends a request and says what went wrong, if anything did.
func (c *conformance) ask(p *Process, check string, r Request) (Answer, bool) {
	a, err := p.Request(c.ctx, r, 5*time.Second)
	if err != nil {
		c.fail(check, err.Error())
		if errors.Is(err, ErrProtocol) && a.Token != "" {
			// A grant all the same: given back, so that the checks
			// after it find the lock free.
			_, _ = p.Request(c.ctx, Request{Type: "release", Lock: c.lock, Token: a.Token}, 5*time.Second)
		}
		return a, false
	}
	return a, true
}

func (c *conformance) acquire(p *Process, check string, lease, wait time.Duration) (Answer, bool) {
	return c.ask(p, check, Request{Type: "acquire", Lock: c.lock, LeaseMS: lease.Milliseconds(), WaitMS: wait.Milliseconds()})
}

func (c *conformance) release(p *Process, check, token string) (Answer, bool) {
	return c.ask(p, check, Request{Type: "release", Lock: c.lock, Token: token})
}

// contention: one holder at a time, and the lock free again once released.
// The holder's lease is long enough that no loaded machine lets it lapse
// before the second process asks: with 2 s, node-redlock's second process
// was granted the lock in a suite's run, and the holder's release then
// said not-held.
func (c *conformance) contention(a, b *Process) {
	g, ok := c.acquire(a, "acquire", 10*time.Second, time.Second)
	switch {
	case !ok:
		return
	case g.Type != TypeOK || g.Token == "":
		c.fail("acquire", fmt.Sprintf("a free lock was not granted with a token: answered %s (want ok with a token)", g.said()))
		return
	}
	c.pass("acquire", "a free lock granted, token "+printable.Escape(g.Token))
	if x, ok := c.acquire(b, "contention", 2*time.Second, 300*time.Millisecond); ok {
		switch {
		case x.Type == TypeOK:
			c.fail("contention", "a second process was granted the lock while the first held it: it is no lock (check the lock's name comes from the request)")
		case x.Type == TypeFail && x.Reason == ReasonBusy:
			c.pass("contention", "a second process was refused (busy) for the 300 ms it was asked to wait")
		default:
			c.fail("contention", fmt.Sprintf("a second process got %s: want fail with reason %q", x.said(), ReasonBusy))
		}
	}
	if r, ok := c.release(a, "release", g.Token); ok {
		if r.Type == TypeOK {
			c.pass("release", "released")
		} else {
			c.fail("release", fmt.Sprintf("the holder's release answered %s: want ok", r.said()))
		}
	}
	if x, ok := c.acquire(b, "free again", 2*time.Second, time.Second); ok {
		if x.Type == TypeOK {
			c.pass("free again", "the second process got the lock once it was released")
			c.release(b, "free again", x.Token)
		} else {
			c.fail("free again", fmt.Sprintf("after a release the second process got %s: want ok", x.said()))
		}
	}
}

// lapse has a take the lock for lease, waits two leases, and has b ask
// for it, waiting up to a lease: g is a's grant, x b's answer; false when
// either could not be asked (said already), a was not granted the lock,
// or b's refusal left a grant behind (said here). b's wait is a lease,
// not a moment: an adapter that gives up on its first SET when the
// machine is slow would answer busy for a lock that lapsed, and the check
// would say a kept it. A refusal is asked again, for two leases: a that
// keeps its lease alive refuses it again; a grant b's refusal left behind
// (a SET that landed after its library gave up) lapses, and b gets the
// lock while a has not released it.
func (c *conformance) lapse(a, b *Process, check string, lease time.Duration) (g, x Answer, ok bool) {
	g, ok = c.acquire(a, check, lease, time.Second)
	if !ok || g.Type != TypeOK {
		c.fail(check, fmt.Sprintf("could not acquire: %s", g.said()))
		return g, x, false
	}
	time.Sleep(2 * lease)
	x, ok = c.acquire(b, check, lease, lease)
	if !ok || x.Type == TypeOK {
		return g, x, ok
	}
	y, ok := c.acquire(b, check, lease, 2*lease)
	if ok && y.Type == TypeOK {
		c.fail(check, fmt.Sprintf("asked %v after the holder's %v grant, the second process answered %s, yet asked again it was granted "+
			"the lock within %v, the holder not having released it: its refusal left a grant behind that nobody holds "+
			"(a SET that landed after its library gave up), and the lock was taken for nobody", 2*lease, lease, x.said(), 2*lease))
		c.release(b, check, y.Token)
		c.release(a, check, g.Token)
		return g, x, false
	}
	return g, x, ok
}

// expiry: a release after the lease lapsed says so, as not-held or
// stolen. An adapter that keeps its lease alive itself (a library's own
// watchdog) still holds the lock then, and its release is rightly ok.
func (c *conformance) expiry(a, b *Process) {
	const lease = 200 * time.Millisecond
	const check = "expired release"
	g, x, ok := c.lapse(a, b, check, lease)
	if !ok {
		return
	}
	lapsed := x.Type == TypeOK
	r, ok := c.release(a, check, g.Token)
	switch {
	case !ok:
	case !lapsed && r.Type == TypeOK:
		c.pass(check, fmt.Sprintf("it kept its %v lease alive itself (%v later another process was refused for %v, and again for %v), and released it", lease, 2*lease, lease, 2*lease))
	case !lapsed:
		c.fail(check, fmt.Sprintf("it kept the lock %v past its %v lease, yet its release answered %s", 2*lease, lease, r.said()))
	case r.Type == TypeFail && r.Reason == ReasonStolen:
		c.pass(check, fmt.Sprintf("its %v lease lapsed, another process took the lock, and its release said fail %q", lease, r.Reason))
	case r.Type == TypeFail && r.Reason == ReasonNotHeld:
		c.pass(check, fmt.Sprintf("its %v lease lapsed and its release said fail %q (%q would say another holder has it, if its library can tell)", lease, r.Reason, ReasonStolen))
	case r.Type == TypeOK:
		c.warn(check, fmt.Sprintf("its %v lease lapsed and another process took the lock, yet its release answered ok: the history will not show the lapse "+
			"(answer fail %q or %q if the lock library tells; if it cannot, this is what it lets an application believe)",
			lease, ReasonStolen, ReasonNotHeld))
	default:
		c.fail(check, fmt.Sprintf("its %v lease lapsed, and its release answered %s: want fail %q or %q", lease, r.said(), ReasonStolen, ReasonNotHeld))
	}
	if lapsed {
		c.release(b, check, x.Token)
	}
}

// fencing: successive grants carry rising fencing tokens.
func (c *conformance) fencing(a *Process) {
	var fences []int64
	for range 2 {
		g, ok := c.acquire(a, "fencing", time.Second, time.Second)
		if !ok || g.Type != TypeOK {
			return
		}
		fences = append(fences, g.Fence)
		c.release(a, "fencing", g.Token)
	}
	if fences[0] > 0 && fences[1] > fences[0] {
		c.pass("fencing", fmt.Sprintf("fences %d then %d", fences[0], fences[1]))
	} else {
		c.fail("fencing", fmt.Sprintf("its hello says fencing, yet two grants carried fences %d then %d: want positive and rising", fences[0], fences[1]))
	}
}

// renewal: renewed every lease/3, a grant outlives its lease.
func (c *conformance) renewal(a, b *Process) {
	const lease = 300 * time.Millisecond
	g, ok := c.acquire(a, "renewal", lease, time.Second)
	if !ok || g.Type != TypeOK {
		return
	}
	for range 6 {
		time.Sleep(lease / 3)
		r, ok := c.ask(a, "renewal", Request{Type: "renew", Lock: c.lock, Token: g.Token, LeaseMS: lease.Milliseconds()})
		if !ok {
			return
		}
		if r.Type != TypeOK {
			c.fail("renewal", fmt.Sprintf("a renewal of a held lock answered %s: want ok", r.said()))
			return
		}
	}
	if x, ok := c.acquire(b, "renewal", lease, time.Millisecond); ok && x.Type == TypeOK {
		c.fail("renewal", fmt.Sprintf("renewed every %v, the lock was granted to another process after %v: renew does not extend the lease", lease/3, 2*lease))
		c.release(b, "renewal", x.Token)
	} else if ok {
		c.pass("renewal", fmt.Sprintf("renewed every %v, still held after twice its %v lease", lease/3, lease))
	}
	c.release(a, "renewal", g.Token)
}

// lapsedRenewal: a renewal after the lease lapsed and another process
// took the lock is refused. One answered ok tells a holder that extends
// before it writes (--extend-before-write) that it may write over the
// other's update: what the protocol allows, and what the lock lets an
// application believe (redsync v4.0.3's Extend, docs/findings.md).
func (c *conformance) lapsedRenewal(a, b *Process) {
	const lease = 200 * time.Millisecond
	const check = "lapsed renewal"
	g, x, ok := c.lapse(a, b, check, lease)
	if !ok {
		return
	}
	if x.Type != TypeOK {
		c.pass(check, fmt.Sprintf("it kept its %v lease alive itself (another process was refused %v later, and again for %v): nothing to renew late", lease, 2*lease, 2*lease))
		c.release(a, check, g.Token)
		return
	}
	r, ok := c.ask(a, check, Request{Type: "renew", Lock: c.lock, Token: g.Token, LeaseMS: lease.Milliseconds()})
	switch {
	case !ok:
	case r.Type == TypeOK:
		c.warn(check, fmt.Sprintf("its %v lease lapsed and another process took the lock, yet its renew answered ok: "+
			"a holder that extends before it writes would write over the other's update", lease))
	case r.Type == TypeFail:
		c.pass(check, fmt.Sprintf("its %v lease lapsed, another process took the lock, and its renew said fail %q", lease, r.Reason))
	default:
		c.fail(check, fmt.Sprintf("its %v lease lapsed, and its renew answered %s: want fail", lease, r.said()))
	}
	c.release(a, check, g.Token)
	c.release(b, check, x.Token)
}

// malformed: a request it cannot understand gets an error answer, and the
// adapter goes on.
func (c *conformance) malformed(a *Process) {
	r, ok := c.ask(a, "malformed request", Request{Type: "frobnicate", Lock: c.lock})
	if !ok {
		return
	}
	if r.Type != TypeError {
		c.fail("malformed request", fmt.Sprintf("a request of type \"frobnicate\" was answered %s: want error", r.said()))
		return
	}
	if g, ok := c.acquire(a, "malformed request", time.Second, time.Second); ok && g.Type == TypeOK {
		c.release(a, "malformed request", g.Token)
		c.pass("malformed request", fmt.Sprintf("answered error (%s), then went on", printable.Escape(r.Reason)))
	} else if ok {
		c.fail("malformed request", fmt.Sprintf("after an error answer, an acquire of the free lock got %s", g.said()))
	}
}

// exit: it ends once its input closes, and leaves no process of its own
// running: both processes are closed, and what they left is killed.
func (c *conformance) exit(a, b *Process) {
	t0 := time.Now()
	_ = b.stdin.Close()
	var exited string
	select {
	case <-b.exited:
		exited = fmt.Sprintf("exited %v after its input closed", time.Since(t0).Round(time.Millisecond))
	case <-time.After(2 * time.Second):
	}
	a.Close()
	b.Close()
	left := append(a.Left(), b.Left()...)
	switch {
	case exited == "":
		c.fail("exit", "still running 2 s after its input closed: an adapter must exit at the end of its input (hiatus kills it then)")
	case len(left) > 0:
		c.fail("exit", fmt.Sprintf("%s, but the two adapter processes left %s running, killed now. An adapter's processes must end with it "+
			"(no setsid, no daemon): a pause of its worker would not freeze them, and nothing would end them", exited, Leftovers(left)))
	default:
		c.pass("exit", exited)
	}
}

// A Tail keeps the last StderrTail bytes written to it: what an adapter
// said on its standard error before it failed, to show with the failure.
type Tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := b[max(len(b)-StderrTail, 0):]
	if over := len(t.buf) + len(keep) - StderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...) // in place: it never grows past StderrTail
	}
	t.buf = append(t.buf, keep...)
	return len(b), nil
}

func (t *Tail) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf)
}

func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
