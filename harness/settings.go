package harness

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/shellquote"
	"github.com/hiatus-dev/hiatus/lockserver"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// A Setting is one field of Config, declared once: the flag that sets it,
// the key test.edn keeps it under, the Go a reproducer sets it with, and
// the words Describe gives it. test.edn (AppendEDN), ParseConfig, a
// reproducer's command line (CommandLine) and Go (GoStatements), the flags
// of `hiatus run` and `hiatus compare`, and Describe are each made from
// Settings, so that none can leave a field out or read it another way.
type Setting struct {
	Flag   string // `hiatus run --Flag`; "" when no flag sets it
	Usage  string // the flag's help
	Shared bool   // `hiatus compare` takes the flag too
	// Local says the setting is of the machine that makes a run (its
	// servers, store, counter row, pictures), not of the experiment: a
	// grid's command line, which every cell of it shares, leaves it out.
	Local bool
	Key   history.Keyword // test.edn's key; "" when test.edn keeps none
	Env   string          // an environment variable the flag reads, if any
	// DefaultText is the flag's default in words, where the default
	// follows another setting ("the lease"); "" shows Default.
	DefaultText string

	goName  string                   // the Config field a reproducer's Go sets
	get     func(Config) any         // the value: time.Duration, int, int64, string or bool
	set     func(*Config, any) error // from a value of get's type
	keyword bool                     // test.edn writes a string value as a keyword where it can be one
	// kept, when not nil, says whether the setting means anything for c:
	// test.edn keeps, and a replay reads, it only then (a clock jump
	// without the clock fault is no part of the run).
	kept     func(runPlan) bool
	noReplay bool                 // a replay does not take it (server URLs: test.edn hides their passwords)
	describe func(runPlan) string // Describe's words for it; nil for none
}

// Where an exec: adapter keeps its lock (Config.AdapterStore).
const (
	AdapterOnRedis      = "redis"
	AdapterOnRedisNodes = "redis-nodes"
	AdapterOnZooKeeper  = "zookeeper"
	AdapterOnEtcd       = "etcd"
	AdapterOnSentinel   = "sentinel"
)

// An adapterStore is a place an exec: adapter may keep its lock: the
// servers its lock is kept on there (its kind's Store), what the run
// starts and tells the adapter, what adapter check starts, and Describe's
// words for it; failover says it is a Redis its sentinels fail over (the
// run starts them; --nemesis failover acts on it).
type adapterStore struct {
	name, told, checked, words string
	store                      client.Store
	failover                   bool
}

// adapterStores are the places an exec: adapter may keep its lock, the
// default first.
func adapterStores() []adapterStore {
	return []adapterStore{
		{AdapterOnRedis, "told redis_url", "--redis-url or a throwaway redis-server, told redis_url", "", client.OnRedis, false},
		{AdapterOnRedisNodes, "--nodes independent Redis nodes, a Redlock's, told redis_urls", "three throwaway redis-servers, told as redis_urls",
			"the adapter's lock on Redis nodes of its own", client.OnRedisNodes, false},
		{AdapterOnZooKeeper, "a throwaway ZooKeeper ensemble of --nodes servers, told as zookeeper in init", "a throwaway ZooKeeper server, told as zookeeper",
			"the adapter's lock on ZooKeeper", client.OnZooKeeper, false},
		{AdapterOnEtcd, "a throwaway etcd server, told as etcd_endpoints", "a throwaway etcd server, told as etcd_endpoints",
			"the adapter's lock on etcd", client.OnEtcd, false},
		{AdapterOnSentinel, "a Redis primary, its replica and three sentinels, told as sentinels; --nemesis failover fails it over",
			"a throwaway primary, replica and three sentinels, told as sentinels; its hello must say sentinel: true",
			"the adapter's lock on a Redis its sentinels fail over", client.OnRedis, true},
	}
}

// AdapterStores are the names of the places an exec: adapter may keep its
// lock.
func AdapterStores() []string {
	var names []string
	for _, a := range adapterStores() {
		names = append(names, a.name)
	}
	return names
}

// AdapterCheckStores says, for adapter check's --adapter-store, what each
// place starts and tells the adapter.
func AdapterCheckStores() string { return storeWords(func(a adapterStore) string { return a.checked }) }

