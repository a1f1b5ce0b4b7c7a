package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/guard"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/lockserver"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"
)

// workerEnv marks a process that a run started as one of its workers.
const workerEnv = "HIATUS_WORKER"

// ServeWorker makes this process a worker when a run started it as one,
// and returns at once otherwise: Lab{}.ServeWorker, for hiatus's own locks
// and adapters.
func ServeWorker() { Lab{}.ServeWorker() }

// ServeWorker makes this process a worker when a run started it as one,
// and returns at once otherwise. Workers are separate processes (the
// nemesis stops and kills them whole) of the very binary that called Run:
// a program, or a test binary. So call ServeWorker first thing in main, or
// in TestMain before m.Run, on the Lab the runs use; a worker runs its
// critical sections, writes its ops to standard output (anything else
// printed there goes to the run's log) and exits.
//
//	var lab = harness.Lab{Locks: []client.LockKind{myLock}}
//
//	func TestMain(m *testing.M) {
//		lab.ServeWorker()
//		os.Exit(m.Run())
//	}
func (l Lab) ServeWorker() {
	if os.Getenv(workerEnv) == "" {
		return
	}
	var wc workerConfig
	in := json.NewDecoder(os.Stdin)
	if err := in.Decode(&wc); err != nil {
		fmt.Fprintf(os.Stderr, "hiatus worker: read the configuration from stdin: %v\n", err)
		os.Exit(2)
	}
	if wc.DeadlineUnixNano == 0 && !wc.Remote {
		unix.CloseOnExec(3) // its lock adapter must not hold the run's wait open
	}
	ops, err := opsOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "hiatus worker: %v\n", err)
		os.Exit(2)
	}
	if err := runWorker(context.Background(), wc, in, l.Locks, ops); err != nil {
		fmt.Fprintf(os.Stderr, "hiatus worker: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// opsOutput returns the worker's standard output, for its ops alone, and
// points standard output at standard error (the run's log): a lock that
// prints — a debugging line, a library's notice — must not break the ops
// stream, which the run would then have to give up on.
func opsOutput() (*os.File, error) {
	fd, err := unix.Dup(1)
	if err != nil {
		return nil, fmt.Errorf("keep standard output for the ops: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.Dup2(2, 1); err != nil {
		return nil, fmt.Errorf("send standard output to the log: %w", err)
	}
	return os.NewFile(uintptr(fd), "ops"), nil
}

// workerConfig is what a worker process reads on its standard input: JSON,
// so that server URLs never show in the process list.
type workerConfig struct {
	RedisURL, PostgresURL string   // the run's Redis (the clock, the fences); PostgreSQL as this worker reaches it
	NodeURLs              []string // the lock's Redis nodes as this worker reaches them
	Endpoints             []string // the lock's own servers that are not Redis (etcd's, ZooKeeper's)
	// Sentinel, when set, names the lock's Redis primary: the worker
	// follows its failovers.
	Sentinel           adapter.Sentinel
	LockKey, FenceKey  string
	CounterID          int64
	Lease, Retry, Work time.Duration
	OpTimeout, Pause   time.Duration
	AdapterHello       time.Duration
	Fenced             bool // the lock hands out fencing tokens
	Guard              client.Guard
	Workload           string // one of Workloads()
	InjectEvery        int
	ExtendBeforeWrite  bool
	PauseKind          string
	Lock               string
	Process, Stride    int64
	StartUnixNano      int64 // the run's start on the Redis clock
	// DeadlineUnixNano is when to stop starting sections, on the local
	// clock; 0 to say ready on fd 3 and then read a workerStart on stdin.
	DeadlineUnixNano int64
	// MetricsFile is where the worker writes its guard's metrics (see
	// store.Metrics); "" for none.
	MetricsFile string
	// Remote says the worker runs on another machine, over SSH: it says
	// it is ready by ReadyLine on its standard error (it has no fd 3),
	// and its deadlines are durations from when it reads them
	// (DeadlineIn, workerStart.In), for its clock is not the run's.
	Remote     bool
	DeadlineIn time.Duration

	// AdapterMark is the run's adapters' (adapter.Setup.Mark); "" on a
	// node, whose adapters each kill what they leave on Close.
	AdapterMark string
	// RecordPostgres has the worker's PostgreSQL sessions log the
	// advisory lock's calls for the lock server's record.
	RecordPostgres bool
}

// clientName is what the worker's connections to the servers call
// themselves: its slot's name, which it keeps across its processes.
func (wc workerConfig) clientName() string {
	return history.WorkerName(history.Process(wc.Process), int(wc.Stride))
}

// readyLine is what a remote worker writes on its standard error once it
// is ready.
const readyLine = "hiatus worker: ready"

// warm opens the worker's connections to the run's Redis and to
// PostgreSQL before it says it is ready, so that their set-up is not
// counted in the run's time. A server that does not answer is said in the
// run's log; the worker's ops then record what it does.
func warm(ctx context.Context, rdb *redis.Client, db *pgxpool.Pool, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		fmt.Fprintf(os.Stderr, "hiatus worker: the run's Redis did not answer before the start: %v\n", err)
	}
	if err := db.Ping(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "hiatus worker: PostgreSQL did not answer before the start: %v\n", err)
	}
}

// workerStart is what a worker that said it is ready reads next on stdin.
type workerStart struct {
	DeadlineUnixNano int64
	In               time.Duration // for a remote worker: the deadline is this long from now
}

// awaitStart says on fd 3 (a remote worker: on its standard error) that
// the worker is ready and reads its deadline from in.
func awaitStart(in *json.Decoder, remote bool) (int64, error) {
	var err error
	if remote {
		_, err = fmt.Fprintln(os.Stderr, readyLine)
	} else {
		ready := os.NewFile(3, "ready")
		_, err = ready.Write([]byte{1})
		ready.Close()
	}
	if err != nil {
		return 0, fmt.Errorf("worker: say ready: %w", err)
	}
	var s workerStart
	if err := in.Decode(&s); err != nil {
		return 0, fmt.Errorf("worker: read the deadline from stdin: %w", err)
	}
	if remote {
		return time.Now().Add(s.In).UnixNano(), nil
	}
	return s.DeadlineUnixNano, nil
}

// runWorker runs critical sections until the deadline, printing each op as
// one EDN line as soon as it is recorded; in is its standard input, after
// the configuration, where it reads the deadline once ready if wc has none.
func runWorker(ctx context.Context, wc workerConfig, in *json.Decoder, own []client.LockKind, out io.Writer) error {
	// SIGINT or SIGTERM ends the run early: the section under way is
	// finished, no new one begins.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rdb, err := redisClient(wc.RedisURL, wc.clientName(), 1, wc.OpTimeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	// One session a worker: its steps are sequential, and 64 workers must
	// fit in a server's default 100 connections.
	var params map[string]string
	if wc.RecordPostgres {
		// The lock's session is a copy of this one's: its advisory lock
		// calls are logged, by the worker's name (lockserver).
		params = lockserver.SessionParams(wc.clientName())
	}
	db, err := postgresPool(context.WithoutCancel(ctx), wc.PostgresURL, 1, workerApp(wc.CounterID), params)
	if err != nil {
		return err
	}
	defer db.Close()
	rec := &opWriter{w: history.NewWriter(out), cancel: cancel}
	clock := client.NewRedisClock(rdb, time.Unix(0, wc.StartUnixNano))
	lock, closeLock, err := workerLock(ctx, wc, rdb, db, own)
	if err != nil {
		return err
	}
	defer closeLock()
	wl, err := workloadOf(wc.Workload)
	if err != nil {
		return err
	}
	g, record, dump := guardMetrics(wc, rec.record)
	defer dump()
	w := &client.Worker{
		Lock: lock, Workload: wl.resource(db, wc.CounterID, g),
		Clock: clock, Record: record, Process: history.Process(wc.Process), Stride: wc.Stride,
		Work: wc.Work, OpTimeout: wc.OpTimeout, ExtendBeforeWrite: wc.ExtendBeforeWrite,
		Renewals: &client.Renewals{Clock: clock, Record: record},
	}
	if wc.InjectEvery > 0 {
		in := &nemesis.InSection{Every: wc.InjectEvery, Pause: wc.Pause, Kind: history.Keyword(wc.PauseKind),
			Clock: clock, Record: record}
		if e, ok := lock.(*client.Exec); ok {
			in.Freeze = func() { e.Freeze() } // the adapter is part of the application the pause freezes
		}
		w.Hook = func(ctx context.Context, s client.Section) { in.Maybe(ctx, s.Process, s.N) }
	}
	if wc.Remote && wc.DeadlineIn > 0 {
		wc.DeadlineUnixNano = time.Now().Add(wc.DeadlineIn).UnixNano()
	}
	if wc.DeadlineUnixNano == 0 {
		warm(ctx, rdb, db, wc.OpTimeout)
		if wc.DeadlineUnixNano, err = awaitStart(in, wc.Remote); err != nil {
			return err
		}
	}
	ctx, cancelRun := context.WithDeadline(ctx, time.Unix(0, wc.DeadlineUnixNano))
	defer cancelRun()
	lerr := w.Run(ctx)
	if err := rec.err(); err != nil {
		return fmt.Errorf("worker: write ops: %w", err)
	}
	return lerr
}

// guardMetrics returns the worker's guard, which counts its guarded ops in
// a registry of the worker's own, under the lock label wc.LockKey, and
// record, which
// records an op and, after a read or write the guard refused, writes the
// registry to wc.MetricsFile (atomically: a new file renamed over the
// old); dump writes it too, for the worker's end. The file follows the op:
// a worker killed between the two leaves a file one refusal short of its
// history. A file, not a /metrics endpoint: the worker may sit in a
// network namespace the run cannot reach, a stopped worker answers no
// scrape, and a killed one's counts would be gone.
func guardMetrics(wc workerConfig, rec func(history.Op)) (g guard.Guard, record func(history.Op), dump func()) {
	g.Kind = wc.Guard
	if wc.MetricsFile == "" {
		return g, rec, func() {}
	}
	reg := prometheus.NewRegistry()
	m, err := guard.NewMetrics(reg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hiatus worker: guard metrics: %v\n", err)
		return g, rec, func() {}
	}
	g.Lock, g.Metrics = wc.LockKey, m
	var said bool
	dump = func() {
		if err := prometheus.WriteToTextfile(wc.MetricsFile, reg); err != nil && !said {
			said = true
			fmt.Fprintf(os.Stderr, "hiatus worker: write the guard metrics: %v\n", err)
		}
	}
	record = func(o history.Op) {
		rec(o)
		if o.Type == history.Fail && (o.Error == history.ErrStaleFence || o.Error == history.ErrChanged) {
			dump()
		}
	}
	return g, record, dump
}

// An opWriter writes a worker's ops as they are recorded, each flushed at
// once; the first failure cancels the worker (the run is gone: nothing
// more to record for).
type opWriter struct {
	mu     sync.Mutex
	w      *history.Writer
	werr   error
	cancel context.CancelFunc
}

func (o *opWriter) record(op history.Op) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.werr != nil {
		return
	}
	if o.werr = o.w.Write(op); o.werr == nil {
		o.werr = o.w.Flush()
	}
	if o.werr != nil {
		o.cancel()
	}
}

