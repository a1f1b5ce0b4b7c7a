package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/printable"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/topology"
)

// workerSet is the worker processes of a run: one per slot at a time, and
// more over the run when the nemesis kills workers and replaces them.
type workerSet struct {
	cfg      runPlan
	start    time.Time
	deadline time.Time
	self     string
	col      *collector
	clock    client.Clock
	lg       *runLog
	topo     *topo
	metrics  string // the directory the workers write their guard metrics to
	// adapterMark marks the lock adapters of the workers on this machine
	// and whatever they start (adapter.Setup.Mark): kill ends what they
	// left. "" when the lock is no adapter.
	adapterMark string

	mu    sync.Mutex
	slots []*workerProc // the worker in each slot now
	all   []*workerProc // every worker started

	stops waiterStops // the stops of waiters under way (stop-waiters)
}

type workerProc struct {
	slot int
	proc proc
	cmd  *exec.Cmd     // the process, on this machine; nil on a node
	done chan struct{} // closed once it has exited and its output is read
	// ready is closed when the first workers are ready to begin sections
	// (or have exited), and go takes their deadline; nil for the later.
	ready     chan struct{}
	readyOnce sync.Once
	start     io.WriteCloser
}

// markReady closes p.ready, once.
func (p *workerProc) markReady() { p.readyOnce.Do(func() { close(p.ready) }) }

// startWorkers starts cfg.Workers processes of this same binary as workers
// (see ServeWorker), feeds their output to col and, once they are all
// ready or a bound has passed, gives them the run's deadline: cfg.TimeLimit
// from then. Counted from the spawn instead, a loaded machine's slow
// worker start would eat a short run, which would then show nothing.
func startWorkers(ctx context.Context, cfg runPlan, start time.Time, col *collector, clock client.Clock, t *topo, lg *runLog, metrics string) (*workerSet, error) {
	self, err := os.Executable()
	if err != nil {
		return &workerSet{}, fmt.Errorf("find own binary: %w", err)
	}
	ws := &workerSet{cfg: cfg, start: start, self: self,
		col: col, clock: clock, topo: t, lg: lg, metrics: metrics, slots: make([]*workerProc, cfg.Workers)}
	if cfg.byAdapter() {
		ws.adapterMark = adapter.NewMark()
	}
	col.resume, col.stopWaiters = ws.resume, ws.stopWaiters
	for i := range cfg.Workers {
		if err := ws.spawn(i, int64(i)); err != nil {
			return ws, err
		}
	}
	ws.waitReady(ctx)
	ws.deadline = time.Now().Add(cfg.TimeLimit)
	for _, p := range ws.all {
		// One that has exited is not listening; its error says nothing new.
		_ = json.NewEncoder(p.start).Encode(workerStart{DeadlineUnixNano: ws.deadline.UnixNano(), In: time.Until(ws.deadline)})
		p.start.Close()
	}
	return ws, nil
}

// readyBound is how long the first workers may take to get ready: to
// connect, start their lock (an adapter's hello is bounded by its own
// timeout) and say so. Past it the run begins without those not ready.
func (c Config) readyBound() time.Duration {
	return max(30*time.Second, 4*c.OpTimeout, c.AdapterHello+5*time.Second)
}

// waitReady waits until every worker is ready or has exited, ctx ends or
// the ready bound passes.
func (ws *workerSet) waitReady(ctx context.Context) {
	t := time.NewTimer(ws.cfg.readyBound())
	defer t.Stop()
	for _, p := range ws.all {
		select {
		case <-p.ready:
		case <-ctx.Done():
			return
		case <-t.C:
			ws.lg.printf("worker %d not ready after %v: the run begins without waiting for it", p.slot, ws.cfg.readyBound())
			return
		}
	}
}

