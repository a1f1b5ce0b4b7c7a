package harness

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// InSectionKinds are the in-section pauses --pause-kind may name: the worker
// pauses itself inside its every --inject-every-th section, after the read
// and before the write (nemesis.InSection). Of the configuration, not the
// nemesis's schedule: a replay has them from test.edn.
//
//   - sleep: the worker's goroutine blocks; its lock's renewals run on.
//   - stop: the worker stops its whole process (SIGSTOP), renewals and
//     adapter too; the run resumes it after --pause.
//   - stop-waiters: the worker blocks as with sleep, keeping the lock, and
//     the run stops every other worker then waiting for the lock, whole,
//     for as long (stopWaiters): waiters frozen in line past their leases
//     while the holder keeps the lock, as a lock's queue must survive.
func InSectionKinds() []history.Keyword {
	return []history.Keyword{nemesis.KindSleep, nemesis.KindStop, nemesis.KindStopWaiters}
}

// stopWaiters stops, for d, the process group of every worker but the one
// in holder that is waiting for the lock (its acquire invoked and not
// completed), and records each stop as a :pause and a :resume of kind
// :stop-waiters on the nemesis's process, naming the worker as SigStop's
// events do. With a lock that keeps its holder's lease alive none of them
// can hold the lock meanwhile: the one in holder does. A waiter is
// stopped only in the first half of the holder's pause, which began at
// from: the collector may come to the pause late (it reads the workers'
// ops as they come, beside the run's other work), and once the holder
// releases, a waiter it took for waiting may already hold the lock. Nor
// is one stopped within a quarter of the pause of the run's time limit:
// its waiters give up there, and the collector, reading their ops late,
// would take one that had given up for one waiting (2 of 20 runs beside
// two CPU burners stopped such a worker, 6 ms after its acquire failed).
func (ws *workerSet) stopWaiters(holder int, from int64, d time.Duration) {
	ws.mu.Lock()
	var waiting []*workerProc
	for _, p := range ws.slots {
		if p != nil && p.slot != holder && !exited(p) && ws.col.waiting(p.slot) {
			waiting = append(waiting, p)
		}
	}
	ws.mu.Unlock()
	ws.awaitInLine(1+len(waiting), min(d/4, time.Second))
	type stopped struct {
		p *workerProc
		v map[history.Keyword]any
	}
	var all []stopped
	for _, p := range waiting {
		if left := time.Until(ws.deadline); left < d/4 {
			ws.lg.logf("stop-waiters: worker %d not stopped: the run's time limit was %v away, where its waiters give up", p.slot, left)
			continue
		}
		v := map[history.Keyword]any{"kind": nemesis.KindStopWaiters, "worker": p.slot, "pid": p.proc.Pid(),
			"process": ws.col.current[p.slot].Load(), "ms": d.Milliseconds()}
		at := ws.clock.Now(context.Background()) // before the stop, so that the events' window covers it
		if at >= from+int64(d/2) {
			ws.lg.logf("stop-waiters: worker %d not stopped: the holder's pause of %v was half over (%v) before its turn came", p.slot, d, time.Duration(at-from))
			continue
		}
		if !ws.stops.claim(p.slot) {
			ws.lg.logf("stop-waiters: worker %d not stopped: an earlier holder's pause has it stopped", p.slot)
			continue
		}
		if err := group(p, syscall.SIGSTOP); err != nil {
			ws.stops.free(p.slot)
			ws.lg.logf("stop-waiters: worker %d: %v", p.slot, err) // it exited meanwhile
			continue
		}
		ws.event(at, history.FPause, v)
		all = append(all, stopped{p, v})
	}
	if len(all) == 0 {
		return
	}
	ws.stops.add(d, func() {
		for _, s := range all {
			_ = group(s.p, syscall.SIGCONT)
			ws.event(ws.clock.Now(context.Background()), history.FResume, s.v)
			ws.stops.free(s.p.slot)
		}
	})
}

// awaitInLine waits, bound at most, until n keys are in the line of a lock
// that keeps one (etcd's: the holder's key and each waiter's under
// client.EtcdPrefix): a worker whose acquire was invoked a moment ago may
// not have put its key in line yet, and stopped then it is stopped on its
// way, not waiting in line (the etcd-waiter finding, with 3 ms of work
// before the pause, missed so in 4 runs of 10). Other locks keep no line:
// it returns at once, as it does for an adapter's lock on etcd, whose keys
// are its library's, not in hiatus's line.
func (ws *workerSet) awaitInLine(n int, bound time.Duration) {
	endpoints := ws.topo.endpoints()
	if len(endpoints) == 0 || ws.cfg.byAdapter() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop(), DialTimeout: bound})
	if err != nil {
		return
	}
	defer cli.Close()
	prefix := client.EtcdPrefix(lockKey(ws.cfg.Name)) + "/"
	for {
		r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && r.Count >= int64(n) {
			return
		}
		select {
		case <-ctx.Done():
			ws.lg.logf("stop-waiters: %d of %d keys in the lock's line after %v; stopping the waiters all the same", countOf(r), n, bound)
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// countOf is r's count, 0 for none.
func countOf(r *clientv3.GetResponse) int64 {
	if r == nil {
		return 0
	}
	return r.Count
}

// event records an event of the nemesis's process at time at.
func (ws *workerSet) event(at int64, f history.Keyword, v map[history.Keyword]any) {
	ws.lg.logf("nemesis: %s %s", f, history.AppendValue(nil, v))
	ws.col.record(history.Op{Index: history.Unset, Time: at, Type: history.Info, Process: history.Nemesis, F: f, Value: v})
}

// waiterStops are the stops of waiters under way, each ended by a timer
// or, when the run ends first, by endAll, so that no worker is left stopped
// and every :resume is recorded before the journal is closed.
type waiterStops struct {
	mu      sync.Mutex
	ends    map[int]func() // what ends each stop under way, by its number
	next    int
	wg      sync.WaitGroup // ends running
	stopped map[int]bool   // the worker slots a stop under way holds
}

// claim marks slot stopped and says whether it was not already: a waiter
// that a stop under way holds is not stopped again by the next, whose
// events would say it stopped when the first's resume, earlier, woke it.
func (s *waiterStops) claim(slot int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped[slot] {
		return false
	}
	if s.stopped == nil {
		s.stopped = map[int]bool{}
	}
	s.stopped[slot] = true
	return true
}

// free marks slot no longer stopped.
func (s *waiterStops) free(slot int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.stopped, slot)
}

// add begins to time a stop that end ends, d from now.
func (s *waiterStops) add(d time.Duration, end func()) {
	s.mu.Lock()
	if s.ends == nil {
		s.ends = map[int]func(){}
	}
	id := s.next
	s.next++
	s.ends[id] = end
	s.mu.Unlock()
	time.AfterFunc(d, func() { s.end(id) })
}

// end ends the stop id, unless it has been ended already.
func (s *waiterStops) end(id int) {
	s.mu.Lock()
	f := s.ends[id]
	delete(s.ends, id)
	if f != nil {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if f != nil {
		defer s.wg.Done()
		f()
	}
}

// endAll ends every stop under way now, and waits for every end begun.
func (s *waiterStops) endAll() {
	s.mu.Lock()
	var ids []int
	for id := range s.ends {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		s.end(id)
	}
	s.wg.Wait()
}