// storeWords lists the places, each with its words, for a flag's usage:
// "redis (…), redis-nodes (…) or sentinel (…)".
func storeWords(words func(adapterStore) string) string {
	var usage []string
	for _, a := range adapterStores() {
		usage = append(usage, fmt.Sprintf("%s (%s)", a.name, words(a)))
	}
	return strings.Join(usage[:len(usage)-1], ", ") + " or " + usage[len(usage)-1]
}

// adapterStoreOf is the place called name; the default for "".
func adapterStoreOf(name string) (adapterStore, bool) {
	stores := adapterStores()
	i := slices.IndexFunc(stores, func(a adapterStore) bool { return a.name == cmp.Or(name, AdapterOnRedis) })
	if i < 0 {
		return adapterStore{}, false
	}
	return stores[i], true
}

// adapterStoreSetting is --adapter-store: where an exec: adapter keeps its
// lock, which decides the servers the run starts for it.
func adapterStoreSetting() Setting {
	return Setting{Flag: "adapter-store", Key: "adapter-store", keyword: true, DefaultText: AdapterOnRedis,
		Usage:  "where an exec: adapter keeps its lock: " + storeWords(func(a adapterStore) string { return a.told }),
		goName: "AdapterStore", get: func(c Config) any { return c.AdapterStore }, set: setString(func(c *Config) *string { return &c.AdapterStore }),
		kept: func(c runPlan) bool { return c.byAdapter() && c.AdapterStore != "" },
		describe: func(c runPlan) string {
			a, _ := adapterStoreOf(c.AdapterStore)
			return a.words
		}}
}

// nodesSetting is --nodes: redlock's Redis nodes, or the servers of the
// ZooKeeper lock's ensemble.
func nodesSetting() Setting {
	return Setting{Flag: "nodes", Key: "lock-nodes", Usage: "independent Redis nodes of --lock redlock (a majority must grant); the servers of the ZooKeeper ensemble of --lock zookeeper (1, standalone, by default)", DefaultText: fmt.Sprint(DefaultNodes),
		goName: "Nodes", get: func(c Config) any { return c.Nodes }, set: setTo(func(c *Config) *int { return &c.Nodes }),
		kept: func(c runPlan) bool { return c.lock.Store == client.OnRedisNodes || c.onZooKeeper() },
		describe: func(c runPlan) string {
			if c.onZooKeeper() {
				return fmt.Sprintf("%d ZooKeeper servers", c.zkNodes())
			}
			if c.nodes() == 1 {
				return "1 node"
			}
			return fmt.Sprintf("%d nodes", c.nodes())
		}}
}

// Default is the setting's value in DefaultConfig, typed as Get's.
func (s Setting) Default() any { return s.get(DefaultConfig()) }

// Get returns the setting's value in c: a time.Duration, int, int64,
// string or bool.
func (s Setting) Get(c Config) any { return s.get(c) }

// Set sets the setting in c to v, of Get's type.
func (s Setting) Set(c *Config, v any) error { return s.set(c, v) }