func (o *opWriter) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.werr
}

// workerLock builds the worker's lock, of the kind wc names among own and
// hiatus's, on the servers wc says it is kept on; close lets go of them.
func workerLock(ctx context.Context, wc workerConfig, rdb *redis.Client, db *pgxpool.Pool, own []client.LockKind) (_ client.Lock, close func(), err error) {
	kind, ok := client.LockKindOf(wc.Lock, own)
	if !ok {
		return nil, nil, fmt.Errorf("worker: no lock %q: hand it to the Lab whose ServeWorker this process calls", wc.Lock)
	}
	lc := client.LockConfig{Redis: rdb, Postgres: db, Key: wc.LockKey, FenceKey: wc.FenceKey, Lease: wc.Lease,
		Retry: wc.Retry, Fenced: wc.Fenced, RedisURL: wc.RedisURL, OpTimeout: wc.OpTimeout, Hello: wc.AdapterHello, Endpoints: wc.Endpoints,
		AdapterMark: wc.AdapterMark, ClientName: wc.clientName()}
	var closers []func() error
	close = func() {
		for _, c := range closers {
			_ = c()
		}
	}
	defer func() {
		if err != nil {
			close()
		}
	}()
	lc.PostgresURL = wc.PostgresURL
	if len(wc.NodeURLs) > 0 && wc.NodeURLs[0] != wc.RedisURL {
		lc.RedisURL, lc.NodeURLs = wc.NodeURLs[0], wc.NodeURLs // an adapter's nodes
		for _, u := range wc.NodeURLs {
			n, err := redisClient(u, wc.clientName(), 2, wc.OpTimeout)
			if err != nil {
				return nil, nil, err
			}
			closers = append(closers, n.Close)
			lc.Nodes = append(lc.Nodes, n)
		}
	}
	if len(wc.Sentinel.Addrs) > 0 {
		n := client.FailoverClient(wc.Sentinel, wc.clientName(), wc.OpTimeout)
		closers = append(closers, n.Close)
		lc.Nodes = []*redis.Client{n}
		lc.RedisURL, lc.Sentinel = "", wc.Sentinel // an adapter's: the primary is whichever the sentinels name
	}
	lock, err := kind.New(ctx, lc)
	if err != nil {
		return nil, nil, err
	}
	if c, ok := lock.(io.Closer); ok {
		closers = append([]func() error{c.Close}, closers...) // the lock before its servers' clients
	}
	return lock, close, nil
}
