package harness

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/lockserver"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/hiatus-dev/hiatus/topology"
)

// The defaults of a run, which `hiatus run` and `hiatus compare` flags
// both show.
const (
	DefaultName         = "lock-counter"
	DefaultWorkers      = 3
	DefaultTimeLimit    = 10 * time.Second
	DefaultLease        = 500 * time.Millisecond
	DefaultWork         = 20 * time.Millisecond
	DefaultRetry        = 5 * time.Millisecond
	DefaultOpTimeout    = client.DefaultOpTimeout
	DefaultAdapterHello = 30 * time.Second
	DefaultNemesis      = Nemesis(nemesis.KindSigStop)
	DefaultPause        = 800 * time.Millisecond
	DefaultInterval     = 700 * time.Millisecond
	DefaultPauseKind    = nemesis.KindSleep
	DefaultLock         = "setnx"
	DefaultStore        = "store"
	DefaultCounterID    = 1
)

// Config is everything a run is made of. Each field is a Setting (Settings
// declares each once: its flag, its key in test.edn, its words), but Plan,
// a schedule that schedule.edn keeps; test.edn keeps every setting a replay
// takes, and the servers' URLs with their passwords hidden.
type Config struct {
	Name      string        // the test's name: runs go to Store/Name/START-TIME/
	Workers   int           // worker processes contending for the lock
	TimeLimit time.Duration // how long workers start new critical sections
	Lease     time.Duration // the lock's lease, whole milliseconds
	Work      time.Duration // simulated work between the read and the write
	Retry     time.Duration // wait between attempts to acquire the lock
	OpTimeout time.Duration // bound on each read, write and release, and each attempt of pg-advisory's and an adapter's lock; a timeout is an :info op
	// AdapterHello bounds an exec: adapter's start, to its hello: an
	// interpreter's start and imports, slow on a loaded machine.
	AdapterHello time.Duration
	// AdapterStore is where an exec: adapter keeps its lock, one of
	// AdapterStores ("" is AdapterOnRedis, the run's Redis); a lock of
	// hiatus's own ignores it, as pause-test's mix of locks needs.
	AdapterStore string
	Nemesis      Nemesis         // the faults, one every Interval for Pause; "" or "none" for none
	RedisPID     int             // of an external Redis, for pause-redis
	PostgresPID  int             // of an external PostgreSQL's postmaster, for pause-postgres
	Pause        time.Duration   // how long each pause lasts (the nemesis's and in-section)
	Interval     time.Duration   // between the end of one nemesis pause and the start of the next
	InjectEvery  int             // pause each worker in its every Nth section; 0 = never
	PauseKind    history.Keyword // of the in-section pause: nemesis.KindSleep, KindStop or KindStopWaiters
	Lock         string          // the lock under test: one of client.LockNames, an adapter's exec:COMMAND, or a Lab's
	Guard        client.Guard    // what Postgres checks before a write lands; "" as client.GuardNone
	Workload     string          // what each section does with the resource: one of Workloads(); "" as WorkloadCounter
	Nodes        int             // redlock's independent Redis nodes; 0 is DefaultNodes
	ClockJump    time.Duration   // how far the clock fault steps a node's clock, forward or (negative) back; 0 is the lease forward
	ClockStrobe  time.Duration   // with the clock fault, step the clock back and forth this often while it lasts; 0 for one step
	Delay        time.Duration   // what the delay faults add to each byte's trip; 0 is the lease
	Hosts        Hosts           // where workers and servers run: HostsLocal ("" too), HostsNetns or "ssh:" and an inventory file
	Seed         int64           // seed of the nemesis's choices
	RedisURL     string          // "" starts a throwaway redis-server
	PostgresURL  string          // "" starts a throwaway PostgreSQL
	Store        string          // directory where runs are kept
	CounterID    int64           // row of the counter table (runs sharing a server need distinct rows and names)
	// LockServerRecord is what the run records of the lock's own servers
	// (lockserver.edn): lockserver.ModeFull, as "" too, ModeCommands or
	// ModeNone.
	LockServerRecord lockserver.Mode

	// ExtendBeforeWrite has each holder extend its grant right before its
	// write, and write only when the lock said it still held it.
	ExtendBeforeWrite bool
	// NodeAOF has the lock's own Redis nodes log each write and fsync it
	// before answering: a node restarted after a crash keeps its keys.
	NodeAOF bool
	// NoPlots leaves out the run's performance plots (latency and rate
	// PNGs), which cost more than a short run's check: for many short
	// runs (a grid's tests, pause-test's cases). `hiatus plot` draws them
	// from the history later.
	NoPlots bool

	// Plan, when not nil, is the nemesis's schedule to replay (a run's
	// schedule.edn) instead of one drawn from Seed; Nemesis must name its
	// kinds of fault.
	Plan nemesis.Plan

	// own are the locks of the Lab that runs c, beside hiatus's: set by
	// the Lab's Run and Validate.
	own []client.LockKind
}

