package harness

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// A faultKind is one kind of fault, declared once: the name --nemesis and
// the history give it, what it does, what it needs of the run, what else
// it asks of the configuration, and how it is built on what the run
// started. Each family of faults is declared in a file of its own
// (faults_*.go); faultKinds lists the families.
type faultKind struct {
	name  history.Keyword // a nemesis.Kind*
	about string          // what it does, for --help
	needs need
	check func(runPlan) error // what else it asks of c; nil for nothing
	build func(faultEnv) nemesis.Fault
}

// A need is what a kind of fault needs of the run it is in.
type need uint

const (
	// needLockServers: it acts on the lock's own servers (its Redis
	// nodes, etcd's), which the run then keeps apart from its own Redis
	// (whose clock stamps the history and whose counter hands out the
	// fences).
	needLockServers need = 1 << iota
	// needRedisNodes: those servers must be Redis nodes.
	needRedisNodes
	// needLockNodes: those servers must be the lock's nodes (topo.nodes):
	// Redis nodes, or the ZooKeeper ensemble's servers.
	needLockNodes
	// needFakeClock: the lock's nodes run under a clock it can step.
	needFakeClock
	// needRedisLinks, needPostgresLink: it acts on a worker's paths to
	// the lock's nodes (Redis's, or the ZooKeeper ensemble's servers), or
	// to PostgreSQL.
	needRedisLinks
	needPostgresLink
	// needProxy: it acts through a proxy in the path, even between hosts
	// of their own (a delay or a drop: this kernel has no netem).
	needProxy
	// needHosts: it acts on a worker's host (--hosts netns or ssh:FILE).
	needHosts
	// needReplica: the lock's Redis is a primary with a replica and
	// sentinels.
	needReplica
	// needRunRedis: it acts on the run's own Redis, which is then the
	// lock's.
	needRunRedis
	// sequenceable: it may be a part of a sequence (a+b), since its events
	// are :start and :stop, which say what a sequence's parts are.
	sequenceable
)

// The run's servers as the faults that pause and kill them name them: a
// random nemesis holds a server while one of them is under way.
const (
	serverRedis    = "redis"
	serverPostgres = "postgres"
)

// faultKinds are every kind of fault, family by family.
func faultKinds() []faultKind {
	return slices.Concat(pauseFaults(), killFaults(), nodeFaults(), linkFaults(), networkFaults())
}

// faultKindOf returns the kind called name.
func faultKindOf(name string) (faultKind, bool) {
	for _, k := range faultKinds() {
		if string(k.name) == name {
			return k, true
		}
	}
	return faultKind{}, false
}

// kindsWith names the kinds of fault that need all of n.
func kindsWith(n need) []string {
	var out []string
	for _, k := range faultKinds() {
		if k.needs&n == n {
			out = append(out, string(k.name))
		}
	}
	return out
}

// faultsAbout says what each kind of fault does, for --help.
func faultsAbout() string {
	var out []string
	for _, k := range faultKinds() {
		out = append(out, fmt.Sprintf("%s (%s)", k.name, k.about))
	}
	return strings.Join(out, ", ")
}

// NemesisNames are the faults Config.Nemesis may list.
func NemesisNames() []string { return kindsWith(0) }

// SequenceFaults are the kinds of fault that may be parts of a sequence
// (a+b).
func SequenceFaults() []string { return kindsWith(sequenceable) }

// FaultsAllowed are the kinds of fault c allows alone, whatever its own
// nemesis: those a --nemesis of that one kind passes validation with. What
// may go with what is for the validation of the whole.
func (c Config) FaultsAllowed() []string {
	var out []string
	for _, k := range NemesisNames() {
		try := c
		try.Nemesis, try.Plan = Nemesis(k), nil
		if try.runPlan().validateNemesis() == nil {
			out = append(out, k)
		}
	}
	return out
}

// Random is the Nemesis of every kind of fault a run allows, injected
// overlapping in time, as Jepsen's combined nemeses do: every Interval one
// begins, on a target (a worker, a lock node, a server) no other holds,
// and lasts Pause.
const Random Nemesis = "random"

