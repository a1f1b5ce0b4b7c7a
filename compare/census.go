package compare

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// CensusName names the census: every lock library people install, used as
// its README shows (and carefully, where it offers a careful use), through
// one battery of faults (docs/census.md).
const CensusName = "census"

// A CensusRow is one library used one way.
type CensusRow struct {
	Library string // the library and its version, as the table says it
	Usage   string // readme, or what the careful use adds
	Lock    string // --lock: a lock of hiatus's, or exec:COMMAND
	// Store and Nodes are the adapter's --adapter-store and --nodes.
	Store string
	Nodes int
	// Lease is the row's, when not the census's 500 ms: etcd and
	// ZooKeeper count their leases and sessions in seconds.
	Lease time.Duration
	// Extend has each holder extend its grant before its write
	// (--extend-before-write); Guard is the careful use's guard (the
	// library's fencing token checked at the write).
	Extend bool
	Guard  client.Guard
}

// A Probe is one column of the census's battery: a fault, in terms of the
// row's lease.
type Probe struct {
	Name  string // the column's heading, and the runs' names
	About string
	set   func(s *Setup, lease time.Duration)
}

// Probes are the census's battery, in the table's order.
func Probes() []Probe {
	scale := func(lease time.Duration, f float64) time.Duration { return time.Duration(float64(lease) * f) }
	fault := func(kind history.Keyword, pause float64) func(*Setup, time.Duration) {
		return func(s *Setup, l time.Duration) {
			s.Nemesis, s.PauseLen, s.Interval = string(kind), scale(l, pause), scale(l, 1.4)
		}
	}
	inSection := func(kind string, pause float64) func(*Setup, time.Duration) {
		return func(s *Setup, l time.Duration) {
			s.Pause, s.PauseLen, s.Every = kind, scale(l, pause), 2
		}
	}
	return []Probe{
		{Name: "none", About: "no faults: contention alone", set: fault(history.Keyword(PauseNone), 0)},
		{Name: string(nemesis.KindSigStop), About: "a random worker (holder or waiter) SIGSTOPped for 1.6 leases every 1.4", set: fault(nemesis.KindSigStop, 1.6)},
		{Name: PauseSleep, About: "the holder blocks for 1.6 leases between its read and its write, in every 2nd section (pause-test's sleep)", set: inSection(PauseSleep, 1.6)},
		{Name: PauseStop, About: "the holder SIGSTOPs its whole process (adapter and renewals too) for 1.6 leases there (pause-test's stop)", set: inSection(PauseStop, 1.6)},
		{Name: PauseStopWaiters, About: "the holder blocks for 2 leases, and the workers waiting for the lock meanwhile are SIGSTOPped as long", set: inSection(PauseStopWaiters, 2)},
		{Name: string(nemesis.KindKillWorker), About: "a random worker SIGKILLed (holding or not) and another started", set: fault(nemesis.KindKillWorker, 1.6)},
		{Name: string(nemesis.KindRestart), About: "one of the lock's servers SIGKILLed and restarted: a Redis node empty, a ZooKeeper server with its data", set: fault(nemesis.KindRestart, 1.2)},
		{Name: "restart-aof", About: "the same, every Redis node fsyncing each write first (appendfsync always)", set: func(s *Setup, l time.Duration) {
			fault(nemesis.KindRestart, 1.2)(s, l)
			s.NodeAOF = true
		}},
		{Name: string(nemesis.KindPauseNode), About: "one of the lock's servers SIGSTOPped for 1.6 leases", set: fault(nemesis.KindPauseNode, 1.6)},
		{Name: "partition", About: "a worker cut from the lock's servers (a minority of several) for 1.6 leases", set: fault(nemesis.KindPartitionRedis, 1.6)},
		{Name: "partition-majority", About: "a worker cut from a majority of the lock's servers", set: fault(nemesis.KindPartitionMajority, 1.6)},
		{Name: "delay", About: "every byte between a worker and the lock's servers 2 leases late, for 3 leases", set: func(s *Setup, l time.Duration) {
			fault(nemesis.KindDelayRedis, 3)(s, l)
			s.Delay = 2 * l
		}},
		{Name: "drop", About: "a worker's connections to the lock's servers reset", set: fault(nemesis.KindDropRedis, 1.6)},
		{Name: string(nemesis.KindClock), About: "a lock node's clock stepped forward by a lease, for 1.6 leases", set: fault(nemesis.KindClock, 1.6)},
	}
}