// A Nemesis is the faults a run injects, as --nemesis lists them: kinds of
// fault (nemesis.Kind*, NemesisNames) comma-separated, and a sequence of
// kinds joined by + (partition-redis+clock). Its zero value, as "none",
// injects none.
type Nemesis string

// Hosts says where a run's workers and the servers under test run.
type Hosts string

// Where runs run.
const (
	HostsLocal Hosts = "local" // on this machine (the zero Hosts too)
	HostsNetns Hosts = "netns" // each on a host of its own, a network namespace (root)
	// "ssh:FILE": on the machines an inventory file names, over SSH
	// (docs/hosts.md).
)

// DefaultConfig returns the configuration of `hiatus run` with no flags,
// seeded from the clock.
func DefaultConfig() Config {
	return Config{
		Name: DefaultName, Workers: DefaultWorkers, TimeLimit: DefaultTimeLimit, Lease: DefaultLease,
		Work: DefaultWork, Retry: DefaultRetry, OpTimeout: DefaultOpTimeout, AdapterHello: DefaultAdapterHello, Nemesis: DefaultNemesis,
		Pause: DefaultPause, Interval: DefaultInterval, PauseKind: DefaultPauseKind, Lock: DefaultLock,
		Store: DefaultStore, CounterID: DefaultCounterID, Seed: time.Now().UnixNano(), Hosts: HostsLocal, Guard: client.GuardNone,
		LockServerRecord: lockserver.ModeFull,
	}
}

// A SetupError says a run could not start as configured: a bad setting, or
// a server that cannot be started or reached. It is the user's to fix
// (`hiatus` exits 254), not a fault of the lock or of hiatus.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// ErrInterrupted is returned when ctx ends while a run's servers start:
// the run never began, and nothing it started is left.
var ErrInterrupted = errors.New("interrupted while its servers started")

func setupErrorf(format string, args ...any) error {
	return &SetupError{Err: fmt.Errorf(format, args...)}
}

// Validate says what is wrong with c, if anything, in the words of the
// flags that set it. Run validates too.
func (c Config) Validate() error {
	if err := c.validate(); err != nil {
		return &SetupError{Err: err}
	}
	return nil
}

// The most workers and Redis nodes a run may have: far above any run
// measured here (64 workers, 5 nodes), and bounds on what a test.edn handed
// to replay can ask a machine to start.
const (
	MaxWorkers = 10_000
	MaxNodes   = 15
)

// validate says what is wrong with c, if anything; Validate says it to
// the user.
func (c Config) validate() error { return c.runPlan().validate() }