// Settings are the fields of Config, in the order `hiatus run --help`
// lists their flags. Locks and Plan are code and a schedule
// (schedule.edn), not settings.
func Settings() []Setting {
	return []Setting{
		textSetting("name", "name", "Name", "test name: runs go to STORE/NAME/START-TIME/", func(c *Config) *string { return &c.Name }),
		{Flag: "workers", Key: "workers", Shared: true, Usage: "worker processes contending for the lock",
			goName: "Workers", get: func(c Config) any { return c.Workers }, set: setTo(func(c *Config) *int { return &c.Workers }),
			describe: func(c runPlan) string { return fmt.Sprintf("%d workers", c.Workers) }},
		durationSetting("time-limit", "TimeLimit", "how long workers start new critical sections", true, func(c *Config) *time.Duration { return &c.TimeLimit }),
		durationSetting("lease", "Lease", "lock lease (SET … PX)", false, func(c *Config) *time.Duration { return &c.Lease }),
		durationSetting("work", "Work", "simulated work between the read and the write", true, func(c *Config) *time.Duration { return &c.Work }),
		durationSetting("retry", "Retry", "wait between attempts to acquire the lock", true, func(c *Config) *time.Duration { return &c.Retry }),
		durationSetting("op-timeout", "OpTimeout", "bound on each read, write and release, and on each attempt of a lock that asks its server one call at a time (pg-advisory, an adapter's); a timeout is an :info op", true, func(c *Config) *time.Duration { return &c.OpTimeout }),
		durationSetting("adapter-hello", "AdapterHello", "how long an exec: adapter may take to start and answer init with its hello", true, func(c *Config) *time.Duration { return &c.AdapterHello }),
		nemesisSetting(),
		durationSetting("pause", "Pause", "how long each fault and each in-section pause lasts", true, func(c *Config) *time.Duration { return &c.Pause }),
		durationSetting("interval", "Interval", "time between the end of one fault and the start of the next", true, func(c *Config) *time.Duration { return &c.Interval }),
		{Flag: "inject-every", Key: "inject-every", Usage: "pause each worker inside its every Nth critical section (after the read, before the write) for --pause; 0 = never",
			goName: "InjectEvery", get: func(c Config) any { return c.InjectEvery }, set: setTo(func(c *Config) *int { return &c.InjectEvery })},
		{Flag: "pause-kind", Key: "pause-kind", keyword: true, Usage: "the in-section pause: sleep (only the worker's goroutine blocks), stop (the worker SIGSTOPs its whole process) or stop-waiters (it blocks as with sleep, and every worker then waiting for the lock is SIGSTOPped as long)",
			goName: "PauseKind", get: func(c Config) any { return string(c.PauseKind) }, set: setString(func(c *Config) *history.Keyword { return &c.PauseKind }),
			describe: func(c runPlan) string {
				if c.InjectEvery <= 0 {
					return ""
				}
				return fmt.Sprintf("in-section %s %v every %d sections", c.PauseKind, c.Pause, c.InjectEvery)
			}},
		{Flag: "lock", Key: "lock", keyword: true, Usage: "the lock under test: " + strings.Join(client.LockNames(), ", ") + ", or exec:COMMAND (a lock adapter)",
			goName: "Lock", get: func(c Config) any { return c.Lock }, set: setString(func(c *Config) *string { return &c.Lock })},
		guardSetting(),
		workloadSetting(),
		boolSetting("extend-before-write", "ExtendBeforeWrite", "each holder extends its grant right before its write, and writes only when the lock says it still holds it, as a careful user of a renewing lock does (an :extend op)",
			"extended before each write", func(c *Config) *bool { return &c.ExtendBeforeWrite }),
		boolSetting("node-aof", "NodeAOF", "the lock's own Redis nodes log each write to an append-only file and fsync it before answering (appendfsync always): a node restarted after a crash keeps its keys",
			"nodes fsync every write (AOF)", func(c *Config) *bool { return &c.NodeAOF }),
		local(boolSetting("no-plots", "NoPlots", "leave out each run's latency and rate plots (PNG), which cost more than a short run's check; hiatus plot RUN-DIR draws them later",
			"no plots", func(c *Config) *bool { return &c.NoPlots })),
		nodesSetting(),
		adapterStoreSetting(),
		{Flag: "clock-jump", Key: "clock-jump-ms", Usage: "how far --nemesis clock steps a node's clock: forward, or back when negative (-500ms)", DefaultText: "the lease",
			goName: "ClockJump", get: func(c Config) any { return c.ClockJump }, set: setTo(func(c *Config) *time.Duration { return &c.ClockJump }),
			kept:     func(c runPlan) bool { return c.faultIn(string(nemesis.KindClock)) },
			describe: func(c runPlan) string { return fmt.Sprintf("clock jump %v", c.clockJump()) }},
		{Flag: "clock-strobe", Key: "clock-strobe-ms", Usage: "with --nemesis clock, step the clock back and forth this often while the fault lasts (a strobing clock); 0 for one step",
			goName: "ClockStrobe", get: func(c Config) any { return c.ClockStrobe }, set: setTo(func(c *Config) *time.Duration { return &c.ClockStrobe }),
			kept: func(c runPlan) bool { return c.faultIn(string(nemesis.KindClock)) },
			describe: func(c runPlan) string {
				if c.ClockStrobe == 0 {
					return ""
				}
				return fmt.Sprintf("strobing every %v", c.ClockStrobe)
			}},
		{Flag: "delay", Key: "delay-ms", Usage: "what --nemesis delay-* adds to each byte's trip", DefaultText: "the lease",
			goName: "Delay", get: func(c Config) any { return c.Delay }, set: setTo(func(c *Config) *time.Duration { return &c.Delay }),
			kept:     func(c runPlan) bool { return c.delayed() },
			describe: func(c runPlan) string { return fmt.Sprintf("delay %v", c.delay()) }},
		{Flag: "hosts", Key: "hosts", Shared: true, keyword: true,
			Usage:  "where the workers and the servers under test run: local (this machine), netns (each on a host of its own, a network namespace on a private bridge, where partitions act in the kernel; needs root, and --nemesis isolate needs it), or ssh:FILE (on the machines an inventory file names, over SSH: docs/hosts.md)",
			goName: "Hosts", get: func(c Config) any { return string(c.Hosts) }, set: setString(func(c *Config) *Hosts { return &c.Hosts }),
			describe: func(c runPlan) string {
				if c.Hosts == "local" {
					return ""
				}
				return "on hosts " + string(c.Hosts)
			}},
		{Flag: "seed", Key: "seed", Usage: "seed of the nemesis's choices, to replay a schedule", DefaultText: "from the clock, recorded in test.edn",
			goName: "Seed", get: func(c Config) any { return c.Seed }, set: setTo(func(c *Config) *int64 { return &c.Seed }),
			describe: func(c runPlan) string { return fmt.Sprintf("seed %d", c.Seed) }},
		urlSetting("redis-url", "RedisURL", "use this Redis (redis://host:port/db) instead of a throwaway redis-server", func(c *Config) *string { return &c.RedisURL }),
		urlSetting("postgres-url", "PostgresURL", "use this PostgreSQL instead of a throwaway one; it must allow CREATE TABLE", func(c *Config) *string { return &c.PostgresURL }),
		{Flag: "redis-pid", Local: true, Usage: "PID of the --redis-url server, for --nemesis pause-redis", goName: "RedisPID", noReplay: true,
			get: func(c Config) any { return c.RedisPID }, set: setTo(func(c *Config) *int { return &c.RedisPID })},
		{Flag: "postgres-pid", Local: true, Usage: "PID of the --postgres-url server's postmaster, for --nemesis pause-postgres", goName: "PostgresPID", noReplay: true,
			get: func(c Config) any { return c.PostgresPID }, set: setTo(func(c *Config) *int { return &c.PostgresPID })},
		{Flag: "store", Shared: true, Local: true, Usage: "directory where runs are kept", goName: "Store",
			get: func(c Config) any { return c.Store }, set: setString(func(c *Config) *string { return &c.Store })},
		lockServerRecordSetting(),
		{Flag: "counter-id", Key: "counter-id", Shared: true, Local: true, Usage: "row of the counter table the runs use (runs sharing a server need distinct rows and names)",
			goName: "CounterID", get: func(c Config) any { return c.CounterID }, set: setTo(func(c *Config) *int64 { return &c.CounterID })},
	}
}