// spawn starts a worker in slot recording as process. The first workers,
// before the deadline is set, wait for it once ready.
func (ws *workerSet) spawn(slot int, process int64) error {
	var deadline int64
	if !ws.deadline.IsZero() {
		deadline = ws.deadline.UnixNano()
	}
	wc := ws.workerConfig(slot, process, deadline)
	h, remote := ws.topo.host(slot).(*topology.SSHHost)
	if remote {
		// Its clock is not this machine's, and the run directory is not
		// on its machine.
		wc.Remote, wc.MetricsFile = true, ""
		wc.AdapterMark = "" // kill looks on this machine only: each adapter there kills what it left
		if deadline != 0 {
			wc.DeadlineIn, wc.DeadlineUnixNano = max(time.Until(ws.deadline), time.Nanosecond), 0
		}
	}
	in, err := json.Marshal(wc)
	if err != nil {
		return fmt.Errorf("worker config: %w", err)
	}
	if remote {
		return ws.spawnOn(h, slot, process, in, deadline == 0)
	}
	cmd := exec.Command(ws.self)
	if h, ok := ws.topo.host(slot).(*topology.NetnsHost); ok {
		cmd = h.Command(ws.self) // ip netns exec: the worker itself, in its namespace
	}
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	p := &workerProc{slot: slot, cmd: cmd, done: make(chan struct{})}
	var readyR *os.File
	if deadline == 0 {
		var readyW *os.File
		if readyR, readyW, err = p.awaitReady(); err != nil {
			return fmt.Errorf("worker %d: %w", slot, err)
		}
		defer readyW.Close() // once started: the worker has its own copy
	} else {
		cmd.Stdin = bytes.NewReader(in)
	}
	stderr := &lastLine{w: ws.lg.f}
	cmd.Stderr = stderr
	// Its lock adapter shares that stderr and dies with it; should one
	// outlive it all the same, the wait does not hang on the pipe.
	cmd.WaitDelay = 5 * time.Second
	// A worker dies with the run, even when the run is killed. It leads a
	// process group of its own, which its lock adapter (exec:) joins: a
	// pause, a resume and a kill reach the two together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("worker %d: %w", slot, err)
	}
	ws.col.current[slot].Store(process)
	ws.col.wg.Add(1)
	if err := cmd.Start(); err != nil {
		ws.col.wg.Done()
		if readyR != nil {
			readyR.Close()
		}
		return fmt.Errorf("start worker %d: %w", slot, err)
	}
	if readyR != nil {
		go func() {
			// A byte, or EOF when it exits first: either way, not waited for.
			_, _ = readyR.Read(make([]byte, 1))
			readyR.Close()
			p.markReady()
		}()
		if _, err := p.start.Write(in); err != nil {
			ws.lg.logf("worker %d: write its configuration: %v", slot, err)
		}
	}
	p.proc = localProc{cmd}
	ws.started(p, process, "", stdout, stderr)
	return nil
}

// started takes p, just started as process on the host called on ("" for
// this machine), in its slot, and reads its ops.
func (ws *workerSet) started(p *workerProc, process int64, on string, stdout io.Reader, stderr *lastLine) {
	ws.mu.Lock()
	ws.slots[p.slot] = p
	ws.all = append(ws.all, p)
	ws.mu.Unlock()
	if on != "" {
		on = " on " + on
	}
	ws.lg.logf("worker %d: started as process %d, pid %d%s", p.slot, process, p.proc.Pid(), on)
	go ws.watch(p, stdout, stderr)
}