func (c runPlan) validate() error {
	switch {
	case c.Workers < 1 || c.Workers > MaxWorkers:
		return fmt.Errorf("--workers must be from 1 to %d, not %d", MaxWorkers, c.Workers)
	case c.TimeLimit <= 0:
		return fmt.Errorf("--time-limit must be positive, not %v", c.TimeLimit)
	case c.Lease <= 0:
		return fmt.Errorf("--lease must be positive, not %v", c.Lease)
	case c.Lease%time.Millisecond != 0:
		return fmt.Errorf("--lease must be whole milliseconds (SET … PX), not %v", c.Lease)
	case c.Work < 0 || c.Retry < 0 || c.Pause < 0 || c.Interval < 0:
		return fmt.Errorf("--work, --retry, --pause and --interval cannot be negative")
	case c.OpTimeout <= 0:
		return fmt.Errorf("--op-timeout must be positive, not %v", c.OpTimeout)
	case c.AdapterHello <= 0:
		return fmt.Errorf("--adapter-hello must be positive, not %v", c.AdapterHello)
	case c.Pause > c.TimeLimit:
		return fmt.Errorf("--pause %v is longer than --time-limit %v", c.Pause, c.TimeLimit)
	case c.InjectEvery < 0:
		return fmt.Errorf("--inject-every cannot be negative")
	case c.InjectEvery > 0 && c.Pause <= 0:
		return fmt.Errorf("--inject-every needs a positive --pause")
	case !slices.Contains(InSectionKinds(), c.PauseKind):
		return fmt.Errorf("--pause-kind %q: want one of %s", c.PauseKind, keywordNames(InSectionKinds()))
	case c.byAdapter() && strings.TrimSpace(strings.TrimPrefix(c.Lock, client.ExecPrefix)) == "":
		return fmt.Errorf("--lock %q: exec: needs the adapter's command, as exec:'python3 my_adapter.py'", c.Lock)
	case c.lock.Store == client.Elsewhere && !slices.Contains(c.lockNames(), c.Lock):
		return fmt.Errorf("--lock %q: want one of %s, or exec:COMMAND (a lock adapter)", c.Lock, strings.Join(c.lockNames(), ", "))
	case c.NodeAOF && c.lockNodes() == 0:
		return fmt.Errorf("--node-aof: --lock %s has no Redis nodes of its own here (redlock has; one that a node fault acts on has one)", c.Lock)
	case c.ExtendBeforeWrite && !c.lock.Extends:
		return fmt.Errorf("--extend-before-write: --lock %s cannot extend a grant (those that can: %s, an adapter whose hello says renewal)", c.Lock, strings.Join(extenders(), ", "))
	case c.Nodes < 0 || c.ClockStrobe < 0 || c.Delay < 0:
		return fmt.Errorf("--nodes, --clock-strobe and --delay cannot be negative")
	case c.Nodes > MaxNodes:
		return fmt.Errorf("--nodes must be at most %d, not %d", MaxNodes, c.Nodes)
	case c.Hosts != "" && c.Hosts != HostsLocal && c.Hosts != HostsNetns && c.inventory() == "":
		return fmt.Errorf("--hosts %q: want local, netns or ssh:FILE (an inventory of machines, docs/hosts.md)", c.Hosts)
	case c.Hosts == "netns" && c.netnsHosts() > topology.MaxHosts:
		return fmt.Errorf("--hosts netns: %d workers and %d servers need %d hosts, more than a test network's %d",
			c.Workers, c.netnsHosts()-c.Workers, c.netnsHosts(), topology.MaxHosts)
	case c.Nodes > 0 && c.lock.Store != client.OnRedisNodes && !c.onZooKeeper():
		return fmt.Errorf("--nodes %d is redlock's and ZooKeeper's: --lock %s is kept on one node", c.Nodes, c.Lock)
	case !store.PlainName(c.Name):
		return fmt.Errorf("--name %q: want a plain name (printable, no / or \\, not . or .. or latest, at most %d bytes)", c.Name, store.MaxName)
	case c.Store == "":
		return fmt.Errorf("--store: want a directory")
	case !slices.Contains(lockserver.Modes(), c.lockServerRecord()):
		return fmt.Errorf("--lock-server-record %q: want one of %v", c.LockServerRecord, lockserver.Modes())
	}
	if err := c.choice(); err != nil {
		return err
	}
	if err := c.validateNemesis(); err != nil {
		return err
	}
	if (c.ClockJump != 0 || c.ClockStrobe != 0) && !c.faultIn(string(nemesis.KindClock)) {
		return fmt.Errorf("--clock-jump and --clock-strobe go with --nemesis clock")
	}
	if c.Delay > 0 && !c.delayed() {
		return fmt.Errorf("--delay goes with --nemesis %s", strings.Join(DelayFaults(), ", "))
	}
	for _, u := range []string{c.RedisURL, c.PostgresURL} {
		if u == "" {
			continue
		}
		if _, err := url.Parse(u); err != nil {
			return fmt.Errorf("bad server URL: %v", redactErr(err))
		}
	}
	return nil
}