func textSetting(flag, key, goName, usage string, p func(*Config) *string) Setting {
	return Setting{Flag: flag, Key: history.Keyword(key), Usage: usage, goName: goName,
		get: func(c Config) any { return *p(&c) }, set: setString(p)}
}

// durationSetting is a duration test.edn keeps in whole milliseconds, as
// FLAG-ms.
func durationSetting(flag, goName, usage string, shared bool, p func(*Config) *time.Duration) Setting {
	s := Setting{Flag: flag, Key: history.Keyword(flag + "-ms"), Usage: usage, Shared: shared, goName: goName,
		get: func(c Config) any { return *p(&c) }, set: setTo(p)}
	switch flag {
	case "time-limit":
		s.describe = func(c runPlan) string { return c.TimeLimit.String() }
	case "lease", "work":
		s.describe = func(c runPlan) string { return fmt.Sprintf("%s %v", flag, *p(&c.Config)) }
	}
	return s
}

func nemesisSetting() Setting {
	return Setting{Flag: "nemesis", Key: "nemesis", goName: "Nemesis",
		Usage: "faults, every --interval one of them for --pause: none, or a comma-separated list of " + faultsAbout() +
			"; a+b: a sequence, b begun --pause/2 after a (of " + strings.Join(SequenceFaults(), ", ") + "); " +
			"random: every kind the run allows, overlapping in time, one fault a target at a time. See docs/nemesis.md",
		get: func(c Config) any { return string(c.Nemesis) }, set: setString(func(c *Config) *Nemesis { return &c.Nemesis }),
		describe: func(c runPlan) string {
			f := c.FaultNames()
			switch {
			case c.Plan != nil:
				if len(c.Plan) == 1 {
					return fmt.Sprintf("nemesis %s replaying 1 fault", strings.Join(f, ", "))
				}
				return fmt.Sprintf("nemesis %s replaying %d faults", strings.Join(f, ", "), len(c.Plan))
			case c.Nemesis == Random:
				return fmt.Sprintf("nemesis random (%s) for %v every %v, overlapping", strings.Join(f, ", "), c.Pause, c.Interval)
			case len(f) > 0:
				return fmt.Sprintf("nemesis %s for %v every %v", strings.Join(f, ", "), c.Pause, c.Interval)
			}
			return "no nemesis"
		}}
}

