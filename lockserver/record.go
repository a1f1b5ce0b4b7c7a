// Package lockserver records what the lock's own servers did to the lock's
// keys while a run went: the server's side of the story the history tells
// from the clients'. A Recorder, started before the first worker and
// stopped after the last op, follows each lock node — a Redis node through
// MONITOR (and, in ModeFull, the keyspace notifications of the lock's keys
// on the same connection), etcd through a watch of the lock's prefix,
// ZooKeeper through a persistent watch of the lock's znode — and
// streams what it derives, one event a line, to a journal in the run
// directory; Stop sorts the journal by time into lockserver.edn, whose
// events history.ServerEvent reads (docs/history-format.md, "The lock
// server's record"). It holds no more of a run in memory than each node's
// model of the key and a bounded queue of events on their way to disk.
package lockserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/redis/go-redis/v9"
)

// A Mode says how much of the lock's servers a run records.
type Mode string

// The modes of --lock-server-record.
const (
	// ModeFull records each node's commands (MONITOR, a watch) and has the
	// server say what each did: Redis's keyspace notifications, turned on
	// for the run (CONFIG SET notify-keyspace-events).
	ModeFull Mode = "full"
	// ModeCommands records the commands alone and derives what each did
	// from them (a server where CONFIG SET is not allowed): a command
	// within a millisecond of the key's deadline may be read either way.
	ModeCommands Mode = "commands"
	// ModeNone records nothing (a server where MONITOR is not allowed):
	// the run is checked from its history alone.
	ModeNone Mode = "none"
)

// Modes lists the modes, the default first.
func Modes() []Mode { return []Mode{ModeFull, ModeCommands, ModeNone} }

// Config is what a Recorder records.
type Config struct {
	Mode      Mode
	Start     time.Time // the run's start, on the history's clock
	ClockURL  string    // the run's Redis, whose TIME is the history's clock
	Key       string    // the lock's key (etcd: its prefix; ZooKeeper: its znode)
	FenceKey  string    // the fence counter's key; "" for none
	Redis     []RedisNode
	Etcd      *EtcdNode
	Postgres  *PostgresNode
	ZooKeeper *ZooKeeperNode
	// Log takes what the recorder has to say (a line it could not read, a
	// node it lost); nil drops it.
	Log func(format string, args ...any)
	// readHook, when set (by tests), is called before each read of a
	// Redis node's stream, on its reader's goroutine: a recorder late to
	// read, as on a loaded machine.
	readHook func()
	// dropMark, when set (by tests), says which of a clock step's markers
	// are not sent, as if their node had not answered in time.
	dropMark func(marker string) bool
}

// queueLen bounds the events on their way to disk: a node whose events
// the disk cannot take waits, and its connection's data waits in the
// server.
const queueLen = 4096

// A Recorder records a run's lock servers.
type Recorder struct {
	cfg      Config
	run      store.Run
	hist     *historyClock
	clockDB  *redis.Client
	redis    []*redisSource
	etcd     *etcdSource
	pg       *postgresSource
	zk       *zookeeperSource
	ops      chan history.Op
	wrote    chan error // the journal writer's end
	stopping chan struct{}
	stop     sync.Once
	err      error
	cancel   context.CancelFunc
}