// choice says which of the settings that name one of a list (--guard,
// --workload, --adapter-store) names none of it; nil when all do.
func (c Config) choice() error {
	switch {
	case c.Guard != "" && !slices.Contains(client.Guards(), c.Guard):
		return fmt.Errorf("--guard %q: want one of %v", c.Guard, client.Guards())
	case c.AdapterStore != "" && !slices.Contains(AdapterStores(), c.AdapterStore):
		return fmt.Errorf("--adapter-store %q: want one of %s", c.AdapterStore, strings.Join(AdapterStores(), ", "))
	}
	_, err := workloadOf(c.Workload)
	return err
}

// guard is the guard of the run's writes: Guard, none when unset.
func (c Config) guard() client.Guard { return cmp.Or(c.Guard, client.GuardNone) }

// lockServerRecord is what the run records of the lock's servers: full
// when unset.
func (c Config) lockServerRecord() lockserver.Mode {
	return cmp.Or(c.LockServerRecord, lockserver.ModeFull)
}

func lockKey(name string) string  { return "hiatus:lock:" + name }
func fenceKey(name string) string { return "hiatus:fence:" + name }

// testEDN is the run's whole configuration, as test.edn: its settings, and
// what the run makes of them.
func testEDN(c runPlan, start time.Time) []byte {
	m := c.ednMap()
	for k, v := range map[history.Keyword]any{
		"lock-key": lockKey(c.Name), "fence-key": fenceKey(c.Name), "model": history.Keyword(c.Model()),
		"initial": c.workload().initial, "replay?": c.Plan != nil,
		// The history's clock is the run's Redis (TIME), never a lock node
		// whose clock the clock fault jumps.
		"history-clock": history.Keyword("redis-time"),
		// :time in the history counts nanoseconds from here, on the Redis clock.
		"start-time": start.UTC().Format(time.RFC3339Nano), "start-unix-ns": start.UnixNano(),
	} {
		m[k] = v
	}
	return append(history.AppendValue(nil, m), '\n')
}