// boolSetting is a switch test.edn keeps as FLAG? only when it is on,
// and Describe says as words.
func boolSetting(flag, goName, usage, words string, p func(*Config) *bool) Setting {
	return Setting{Flag: flag, Key: history.Keyword(flag + "?"), Usage: usage, goName: goName,
		get: func(c Config) any { return *p(&c) }, set: setTo(p),
		kept: func(c runPlan) bool { return *p(&c.Config) },
		describe: func(c runPlan) string {
			if !*p(&c.Config) {
				return ""
			}
			return words
		}}
}

func guardSetting() Setting {
	return Setting{Flag: "guard", Key: "guard", keyword: true, goName: "Guard",
		Usage: "what Postgres checks before a write lands: none; fence (the token, at the write); " +
			"fence-rmw (the token at the read and the write: the whole read-modify-write); cas (UPDATE … WHERE value = $read)",
		get: func(c Config) any { return string(c.guard()) },
		set: func(c *Config, v any) error {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("want a guard, not %v", v)
			}
			c.Guard = client.Guard(s)
			return nil
		},
		describe: func(c runPlan) string {
			if g := c.guard(); g != client.GuardNone {
				return "guard " + string(g)
			}
			return "unguarded"
		}}
}

// workloadSetting is --workload, which test.edn keeps only when it is not
// the counter: the runs made before workloads read as they did.
func workloadSetting() Setting {
	return Setting{Flag: "workload", Key: "workload", Shared: true, keyword: true, Usage: "what each section does with the resource in PostgreSQL: " + WorkloadUsage(),
		DefaultText: WorkloadCounter,
		goName:      "Workload", get: func(c Config) any { return c.workload().name }, set: setString(func(c *Config) *string { return &c.Workload }),
		kept: func(c runPlan) bool { return c.workload().name != WorkloadCounter },
		describe: func(c runPlan) string {
			if c.workload().name == WorkloadCounter {
				return ""
			}
			return "workload " + c.workload().name
		}}
}

// lockServerRecordSetting is --lock-server-record: a setting of the
// servers (an external one may refuse MONITOR or CONFIG SET), which a
// replay takes too, on the throwaway servers it starts.
func lockServerRecordSetting() Setting {
	return Setting{Flag: "lock-server-record", Key: "lock-server-record", Shared: true, Local: true, keyword: true, goName: "LockServerRecord",
		Usage: "what the run records of the lock's own servers in lockserver.edn: full (each node's commands, through MONITOR or a watch, " +
			"and the server's word on what each did: Redis's keyspace notifications, turned on by CONFIG SET), commands (the commands " +
			"alone, for a server that refuses CONFIG SET) or none (a server that refuses MONITOR: the run is checked from its history alone)",
		get: func(c Config) any { return string(c.lockServerRecord()) },
		set: setString(func(c *Config) *lockserver.Mode { return &c.LockServerRecord }),
		describe: func(c runPlan) string {
			switch c.lockServerRecord() {
			case lockserver.ModeNone:
				return "lock server unrecorded"
			case lockserver.ModeCommands:
				return "lock server's commands recorded"
			}
			return ""
		}}
}

// local is s, a setting of the machine that compare takes too.
func local(s Setting) Setting {
	s.Shared, s.Local = true, true
	return s
}