// FaultNames returns the faults of c.Nemesis; none for "none", and for
// Random every kind c allows together (randomKinds).
func (c Config) FaultNames() []string {
	if c.Nemesis == Random {
		return c.randomKinds()
	}
	var out []string
	for _, f := range strings.Split(string(c.Nemesis), ",") {
		if f = strings.TrimSpace(f); f != "" && f != "none" {
			out = append(out, f)
		}
	}
	return out
}

// randomKinds are the kinds of fault Random injects in c: each that c
// allows with those before it, the faults of the lock's own servers before
// those of the run's Redis (which they exclude: the lock is then on a node
// of its own), and a failover after both (it excludes the former).
func (c Config) randomKinds() []string {
	var first, last []string
	for _, k := range faultKinds() {
		if k.needs&(needRunRedis|needReplica) != 0 {
			last = append(last, string(k.name))
		} else {
			first = append(first, string(k.name))
		}
	}
	var kinds []string
	for _, k := range append(first, last...) {
		try := c
		try.Nemesis, try.Plan = Nemesis(strings.Join(append(slices.Clone(kinds), k), ",")), nil
		if try.runPlan().validateNemesis() == nil {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// FaultParts are the faults of c.Nemesis (FaultNames), sequences split
// into their parts.
func (c Config) FaultParts() []string { return c.runPlan().parts }

// faultIn reports whether c's nemesis names any of names.
func (c runPlan) faultIn(names ...string) bool {
	return slices.ContainsFunc(c.parts, func(f string) bool { return slices.Contains(names, f) })
}

// DelayFaults are the fault kinds whose delay --delay sets: those named
// delay-*.
func DelayFaults() []string {
	return slices.DeleteFunc(NemesisNames(), func(k string) bool { return !strings.HasPrefix(k, "delay-") })
}

// delayed reports whether c has a fault that --delay sets.
func (c runPlan) delayed() bool { return c.faultIn(DelayFaults()...) }

// validateNemesis says what is wrong with c's faults, if anything.
func (c runPlan) validateNemesis() error {
	for _, f := range c.items {
		if err := validateItem(f); err != nil {
			return err
		}
	}
	for _, f := range c.parts {
		k, _ := faultKindOf(f)
		if err := c.validateFault(k); err != nil {
			return err
		}
	}
	return c.validatePlan()
}

// validateItem checks one item of --nemesis, as its parts: a fault, or a
// sequence of them that may make one.
func validateItem(parts []string) error {
	f := strings.Join(parts, "+")
	for i, p := range parts {
		k, ok := faultKindOf(p)
		switch {
		case !ok:
			return fmt.Errorf("--nemesis %q: want none or a comma-separated list of %s, or a sequence of them joined by + (partition-redis+clock)",
				p, strings.Join(NemesisNames(), ", "))
		case slices.Contains(parts[:i], p):
			return fmt.Errorf("--nemesis %q: %s twice in one sequence", f, p)
		case len(parts) > 1 && k.needs&sequenceable == 0:
			return fmt.Errorf("--nemesis %q: a sequence is made of %s, not %s", f, strings.Join(SequenceFaults(), ", "), p)
		}
	}
	// A sequence's events carry one set of nodes (its first part's where
	// two have them), which a replay aims every part at.
	links := kindsWith(needRedisLinks)
	if n := len(slices.DeleteFunc(slices.Clone(parts), func(p string) bool { return !slices.Contains(links, p) })); n > 1 {
		return fmt.Errorf("--nemesis %q: a sequence may hold one fault of the links to the lock's nodes (%s), not %d",
			f, strings.Join(links, ", "), n)
	}
	return nil
}

// validateFault checks what the fault kind k needs of c.
func (c runPlan) validateFault(k faultKind) error {
	switch {
	case c.Pause <= 0:
		return fmt.Errorf("--nemesis %s needs a positive --pause", k.name)
	case k.needs&needHosts != 0 && !c.onHosts():
		return fmt.Errorf("--nemesis %s cuts a worker's host off from the network: it needs --hosts netns (as root) or ssh:FILE", k.name)
	case k.needs&needRedisNodes != 0 && !c.redisLock():
		return fmt.Errorf("--nemesis %s acts on the lock's Redis nodes: --lock %s is not kept on Redis", c.Nemesis, c.Lock)
	case k.needs&(needLockNodes|needRedisLinks) != 0 && !c.redisLock() && !c.onZooKeeper():
		return fmt.Errorf("--nemesis %s acts on the lock's nodes: --lock %s is not kept on Redis or ZooKeeper", c.Nemesis, c.Lock)
	case k.needs&needLockServers != 0 && !c.redisLock() && c.lock.Store != client.OnEtcd && !c.onZooKeeper():
		return fmt.Errorf("--nemesis %s acts on the lock's own servers: --lock %s keeps its lock on none", k.name, c.Lock)
	case k.needs&(needLockServers|needRedisLinks|needRunRedis) != 0 && c.onSentinel():
		return fmt.Errorf("--nemesis %s acts on the lock's own servers, which --adapter-store %s keeps behind sentinels: only failover acts on them", k.name, AdapterOnSentinel)
	case k.needs&needRunRedis != 0 && (c.lockNodes() > 0 || c.needs&needReplica != 0 || c.onEtcd() || c.onZooKeeper()):
		return fmt.Errorf("--nemesis %s acts on the run's Redis, which holds the history's clock and the fences, not the lock: the lock is on nodes of its own here (use restart)", c.Nemesis)
	case k.needs&needRunRedis != 0 && c.lock.Store == client.OnPostgres:
		return fmt.Errorf("--nemesis %s acts on the run's Redis, which holds the history's clock and the fences, not the lock: --lock %s is kept on PostgreSQL (use pause-postgres, kill-postgres)", k.name, c.Lock)
	case k.needs&needReplica != 0 && c.needs&(needLockServers|needRedisLinks) != 0:
		return fmt.Errorf("--nemesis failover cannot go with faults of the lock's other nodes (%s)", c.Nemesis)
	}
	if k.check != nil {
		return k.check(c)
	}
	return nil
}

// validatePlan checks a schedule to replay against c.
func (c runPlan) validatePlan() error {
	names := c.FaultNames()
	for _, k := range c.Plan.Kinds() {
		if !slices.Contains(names, k) {
			return fmt.Errorf("the schedule holds %s faults, which --nemesis %q does not name", k, c.Nemesis)
		}
	}
	for i, f := range c.Plan {
		if w, ok := f.Worker.Index(); ok && w >= c.Workers {
			return fmt.Errorf("the schedule's fault %d hits worker %d, but the run has %d (--workers)", i+1, w, c.Workers)
		}
	}
	return nil
}

// A faultEnv is what a fault is built on: the run's configuration, its
// servers and topology, its workers, and the freezer that resumes every
// process a fault stopped.
type faultEnv struct {
	cfg     runPlan
	env     *env
	workers *workerSet
	freezer *nemesis.Freezer
}

// pid is the PID of s, a throwaway server, or given, of one given by URL.
func pid(s *servers.Server, given int) func() int {
	if s != nil {
		return s.ProcessID
	}
	return func() int { return given }
}

// faults builds the nemesis's faults that cfg names; a sequence's parts
// begin --pause/2 apart.
func (e *env) faults(cfg runPlan, ws *workerSet, fz *nemesis.Freezer) []nemesis.Fault {
	fe := faultEnv{cfg: cfg, env: e, workers: ws, freezer: fz}
	var fs []nemesis.Fault
	for _, item := range cfg.items {
		var parts []nemesis.Fault
		for _, p := range item {
			if k, ok := faultKindOf(p); ok {
				parts = append(parts, k.build(fe))
			}
		}
		switch {
		case len(parts) == 1:
			fs = append(fs, parts[0])
		case len(parts) > 1:
			fs = append(fs, &nemesis.Sequence{Parts: parts, Step: cfg.Pause / 2})
		}
	}
	return fs
}