// spawnOn starts the worker in slot, recording as process, on the node h,
// from the copy of this binary there; in is its configuration, and with
// await it says it is ready, then waits for its deadline.
func (ws *workerSet) spawnOn(h *topology.SSHHost, slot int, process int64, in []byte, await bool) error {
	p := &workerProc{slot: slot, done: make(chan struct{})}
	stderr := &lastLine{w: ws.lg.f}
	var errw io.Writer = stderr
	if await {
		p.ready = make(chan struct{})
		errw = &readyWatch{w: stderr, ready: p.markReady}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws.col.current[slot].Store(process)
	ws.col.wg.Add(1)
	rp, err := h.Start(ctx, []string{"env", workerEnv + "=1", workerBin(h)}, "", errw)
	if err != nil {
		ws.col.wg.Done()
		return fmt.Errorf("start worker %d: %w", slot, err)
	}
	p.proc = rp
	if _, err := rp.Stdin.Write(in); err != nil {
		ws.lg.logf("worker %d: write its configuration: %v", slot, err)
	}
	if await {
		p.start = rp.Stdin
	} else {
		rp.Stdin.Close()
	}
	ws.started(p, process, h.Name(), rp.Stdout, stderr)
	return nil
}

// A readyWatch passes what a remote worker writes on its standard error
// to w, and calls ready when it says it is ready.
type readyWatch struct {
	w     io.Writer
	ready func()
	line  []byte // what it has written since its last newline
}

func (r *readyWatch) Write(b []byte) (int, error) {
	for _, c := range b {
		if c != '\n' {
			if len(r.line) < len(readyLine)+1 {
				r.line = append(r.line, c)
			}
			continue
		}
		if string(r.line) == readyLine {
			r.ready()
		}
		r.line = r.line[:0]
	}
	return r.w.Write(b)
}

// workerConfig is what the worker in slot, recording as process, is told.
func (ws *workerSet) workerConfig(slot int, process, deadline int64) workerConfig {
	wc := ws.cfg.workerConfig(ws.topo, slot, process)
	wc.StartUnixNano, wc.DeadlineUnixNano = ws.start.UnixNano(), deadline
	wc.MetricsFile = filepath.Join(ws.metrics, fmt.Sprintf("worker-%d.prom", process))
	wc.AdapterMark = ws.adapterMark
	return wc
}

// workerConfig is what c tells the worker in slot of topology t,
// recording as process, of the run and its servers.
func (c runPlan) workerConfig(t *topo, slot int, process int64) workerConfig {
	nodes, postgres, redis := t.urls(slot)
	endpoints := t.endpoints()
	if t.zk != nil {
		// The ensemble's servers as this worker reaches them, through its
		// links: ZooKeeper's, not Redis nodes.
		endpoints, nodes = nodes, nil
	}
	return workerConfig{
		RedisURL: redis, PostgresURL: postgres, NodeURLs: nodes, LockKey: lockKey(c.Name),
		FenceKey: fenceKey(c.Name), CounterID: c.CounterID, Lease: c.Lease, Retry: c.Retry,
		Work: c.Work, OpTimeout: c.OpTimeout, AdapterHello: c.AdapterHello, Pause: c.Pause, Fenced: c.guard().Fenced(), Guard: c.guard(), Workload: c.workload().name,
		InjectEvery: c.InjectEvery, PauseKind: string(c.PauseKind), Lock: c.Lock, ExtendBeforeWrite: c.ExtendBeforeWrite,
		Process: process, Stride: int64(c.Workers), RecordPostgres: c.recordPostgres(),
		Sentinel: t.sentinel(), Endpoints: endpoints,
	}
}

// awaitReady has the worker, not yet started, say it is ready on fd 3,
// then read its deadline after its configuration on stdin; it returns the
// pipe the word comes on: the caller reads r, and closes w once the worker
// has started.
func (p *workerProc) awaitReady() (r, w *os.File, err error) {
	if r, w, err = os.Pipe(); err != nil {
		return nil, nil, err
	}
	p.cmd.ExtraFiles = []*os.File{w}
	if p.start, err = p.cmd.StdinPipe(); err != nil {
		r.Close()
		w.Close()
		return nil, nil, err
	}
	p.ready = make(chan struct{})
	return r, w, nil
}

// watch reads the worker's ops until it exits, and says how it ended.
func (ws *workerSet) watch(p *workerProc, stdout io.Reader, stderr *lastLine) {
	ws.col.read(p.slot, stdout, ws.lg)
	err := p.proc.Wait()
	if p.ready != nil {
		p.markReady() // it will never say it is
	}
	pid := p.proc.Pid()
	switch {
	case exitCode(err) > 0:
		// It gave up of itself (a kill is no exit code): say why
		// where the user looks, not only in the log.
		ws.lg.printf("worker %d (pid %d) ended early, %v: %s", p.slot, pid, err, printable.Escape(stderr.last()))
	case err != nil:
		ws.lg.logf("worker %d (pid %d): %v", p.slot, pid, err)
	default:
		ws.lg.logf("worker %d (pid %d): exited", p.slot, pid)
	}
	close(p.done)
}

// Targets implements nemesis.Workers.
func (ws *workerSet) Targets() []nemesis.Target {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var ts []nemesis.Target
	for _, p := range ws.slots {
		if p == nil || exited(p) {
			continue
		}
		holding, written, writing := ws.col.holds(p.slot)
		op, renewing := ws.col.calling(p.slot)
		ts = append(ts, nemesis.Target{Worker: p.slot, PID: p.proc.Pid(), Group: groupOf{p.proc},
			Process: history.Process(ws.col.current[p.slot].Load()), Holding: holding, Written: written, Writing: writing,
			Op: op, Renewing: renewing})
	}
	return ts
}

func exited(p *workerProc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill implements nemesis.Workers: SIGKILL the worker in slot, wait until
// its output is read, and complete its open operation as :info.
func (ws *workerSet) Kill(slot int) error {
	ws.mu.Lock()
	p := ws.slots[slot]
	ws.mu.Unlock()
	if p == nil || exited(p) {
		return nemesis.ErrNoTarget
	}
	_ = group(p, syscall.SIGCONT) // a stopped process dies as well, but resume it all the same
	if err := group(p, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill worker %d: %w", slot, err)
	}
	<-p.done
	ws.col.crashed(slot, ws.clock.Now(context.Background()))
	return nil
}

// Replace implements nemesis.Workers: a new worker in slot, under a new
// process number, unless the run's time is up.
func (ws *workerSet) Replace(_ context.Context, slot int) error {
	if time.Now().After(ws.deadline) {
		return nil
	}
	return ws.spawn(slot, ws.col.current[slot].Load()+int64(ws.cfg.Workers))
}

// wait waits up to grace, or until abort is closed, for the workers to
// finish their last sections, then ends those still running, and the
// stops of waiters with them.
func (ws *workerSet) wait(abort <-chan struct{}, grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	ws.mu.Lock()
	all := append([]*workerProc(nil), ws.all...)
	ws.mu.Unlock()
	for _, p := range all {
		select {
		case <-p.done:
		case <-t.C:
			ws.lg.printf("workers still running %v after the time limit: ending them", grace)
			ws.kill()
			return
		case <-abort:
			ws.lg.printf("interrupted again: ending the workers now")
			ws.kill()
			return
		}
	}
	ws.stops.endAll() // none is left: a stopped waiter does not exit
}

// resume sends SIGCONT to the worker in slot, if it still runs.
func (ws *workerSet) resume(slot int) {
	ws.mu.Lock()
	p := ws.slots[slot]
	ws.mu.Unlock()
	if p != nil && !exited(p) {
		_ = group(p, syscall.SIGCONT)
	}
}

// signal resumes every worker still running and sends it sig: SIGKILL to
// its whole group, other signals to the worker alone (a SIGTERM asks it to
// finish its section, for which it needs its adapter).
func (ws *workerSet) signal(sig syscall.Signal) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, p := range ws.all {
		if !exited(p) {
			_ = group(p, syscall.SIGCONT)
			if sig == syscall.SIGKILL {
				_ = group(p, sig)
			} else {
				_ = p.proc.Signal(sig)
			}
		}
	}
}

// group sends sig to the process group the worker p leads.
func group(p *workerProc, sig syscall.Signal) error { return p.proc.SignalGroup(sig) }

// kill resumes and ends every worker still running, and waits for them. A
// stopped process is sent SIGCONT first, so that none is ever left stopped.
// Then it kills what their lock adapters left running.
func (ws *workerSet) kill() {
	ws.signal(syscall.SIGKILL)
	ws.stops.endAll()
	ws.mu.Lock()
	all := append([]*workerProc(nil), ws.all...)
	ws.mu.Unlock()
	for _, p := range all {
		<-p.done
	}
	ws.reapAdapters()
}

// reapAdapters kills every process the workers' lock adapters left
// running, found by their mark wherever they went: a worker killed by the
// nemesis or at the run's end closed none of its adapter's, and a child
// that left the worker's process group (setsid) outlives its group's kill.
func (ws *workerSet) reapAdapters() {
	if ws.adapterMark == "" {
		return
	}
	left, err := adapter.Reap(ws.adapterMark)
	if len(left) > 0 {
		ws.lg.printf("lock adapters left %s running after their workers ended: killed", adapter.Leftovers(left))
	}
	if err != nil {
		ws.lg.printf("lock adapters: %v", err)
	}
}

// A lastLine passes what a worker writes on its standard error to the log,
// keeping its last line: why the worker gave up, if it did.
type lastLine struct {
	w    io.Writer
	mu   sync.Mutex
	line []byte
}

func (l *lastLine) Write(b []byte) (int, error) {
	l.mu.Lock()
	if t := bytes.TrimRight(b, "\n"); len(t) > 0 {
		if i := bytes.LastIndexByte(t, '\n'); i >= 0 {
			t = t[i+1:]
		}
		l.line = append(l.line[:0], t...)
	}
	l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lastLine) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.line)
}