func urlSetting(flag, goName, usage string, p func(*Config) *string) Setting {
	s := textSetting(flag, flag, goName, usage, p)
	s.Shared, s.Local, s.noReplay = true, true, true
	s.Env = "HIATUS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
	return s
}

func setString[T ~string](p func(*Config) *T) func(*Config, any) error {
	return func(c *Config, v any) error {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("want a string, not %v", v)
		}
		*p(c) = T(s)
		return nil
	}
}

// setTo sets the field p points to from a value of its own type.
func setTo[T any](p func(*Config) *T) func(*Config, any) error {
	return func(c *Config, v any) error {
		x, ok := v.(T)
		if !ok {
			return fmt.Errorf("want a %T, not %v", x, v)
		}
		*p(c) = x
		return nil
	}
}

// Resolved returns c as it runs, each setting that follows another made
// explicit: the guard (none when unset), the hosts, redlock's nodes,
// the clock jump and the delay (the lease), and a setting that means
// nothing for c (a clock jump without the clock fault) cleared. A Config
// read back from test.edn or a command line is Resolved.
func (c Config) Resolved() Config { return c.runPlan().resolved().Config }

// resolved is Resolved of the plan c: its faults as read, not again.
func (c runPlan) resolved() runPlan {
	c.Guard = c.guard()
	c.Hosts = cmp.Or(c.Hosts, HostsLocal)
	c.LockServerRecord = c.lockServerRecord()
	if c.lock.Store == client.OnRedisNodes {
		c.Nodes = c.nodes()
	}
	if c.onZooKeeper() {
		c.Nodes = c.zkNodes()
	}
	if c.faultIn(string(nemesis.KindClock)) {
		c.ClockJump = c.clockJump()
	}
	if c.delayed() {
		c.Delay = c.delay()
	}
	for _, s := range Settings() {
		if s.kept != nil && !s.kept(c) {
			_ = s.set(&c.Config, s.get(Config{}))
		}
	}
	return c
}

// Describe says what the run does, in one line.
func (c Config) Describe() string { return c.runPlan().Describe() }

func (c runPlan) Describe() string {
	c = c.resolved()
	parts := []string{"lock " + c.Lock}
	for _, s := range Settings() {
		if s.describe == nil || s.kept != nil && !s.kept(c) {
			continue
		}
		if d := s.describe(c); d != "" {
			parts = append(parts, d)
		}
	}
	return strings.Join(parts, ", ")
}

// AppendEDN appends c's settings to b as the EDN map test.edn holds them,
// with what a run adds (its start, the lock's keys) left to the run.
func (c Config) AppendEDN(b []byte) []byte { return history.AppendValue(b, c.runPlan().ednMap()) }

// ednMap is c's settings as test.edn keeps them, resolved.
func (c runPlan) ednMap() map[history.Keyword]any {
	c = c.resolved()
	m := map[history.Keyword]any{}
	for _, s := range Settings() {
		if s.Key == "" || s.kept != nil && !s.kept(c) {
			continue
		}
		v := s.get(c.Config)
		switch x := v.(type) {
		case time.Duration:
			v = x.Milliseconds()
		case int:
			v = int64(x)
		case string:
			if s.noReplay {
				v = Redact(x)
			} else if s.keyword && keywordLike.MatchString(x) {
				v = history.Keyword(x)
			}
		}
		m[s.Key] = v
	}
	// What the settings make of the run, for a reader of test.edn.
	m["lock-nodes"] = c.lockNodes() + c.zkNodes()
	m["fenced?"] = c.Guard.Fenced()
	m["description"] = c.Describe()
	return m
}

// keywordLike matches the strings test.edn writes as keywords: an exec:
// lock's command may hold anything, a keyword cannot.
var keywordLike = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// ParseConfig reads the settings of a test.edn back into a Config:
// DefaultConfig, with each setting the map keeps, resolved. Settings that
// a replay does not take (server URLs) are left out, as is the store.
func ParseConfig(b []byte) (Config, error) {
	v, err := history.ParseValue(string(b))
	m, ok := v.(map[history.Keyword]any)
	if err != nil || !ok {
		return Config{}, fmt.Errorf("not a map of settings: %v", err)
	}
	c := DefaultConfig()
	// Runs before --guard had only :fenced?.
	if m["fenced?"] == true {
		c.Guard = client.GuardFence
	}
	for _, s := range Settings() {
		x, ok := m[s.Key]
		if s.Key == "" || s.noReplay || !ok {
			continue
		}
		val, err := fromEDN(s, x)
		if err != nil {
			return Config{}, fmt.Errorf(":%s: %v", s.Key, err)
		}
		if err := s.set(&c, val); err != nil {
			return Config{}, fmt.Errorf(":%s: %v", s.Key, err)
		}
	}
	// A setting kept only where it means something is read only there:
	// lock-nodes says how many nodes any lock had.
	p := c.runPlan()
	for _, s := range Settings() {
		if s.kept != nil && !s.kept(p) {
			_ = s.set(&p.Config, s.get(Config{}))
		}
	}
	return p.resolved().Config, nil
}