// CensusRows are the libraries of the census, each as its README shows and,
// where it offers one, carefully.
func CensusRows() []CensusRow {
	const long = 2 * time.Second // etcd's and ZooKeeper's leases and sessions
	node := func(script string) string { return "exec:node adapters/node-census/" + script }
	py := func(script string) string { return "exec:adapters/python/" + script }
	nodes := func(r CensusRow, n int) CensusRow { r.Store, r.Nodes = harness.AdapterOnRedisNodes, n; return r }
	on := func(store string, r CensusRow) CensusRow { r.Store, r.Lease = store, long; return r }
	const readme = "readme"
	return []CensusRow{
		{Library: "bsm/redislock v0.9.4", Usage: readme, Lock: "redislock"},
		{Library: "redsync v4.18.1", Usage: readme, Lock: "redsync"},
		{Library: "redsync v4.18.1", Usage: "careful: Extend before the write", Lock: "redsync-extend", Extend: true},
		{Library: "redlock 5.0.0-beta.2, 1 node", Usage: readme, Lock: "exec:node adapters/node/redlock.js --readme"},
		nodes(CensusRow{Library: "redlock 5.0.0-beta.2, 5 nodes", Usage: readme, Lock: "exec:node adapters/node/redlock.js --readme"}, 5),
		nodes(CensusRow{Library: "@sesamecare-oss/redlock 1.4.0, 5 nodes", Usage: readme, Lock: node("sesamecare-redlock.js")}, 5),
		nodes(CensusRow{Library: "@sesamecare-oss/redlock 1.4.0, 5 nodes", Usage: "careful: using() and its abort signal", Lock: node("sesamecare-redlock.js --careful")}, 5),
		{Library: "redis-semaphore 5.8.0 Mutex", Usage: readme, Lock: "exec:node adapters/node/redis-semaphore.js"},
		nodes(CensusRow{Library: "redis-semaphore 5.8.0 RedlockMutex, 3 nodes", Usage: readme, Lock: "exec:node adapters/node/redis-semaphore.js"}, 3),
		{Library: "simple-redis-mutex 3.0.0", Usage: "readme: lock() with failAfter", Lock: "exec:node adapters/node-simple-redis-mutex/main.js"},
		{Library: "simple-redis-mutex 3.0.0", Usage: "careful: tryLock, its fencing token at the write", Lock: "exec:node adapters/node-simple-redis-mutex/main.js --fencing --try", Guard: client.GuardFence},
		{Library: "redlock-universal 0.8.5", Usage: readme, Lock: node("redlock-universal.js")},
		{Library: "redlock-universal 0.8.5", Usage: "careful: using() and its abort signal", Lock: node("redlock-universal.js --careful")},
		{Library: "redis-lock 1.0.0", Usage: readme, Lock: node("redis-lock.js")},
		{Library: "node-redis-warlock 1.0.2", Usage: readme, Lock: node("warlock.js")},
		{Library: "node-redis-warlock 1.0.2", Usage: "careful: touch before the write", Lock: node("warlock.js --careful"), Extend: true},
		{Library: "@microfleet/ioredis-lock 6.0.1", Usage: readme, Lock: node("microfleet-ioredis-lock.js")},
		{Library: "redis-py 4.3.4 Lock (python3-redis)", Usage: readme, Lock: py("redis_py_lock.py")},
		{Library: "tooz 3.1.0 redis (python3-tooz)", Usage: "readme: start_heart", Lock: py("tooz_lock.py redis")},
		{Library: "tooz 3.1.0 redis (python3-tooz)", Usage: "careful: heartbeat() before the write", Lock: py("tooz_lock.py redis --careful"), Extend: true},
		{Library: "etcd client/v3 v3.7.3 concurrency.Mutex", Usage: readme, Lock: "etcd", Lease: long},
		on(harness.AdapterOnEtcd, CensusRow{Library: "etcd3 1.1.2 (npm) Lock", Usage: readme, Lock: node("etcd3.js")}),
		on(harness.AdapterOnEtcd, CensusRow{Library: "etcd3 1.1.2 (npm) Lock", Usage: "careful: the lease's time to live before the release", Lock: node("etcd3.js --careful")}),
		on(harness.AdapterOnEtcd, CensusRow{Library: "etcd3gw 2.0.0 Lock (python3-etcd3gw)", Usage: readme, Lock: py("etcd3gw_lock.py")}),
		on(harness.AdapterOnEtcd, CensusRow{Library: "etcd3gw 2.0.0 Lock (python3-etcd3gw)", Usage: "careful: refresh() before the write", Lock: py("etcd3gw_lock.py --careful"), Extend: true}),
		on(harness.AdapterOnEtcd, CensusRow{Library: "tooz 3.1.0 etcd3gw (python3-tooz)", Usage: "readme: start_heart", Lock: py("tooz_lock.py etcd3gw")}),
		on(harness.AdapterOnEtcd, CensusRow{Library: "tooz 3.1.0 etcd3gw (python3-tooz)", Usage: "careful: heartbeat() before the write", Lock: py("tooz_lock.py etcd3gw --careful"), Extend: true}),
		{Library: "go-zookeeper/zk v1.0.4 Lock", Usage: readme, Lock: "zookeeper", Lease: long},
		on(harness.AdapterOnZooKeeper, CensusRow{Library: "kazoo 2.8.0 Lock (python3-kazoo)", Usage: readme, Lock: py("kazoo_lock.py")}),
		on(harness.AdapterOnZooKeeper, CensusRow{Library: "tooz 3.1.0 zookeeper (python3-tooz)", Usage: readme, Lock: py("tooz_lock.py zookeeper")}),
		on(harness.AdapterOnZooKeeper, CensusRow{Library: "tooz 3.1.0 zookeeper (python3-tooz)", Usage: "careful: is_still_owner() before the write", Lock: py("tooz_lock.py zookeeper --careful"), Extend: true}),
	}
}