// Start connects to every node cfg names and begins their record, in the
// journal of run. A node that cannot be recorded as cfg.Mode asks (MONITOR
// refused, CONFIG SET refused, a Redis too old) fails it: nothing is left
// running. Stop ends it, on every path.
func Start(ctx context.Context, run store.Run, cfg Config) (_ *Recorder, err error) {
	if cfg.Mode == ModeNone {
		return nil, errors.New("lockserver: mode none records nothing")
	}
	opt, err := redis.ParseURL(cfg.ClockURL)
	if err != nil {
		return nil, fmt.Errorf("the run's Redis: %w", err)
	}
	opt.ClientName, opt.MaxRetries, opt.PoolSize = recordName, -1, 2
	opt.ReadTimeout, opt.WriteTimeout = sampleTimeout, sampleTimeout
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Recorder{cfg: cfg, run: run, clockDB: redis.NewClient(opt), ops: make(chan history.Op, queueLen),
		wrote: make(chan error, 1), stopping: make(chan struct{}), cancel: cancel}
	defer func() {
		if err != nil {
			r.abort()
		}
	}()
	if r.hist, err = newHistoryClock(ctx, r.clockDB, cfg.Start); err != nil {
		return nil, fmt.Errorf("the run's Redis's TIME: %w", err)
	}
	journal, err := run.Append(store.LockServerJournal)
	if err != nil {
		return nil, err
	}
	go r.write(journal)
	for i, n := range cfg.Redis {
		s, err := r.newRedisSource(ctx, i, n)
		if err != nil {
			return nil, err
		}
		r.redis = append(r.redis, s)
		if err := s.connect(ctx); err != nil {
			return nil, fmt.Errorf("record %s at %s: %w", n.Name, redact(n.URL), err)
		}
	}
	if cfg.Etcd != nil {
		if r.etcd, err = r.startEtcd(ctx, len(cfg.Redis), *cfg.Etcd); err != nil {
			return nil, err
		}
	}
	if cfg.Postgres != nil {
		if r.pg, err = r.startPostgres(ctx, len(r.nodes())-1, *cfg.Postgres); err != nil {
			return nil, err
		}
	}
	if cfg.ZooKeeper != nil {
		if r.zk, err = r.startZooKeeper(ctx, len(r.nodes())-1, *cfg.ZooKeeper); err != nil {
			return nil, err
		}
	}
	for _, s := range r.redis {
		go s.run(bg)
	}
	return r, nil
}

// abort undoes a Start that failed.
func (r *Recorder) abort() {
	r.cancel()
	close(r.stopping)
	for _, s := range r.redis {
		s.closeConn()
		s.side.Close()
	}
	if r.etcd != nil {
		r.etcd.close()
	}
	if r.pg != nil {
		r.pg.conn.Close(context.Background())
	}
	if r.zk != nil {
		r.zk.close()
	}
	close(r.ops)
	<-r.wrote
	r.clockDB.Close()
}

// Nodes are the record's nodes, by process number in the journal.
func (r *Recorder) nodes() []string {
	var names []string
	for _, n := range r.cfg.Redis {
		names = append(names, n.Name)
	}
	if r.cfg.Etcd != nil {
		names = append(names, r.cfg.Etcd.Name)
	}
	if r.cfg.Postgres != nil {
		names = append(names, r.cfg.Postgres.Name)
	}
	if r.cfg.ZooKeeper != nil {
		names = append(names, r.cfg.ZooKeeper.Name)
	}
	return names
}

func (r *Recorder) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		r.cfg.Log(format, args...)
	}
}

// op makes an event of node index at h (unix ns on the history's clock) a
// journal op.
func (r *Recorder) op(index int, h int64, e event) history.Op {
	// Every line the record takes ran after the run began (a node's stream
	// is read from its sync marker on): a stamp before it is a stamp's
	// error (a clock step's second marker unsent, a first measure's
	// spread), and a negative :time would make the whole journal
	// unreadable (TestStepsUnmarked, once in a suite).
	o := history.Op{Index: history.Unset, Time: max(h-r.hist.startNS, 0), Type: history.Info, Process: history.Process(index),
		F: e.act, Extra: map[history.Keyword]any{history.KeyKey: e.key}}
	set := func(k history.Keyword, v string) {
		if v != "" {
			o.Extra[k] = v
		}
	}
	set(history.KeyToken, e.token)
	set(history.KeyWas, e.was)
	set(history.KeyCommand, e.command)
	switch e.act {
	case history.SFence:
		o.Value = e.value
	case history.SGap:
		o.Value = e.reason
	}
	if e.act != history.SExpire && e.act != history.SGap {
		o.Extra[history.KeyClient] = e.client
	}
	if e.uncertainty > 0 {
		o.Extra[history.KeyUncertainty] = e.uncertainty
	}
	if e.grain > 0 {
		o.Extra[history.KeyExpiryGrain] = e.grain
	}
	return o
}