// fromEDN is x, as test.edn keeps setting s, as a value of s's type.
func fromEDN(s Setting, x any) (any, error) {
	switch s.get(Config{}).(type) {
	case time.Duration:
		n, ok := history.Int(x)
		if ok && (n > maxMS || n < -maxMS) { // it would wrap round
			return nil, fmt.Errorf("%d milliseconds is more than a time.Duration holds (about 292 years)", n)
		}
		if ok {
			return time.Duration(n) * time.Millisecond, nil
		}
		return nil, fmt.Errorf("want milliseconds, not %s", history.AppendValue(nil, x))
	case int:
		if n, ok := history.Int(x); ok {
			return int(n), nil
		}
		return nil, fmt.Errorf("want an integer, not %s", history.AppendValue(nil, x))
	case int64:
		if n, ok := history.Int(x); ok {
			return n, nil
		}
		return nil, fmt.Errorf("want an integer, not %s", history.AppendValue(nil, x))
	case bool:
		if b, ok := x.(bool); ok {
			return b, nil
		}
		return nil, fmt.Errorf("want true or false, not %s", history.AppendValue(nil, x))
	}
	switch w := x.(type) {
	case history.Keyword:
		return string(w), nil
	case string:
		return w, nil
	}
	return nil, fmt.Errorf("want a keyword or string, not %s", history.AppendValue(nil, x))
}

// CommandLine is the `hiatus run` command that runs c again: every setting
// with a flag that differs from DefaultConfig's, the seed always, and
// --schedule when schedule names c's Plan's file. What a replay does not
// take (the servers: it starts throwaway ones) is left out.
func (c Config) CommandLine(schedule string) string {
	c = c.Resolved()
	d := DefaultConfig().Resolved()
	args := []string{"hiatus", "run"}
	for _, s := range Settings() {
		v := s.get(c)
		// The seed's default is the clock's; --nemesis's, with a schedule,
		// the schedule's kinds.
		always := s.Flag == "seed" || s.Flag == "nemesis" && schedule != ""
		if s.Flag == "" || s.noReplay || !always && v == s.get(d) {
			continue
		}
		switch x := v.(type) {
		case bool:
			if x {
				args = append(args, "--"+s.Flag)
			}
		case string:
			args = append(args, "--"+s.Flag, shellquote.Quote(x))
		default:
			args = append(args, "--"+s.Flag, fmt.Sprint(x))
		}
	}
	if schedule != "" {
		args = append(args, "--schedule", shellquote.Quote(schedule))
	}
	return strings.Join(args, " ")
}

// GoStatements are the Go statements that set c's settings on a Config
// named cfg, each field that differs from DefaultConfig's, one a line, for
// a reproducer: `cfg.Lease = 100 * time.Millisecond`.
func (c Config) GoStatements() []string {
	c = c.Resolved()
	d := DefaultConfig().Resolved()
	var out []string
	for _, s := range Settings() {
		v := s.get(c)
		if s.goName == "" || s.noReplay || s.Flag == "store" || v == s.get(d) && s.Flag != "seed" {
			continue
		}
		out = append(out, "cfg."+s.goName+" = "+goValue(v))
	}
	return out
}

// goValue writes v as a Go expression.
func goValue(v any) string {
	switch x := v.(type) {
	case time.Duration:
		if x%time.Millisecond == 0 {
			return strconv.FormatInt(x.Milliseconds(), 10) + " * time.Millisecond"
		}
		return "time.Duration(" + strconv.FormatInt(int64(x), 10) + ")"
	case string:
		return strconv.Quote(x)
	}
	return fmt.Sprint(v)
}