// Redact hides a server URL's password, for logs, messages and test.edn.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		// A key=value connection string (host=… password=…), or none.
		return dsnPassword.ReplaceAllString(raw, "${1}xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// dsnPassword finds the password of a key=value connection string.
var dsnPassword = regexp.MustCompile(`(password\s*=\s*)('[^']*'|\S+)`)

// redactErr drops the URL from url.Parse errors, which quote it whole.
func redactErr(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// What a configuration makes of the run: the shape the topology takes.

// clockJump and delay are the clock and delay faults' sizes: the lease by
// default, so that a jump ends every lease a node holds and a delayed
// request arrives a lease late.
func (c Config) clockJump() time.Duration { return cmp.Or(c.ClockJump, c.Lease) }
func (c Config) delay() time.Duration     { return cmp.Or(c.Delay, c.Lease) }

// HolderWait is how long a replayed fault that hit a holder, a write or
// a lock call in flight waits for its worker to be there again, and a
// reply-only delay for a lock call to catch: five sections at the least,
// since with 1 s of work a second found the other worker holding turn
// after turn. The faults after it wait behind it, so a replay whose plan
// has n such faults may end up to n of these later than its run did.
func (c Config) HolderWait() time.Duration { return c.runPlan().HolderWait() }

func (c runPlan) HolderWait() time.Duration { return max(time.Second, 5*c.section()) }

// section is about what a section takes but for pauses: its work and a
// retry, and, in a run with a delay fault, two round trips (the read and
// the write) across a delayed link.
func (c runPlan) section() time.Duration {
	d := c.Work + c.Retry
	if c.delayed() {
		d += 4 * c.delay()
	}
	return d
}

// redisLock reports whether the lock is kept on Redis, so that the nodes'
// faults can reach it.
func (c runPlan) redisLock() bool {
	s := c.lock.Store
	return s == client.OnRedis || s == client.OnRedisNodes
}

// onZooKeeper reports whether the lock is kept on a ZooKeeper ensemble of
// its own.
func (c runPlan) onZooKeeper() bool { return c.lock.Store == client.OnZooKeeper }

// onEtcd reports whether the lock is kept on etcd.
func (c runPlan) onEtcd() bool { return c.lock.Store == client.OnEtcd }

// zkNodes is how many servers the lock's ZooKeeper ensemble has: --nodes,
// one by default; none for a lock not kept on ZooKeeper.
func (c runPlan) zkNodes() int {
	if !c.onZooKeeper() {
		return 0
	}
	return max(c.Nodes, 1)
}

// extenders are hiatus's locks that can extend a grant.
func extenders() []string {
	var names []string
	for _, k := range client.LockKinds() {
		if k.Extends {
			names = append(names, k.Name)
		}
	}
	return names
}

// adapterCommand is the command of c's lock adapter (--lock exec:COMMAND),
// and whether its lock is one.
func (c Config) adapterCommand() (string, bool) { return strings.CutPrefix(c.Lock, client.ExecPrefix) }

// byAdapter says c's lock is an adapter's.
func (c Config) byAdapter() bool { _, ok := c.adapterCommand(); return ok }

// lockNodes is how many Redis nodes of its own the lock is kept on: a
// majority lock's --nodes; one when a fault acts on the lock's node, or
// when it runs on hosts of their own (--hosts netns or ssh:FILE) and no
// fault acts on the run's Redis (pause-redis and kill-redis act on the
// Redis the lock is kept on, which is then the run's, on the control
// machine, as on one machine); none otherwise: the run's Redis, or with
// failover the replicated one.
func (c runPlan) lockNodes() int {
	switch {
	case c.lock.Store == client.OnRedisNodes:
		return c.nodes()
	case c.needs&needReplica != 0:
		return 0
	case c.redisLock() && (c.needs&needLockServers != 0 || (c.onHosts() && c.needs&needRunRedis == 0)):
		return 1
	}
	return 0
}

// netnsHosts is how many hosts --hosts netns makes: one a worker, a lock
// node, a throwaway PostgreSQL, etcd, each ZooKeeper server, and each of
// failover's five servers.
func (c runPlan) netnsHosts() int {
	n := c.Workers + c.lockNodes()
	if c.PostgresURL == "" {
		n++
	}
	if c.onEtcd() {
		n++
	}
	n += c.zkNodes()
	if c.needs&needReplica != 0 {
		n += 5
	}
	return n
}

// proxied reports whether the workers reach the servers through proxies
// of the run's (topology.Link), for the link faults to act on. On hosts
// of their own, partitions act in the kernel instead; only a delay or a
// drop (this kernel has no netem) needs the proxies.
func (c runPlan) proxied() bool {
	if c.onHosts() {
		return c.needs&needProxy != 0
	}
	return c.needs&(needRedisLinks|needPostgresLink) != 0
}

func (c Config) nodes() int {
	if c.Nodes > 0 {
		return c.Nodes
	}
	return DefaultNodes
}