// send queues an op for the journal.
func (r *Recorder) send(o history.Op) { r.ops <- o }

// write writes the queued ops to the journal, flushing what it has
// whenever the queue runs dry, until the queue is closed.
func (r *Recorder) write(f *os.File) {
	bw := bufio.NewWriterSize(f, 64<<10)
	w := history.NewWriter(bw)
	var err error
	for o := range r.ops {
		if err == nil {
			err = w.Write(o)
		}
		if len(r.ops) == 0 && err == nil {
			if err = w.Flush(); err == nil {
				err = bw.Flush()
			}
		}
	}
	if err == nil {
		if err = w.Flush(); err == nil {
			err = bw.Flush()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	r.wrote <- err
}

// endWait bounds the wait for a node's end marker.
const endWait = 5 * time.Second

// Stop ends the record: each node logs a marker, and once its line is read
// every command the node ran before Stop is in the record; keys past their
// deadline then expire. It sorts the journal into lockserver.edn and
// returns what kept the record from being whole. Stop may be called more
// than once.
func (r *Recorder) Stop(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.stop.Do(func() { r.err = r.stopOnce(ctx) })
	return r.err
}

func (r *Recorder) stopOnce(ctx context.Context) error {
	close(r.stopping)
	var wg sync.WaitGroup
	for _, s := range r.redis {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.end(ctx, endWait)
			s.restore(ctx)
			s.side.Close()
		}()
	}
	if r.etcd != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.etcd.end(ctx)
		}()
	}
	if r.pg != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.pg.end(ctx)
		}()
	}
	if r.zk != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.zk.end(ctx)
		}()
	}
	wg.Wait()
	r.cancel()
	close(r.ops)
	err := <-r.wrote
	r.clockDB.Close()
	if err != nil {
		return fmt.Errorf("the lock server's record: %w", err)
	}
	return r.sort(ctx)
}

// sort writes lockserver.edn from the journal, by time, each op's process
// its node's name, and removes the journal.
func (r *Recorder) sort(ctx context.Context) error {
	out, err := r.run.Create(store.LockServer)
	if err != nil {
		return err
	}
	names := r.nodes()
	bw := bufio.NewWriterSize(out, 64<<10)
	var line []byte
	// Its files go where a run killed in the middle leaves nothing behind.
	scratch, err := servers.ScratchDir("sort")
	if err != nil {
		out.Abort()
		return fmt.Errorf("sort the lock server's record: %w", err)
	}
	defer os.RemoveAll(scratch)
	err = history.SortFile(ctx, r.run.Path(store.LockServerJournal), history.SortOptions{Dir: scratch}, func(o history.Op) error {
		if o.Process < 0 || int(o.Process) >= len(names) {
			return fmt.Errorf("op %d: node %d of %d", o.Index, o.Process, len(names))
		}
		e, err := history.ServerEventOf(o, names[o.Process])
		if err != nil {
			return err
		}
		line = append(history.AppendServerEvent(line[:0], e), '\n')
		_, err = bw.Write(line)
		return err
	})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		out.Abort()
		return fmt.Errorf("sort the lock server's record (%s keeps it): %w", store.LockServerJournal, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return r.run.Remove(store.LockServerJournal)
}

// redact hides a URL's password for a message.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

// retryConnect calls connect at once and then every every until it
// succeeds, ctx ends or the record stops; it reports whether it connected.
func (r *Recorder) retryConnect(ctx context.Context, every time.Duration, connect func(context.Context) error) bool {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stopping:
			return false
		default:
		}
		if connect(ctx) == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-r.stopping:
			return false
		case <-t.C:
		}
	}
}