// censusSetups are the census's cells: every row under every probe that
// its lock's placement allows (a probe a row's store cannot take, the
// clock of an etcd server, is left out, and the table says why).
func censusSetups() []Setup {
	var out []Setup
	for _, r := range CensusRows() {
		for _, p := range Probes() {
			if s := r.setup(p); r.takes(p) && censusRefusal(s) == "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// takes says whether the row r is run under the probe p: a cut from a
// majority of one node is the cut from it, run once, as partition.
func (r CensusRow) takes(p Probe) bool {
	return p.Name != "partition-majority" || r.Nodes > 1
}

// setup is the row r under the probe p.
func (r CensusRow) setup(p Probe) Setup {
	lease := r.Lease
	if lease == 0 {
		lease = 500 * time.Millisecond
	}
	s := Setup{Scenario: CensusName, Version: r.Library, Side: r.Usage, Probe: p.Name, Lock: r.Lock, Lease: lease,
		Guard: r.Guard, Extend: r.Extend, Nodes: r.Nodes, AdapterStore: r.Store, Limit: 8 * lease}
	if lease >= time.Second {
		s.Limit = 6 * lease // etcd's and ZooKeeper's 2 s leases: fewer faults, in 12 s rather than 16
	}
	if s.Guard == "" {
		s.Guard = client.GuardNone
	}
	p.set(&s, lease)
	return s
}

// censusRefusal is why the run of s cannot be made, as the run's own
// validation says it; "" when it can. Only the probes of a store the fault
// cannot reach are refused: the census's own settings are checked whole.
func censusRefusal(s Setup) string {
	err := Plan{Base: harness.DefaultConfig(), Runs: 1}.Config(s, 0).Validate()
	if err == nil {
		return ""
	}
	return err.Error()
}

// slugWord turns a library's name and use into a run name's part.
func slugWord(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' {
			b.WriteRune(c)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// censusMarkdown renders the census: a row per library and use, a column
// per probe, each cell its runs' verdict with what decided it, linked to
// the run that decided it. The rows are the table's own, in their order
// (a grid collected later is shown as it was made); other rows of the
// table follow as a scenario table.
func (t *Table) censusMarkdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "`%s`\n\n", t.Command)
	fmt.Fprintf(&b, "%d workers, %s of work per section, %s a cell; each row's lease and run length are its own (below); %s; started %s.\n",
		t.Workers, duration(t.Work), plural(t.Runs, "run"), t.Versions, t.Started.UTC().Format(time.RFC3339))
	b.WriteString("A cell is its runs' verdict (✓ valid, ✗ invalid, ? unknown; k/n when a cell has several runs) and what decided it: " +
		"lost updates (`lost`), or the checks that failed: `lock-counter` (the counter's writes, other than a lost update), " +
		"`linear` (no order of the ops explains the reads), `lock-server` (the server's record contradicts what the lock said), " +
		"`availability` (a grant no one held, an orphan, longer than the lease), `fence-order` (a later grant with a smaller token); " +
		"`error` a run that could not be made (below). = the cut from a majority of one node, which is `partition`'s; " +
		"— a fault the lock's placement cannot take (below).\n")
	if !t.Complete() {
		b.WriteString("**Incomplete:** the census was cut short; cells with fewer runs are marked.\n")
	}
	probes := Probes()
	b.WriteString("\n| library | use | lease, run |")
	for _, p := range probes {
		b.WriteString(" " + p.Name + " |")
	}
	b.WriteString("\n| --- | --- | --- |" + strings.Repeat(" --- |", len(probes)) + "\n")
	refused := map[string]int{} // reason -> cells
	var errs []string
	var rest []Row
	for _, key := range t.censusKeys() {
		fmt.Fprintf(&b, "| %s | %s | %s, %s |", key.lib, key.use, duration(key.lease), duration(key.limit))
		for _, p := range probes {
			r, ok := t.censusRow(key, p.Name)
			why := ""
			if !ok && key.row != nil && key.row.takes(p) {
				why = censusRefusal(key.row.setup(p))
			}
			switch {
			case ok:
				text, failed := t.censusCell(r)
				errs = append(errs, failed...)
				b.WriteString(" " + text + " |")
			case key.row != nil && !key.row.takes(p):
				b.WriteString(" = |")
			case why != "":
				// One reason a kind of store: the lock's command left out.
				refused[strings.ReplaceAll(why, key.row.Lock, "the lock")]++
				b.WriteString(" — |")
			default:
				b.WriteString(" not run |")
			}
		}
		b.WriteString("\n")
	}
	for _, r := range t.Rows {
		if r.Probe == "" {
			rest = append(rest, r)
		}
	}
	b.WriteString("\nThe battery:\n\n")
	for _, p := range probes {
		fmt.Fprintf(&b, "- `%s`: %s.\n", p.Name, p.About)
	}
	if len(refused) > 0 {
		b.WriteString("\nCells left out (—), as the run refuses them:\n\n")
		for _, why := range slices.Sorted(maps.Keys(refused)) {
			fmt.Fprintf(&b, "- %s (%s)\n", why, plural(refused[why], "cell"))
		}
	}
	if len(errs) > 0 {
		b.WriteString("\nRuns that could not be made:\n\n")
		for _, e := range errs {
			fmt.Fprintf(&b, "- %s\n", e)
		}
	}
	if len(rest) > 0 {
		other := *t
		other.Rows = rest
		b.WriteString("\n")
		b.Write(other.scenarioMarkdown())
	}
	return b.Bytes()
}

// A censusKey is one library and use among a table's census rows.
type censusKey struct {
	lib, use     string
	lease, limit time.Duration
	row          *CensusRow // its declaration, when the census still has it
}

// censusKeys are the libraries and uses of t's census rows, in order.
func (t *Table) censusKeys() []censusKey {
	var keys []censusKey
	for _, r := range t.Rows {
		if r.Probe == "" || slices.ContainsFunc(keys, func(k censusKey) bool { return k.lib == r.Version && k.use == r.Side }) {
			continue
		}
		k := censusKey{lib: r.Version, use: r.Side, lease: r.Lease, limit: r.Limit}
		for _, c := range CensusRows() {
			if c.Library == r.Version && c.Usage == r.Side {
				k.row = &c
			}
		}
		keys = append(keys, k)
	}
	return keys
}

// censusRow is the row of library and use k under the probe named probe.
func (t *Table) censusRow(k censusKey, probe string) (Row, bool) {
	i := slices.IndexFunc(t.Rows, func(r Row) bool { return r.Probe == probe && r.Version == k.lib && r.Side == k.use })
	if i < 0 {
		return Row{}, false
	}
	return t.Rows[i], true
}

// censusCell is the cell of r: its runs' verdicts and what decided them,
// linked to the first run that was not valid (else the first); and the
// errors of the runs that could not be made.
func (t *Table) censusCell(r Row) (string, []string) {
	if len(r.Runs) == 0 {
		return "not run", nil
	}
	_, inv, u := r.Verdicts()
	var errs []string
	link := r.Runs[0].Path
	var why []string
	add := func(w string) {
		if !slices.Contains(why, w) {
			why = append(why, w)
		}
	}
	if lost := r.Range(lostMin); lost.Max > 0 {
		add(lost.String() + " lost")
	}
	for i := len(r.Runs) - 1; i >= 0; i-- { // the first not valid is linked
		if run := r.Runs[i]; run.Valid != checker.Valid.String() {
			link = run.Path
		}
	}
	for _, run := range r.Runs {
		if run.Error != "" {
			add("error")
			errs = append(errs, fmt.Sprintf("%s, %s, %s: %s", r.Version, r.Side, r.Probe, run.Error))
		}
		for _, name := range run.Failed {
			if name != checker.ModelLockCounter || run.LostMin == 0 {
				add(name)
			}
		}
	}
	word := "✓"
	switch {
	case inv > 0:
		word = "✗"
	case u > 0:
		word = "?"
	}
	if t.Runs > 1 || len(r.Runs) > 1 {
		n := inv
		if inv == 0 {
			n = u
		}
		if word == "✓" {
			n = len(r.Runs)
		}
		word = fmt.Sprintf("%s %d/%d", word, n, len(r.Runs))
		if inv > 0 && u > 0 {
			word += fmt.Sprintf(", ? %d", u)
		}
		if len(r.Runs) < t.Runs {
			word += fmt.Sprintf(" (of %d)", t.Runs)
		}
	}
	text := word
	if len(why) > 0 && !strings.HasPrefix(word, "✓") {
		sep := " "
		if t.Runs > 1 || len(r.Runs) > 1 {
			sep = ": " // after a count
		}
		text += sep + strings.Join(why, ", ")
	}
	if link == "" {
		return text, errs
	}
	return fmt.Sprintf("[%s](%s)", text, link), errs
}
