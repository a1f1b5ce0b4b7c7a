package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/topology"
)

// hostsSSH begins the Hosts of machines reached over SSH: "ssh:" and the
// inventory file's path.
const hostsSSH = "ssh:"

// inventory is the path of --hosts ssh:FILE's inventory; "" for other
// hosts.
func (c Config) inventory() string {
	f, ok := strings.CutPrefix(string(c.Hosts), hostsSSH)
	if !ok {
		return ""
	}
	return f
}

// onHosts reports whether the workers and the servers under test run on
// hosts of their own: --hosts netns or ssh:FILE.
func (c Config) onHosts() bool { return c.Hosts == HostsNetns || c.inventory() != "" }

// sshNodes are the nodes of --hosts ssh:FILE, connected, by role: the
// placement of a run over SSH.
type sshNodes struct {
	cfg                     runPlan
	inv                     topology.Inventory
	all                     []*topology.SSHHost
	workers, redis, pgNodes []*topology.SSHHost
	etcdNodes, zookeeper    []*topology.SSHHost
	sentinel                []*topology.SSHHost
	copies                  chan error // the copies' errors, joined, once they are done
	stopCopies              context.CancelFunc
}

// sshSetupTimeout bounds the connections to the nodes and the copies of
// the binary.
const sshSetupTimeout = 2 * time.Minute

// startSSH reads the inventory of --hosts ssh:FILE, connects to each of
// its nodes (removing what ended runs left there) and copies this binary
// to the workers' nodes; nil without it. The caller closes the nodes
// after every server on them has stopped.
func startSSH(ctx context.Context, cfg runPlan, setup *setupLog) (_ *sshNodes, err error) {
	file := cfg.inventory()
	if file == "" {
		return nil, nil
	}
	inv, err := topology.ReadInventory(file)
	if err != nil {
		return nil, setupErrorf("--hosts %s: %w", cfg.Hosts, err)
	}
	if err := cfg.checkRoles(inv); err != nil {
		return nil, err
	}
	if err := checkCuts(cfg, inv); err != nil {
		return nil, err
	}
	if err := checkReplicated(cfg, inv); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, sshSetupTimeout)
	defer cancel()
	s := &sshNodes{cfg: cfg, inv: inv, all: make([]*topology.SSHHost, len(inv.Nodes))}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
		}
	}()
	tag := topology.NewRunTag()
	if err := s.dial(ctx, tag, setup); err != nil {
		return s, setupErrorf("--hosts %s: %w", cfg.Hosts, err)
	}
	if err := s.preflight(ctx, cfg); err != nil {
		return s, setupErrorf("--hosts %s: %w", cfg.Hosts, err)
	}
	setup.printf("every node has what the run needs of it")
	// The copies go on while the servers start (waitCopies).
	s.copies = make(chan error, 1)
	cctx, cancelCopies := context.WithTimeout(context.WithoutCancel(ctx), sshSetupTimeout)
	s.stopCopies = cancelCopies
	go func() {
		errs := make([]error, len(inv.Nodes))
		var wg sync.WaitGroup
		for i, n := range inv.Nodes {
			if n.Has(topology.RoleWorker) {
				wg.Go(func() {
					if errs[i] = copySelf(cctx, s.all[i]); errs[i] == nil {
						setup.printf("hiatus copied to node %s", n.Name)
					}
				})
			}
		}
		wg.Wait()
		s.copies <- errors.Join(errs...)
	}()
	for i, n := range inv.Nodes {
		h := s.all[i]
		if n.Has(topology.RoleWorker) {
			s.workers = append(s.workers, h)
		}
		if n.Has(topology.RoleRedis) {
			s.redis = append(s.redis, h)
		}
		if n.Has(topology.RolePostgres) {
			s.pgNodes = append(s.pgNodes, h)
		}
		if n.Has(topology.RoleEtcd) {
			s.etcdNodes = append(s.etcdNodes, h)
		}
		if n.Has(topology.RoleZooKeeper) {
			s.zookeeper = append(s.zookeeper, h)
		}
		if n.Has(topology.RoleSentinel) {
			s.sentinel = append(s.sentinel, h)
		}
	}
	return s, nil
}

// checkRoles refuses an inventory in which no node holds a role the run
// needs.
func (c runPlan) checkRoles(inv topology.Inventory) error {
	need := []struct {
		r    topology.Role
		want bool
		what string
	}{
		{topology.RoleWorker, true, "the workers"},
		{topology.RoleRedis, c.lockNodes() > 0, "the lock's Redis nodes"},
		{topology.RoleRedis, c.replicated(), "the replicated Redis's primary and replica"},
		{topology.RoleSentinel, c.replicated(), "the replicated Redis's sentinels"},
		{topology.RolePostgres, c.PostgresURL == "", "PostgreSQL (or give --postgres-url)"},
		{topology.RoleEtcd, c.onEtcd(), "etcd, which --lock " + c.Lock + " is kept on"},
		{topology.RoleZooKeeper, c.onZooKeeper(), "the ZooKeeper servers, which --lock " + c.Lock + " is kept on"},
	}
	for _, n := range need {
		if n.want && len(inv.With(n.r)) == 0 {
			return setupErrorf("--hosts %s: no node has the role %s, for %s", c.Hosts, n.r, n.what)
		}
	}
	return nil
}

// dial connects to every node at once. The first node that fails ends
// the others' set-up, so that its error is told at once, not after theirs
// (8 s of a sweep and a watchdog on nodes that share a slow start-up file);
// their being cut short is not told. What they made of the run goes with
// their connections, as a run's does.
func (s *sshNodes) dial(ctx context.Context, tag string, setup *setupLog) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	errs := make([]error, len(s.inv.Nodes))
	var wg sync.WaitGroup
	for i, n := range s.inv.Nodes {
		wg.Go(func() {
			if s.all[i], errs[i] = topology.DialSSH(ctx, n, tag); errs[i] != nil {
				stop(errs[i])
				return
			}
			setup.printf("node %s (%s): connected, what ended runs left there removed", n.Name, n.IP())
		})
	}
	wg.Wait()
	first := context.Cause(ctx)
	if first == nil {
		return nil
	}
	told := []error{first}
	for _, err := range errs {
		if err != nil && err != first && !errors.Is(err, context.Canceled) {
			told = append(told, err) // a failure of its own, not the cut
		}
	}
	return errors.Join(told...)
}

// preflight asks every node at once, through its watchdog (no session of
// its own: a node's start-up files may take a second a session), for what
// its roles need in this run, before anything starts: one error for each
// thing missing, naming the node and what to do, rather than the first
// server's failure to start seconds in. A node that does not answer is
// asked no more (its watchdog's connection is gone with its answer).
func (s *sshNodes) preflight(ctx context.Context, cfg runPlan) error {
	errs := make([][]error, len(s.inv.Nodes))
	var wg sync.WaitGroup
	for i, n := range s.inv.Nodes {
		wg.Go(func() {
			for _, need := range cfg.nodeNeeds(s.inv, n) {
				if ctx.Err() != nil {
					errs[i] = append(errs[i], ctx.Err())
					return
				}
				check := fmt.Sprintf(`[ -n "$( { %s; } 2>/dev/null )" ]`, need.Script)
				switch err := s.all[i].Do(check); {
				case errors.Is(err, topology.ErrExitStatus):
					errs[i] = append(errs[i], fmt.Errorf("node %s lacks %s (%s)", n.Name, need.What, need.Hint))
				case err != nil:
					errs[i] = append(errs[i], fmt.Errorf("ask for %s: %w", need.What, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(slices.Concat(errs...)...)
}

// nodeNeeds are what node n of inv must have for cfg's run: the servers'
// of its roles that the run puts there (servers.RedisNeeds,
// servers.PostgresNeeds), and, on a worker's node that a partition cuts,
// iptables as root.
func (c runPlan) nodeNeeds(inv topology.Inventory, n topology.Node) []servers.Need {
	var needs []servers.Need
	on := func(r topology.Role, count int) bool {
		nodes := inv.With(r)
		for i := range min(count, len(nodes)) {
			if spread(nodes, i).Name == n.Name {
				return true
			}
		}
		return false
	}
	if len(c.nodeCuts(inv)) > 0 && on(topology.RoleWorker, c.Workers) {
		needs = append(needs, iptablesNeed("a partition cuts the node's links in its firewall"))
	}
	if on(topology.RoleRedis, c.lockNodes()) {
		needs = append(needs, servers.RedisNeeds(c.needs&needFakeClock != 0)...)
	}
	if c.PostgresURL == "" && on(topology.RolePostgres, 1) {
		needs = append(needs, servers.PostgresNeeds()...)
	}
	if c.onEtcd() && on(topology.RoleEtcd, 1) {
		needs = append(needs, servers.EtcdNeeds()...)
	}
	if on(topology.RoleZooKeeper, c.zkNodes()) {
		needs = append(needs, servers.ZooKeeperNeeds()...)
	}
	if c.replicated() && (on(topology.RoleRedis, replicatedNodes) || on(topology.RoleSentinel, replicatedSentinels)) {
		needs = append(needs, servers.RedisNeeds(false)...)
	}
	if c.faultIn(string(nemesis.KindFailover)) && on(topology.RoleRedis, replicatedNodes) {
		needs = append(needs, iptablesNeed("a failover cuts the primary's node off in its firewall"))
	}
	return needs
}

// iptablesNeed is a node's need of iptables, as root, for why.
func iptablesNeed(why string) servers.Need {
	return servers.Need{What: "iptables, as root (" + why + ")",
		Script: `[ "$(id -u)" = 0 ] && command -v iptables`, Hint: "on Debian: apt-get install iptables; log in as root (the inventory's user)"}
}

// copySelf copies this binary to the run's directory on h, for its workers.
func copySelf(ctx context.Context, h *topology.SSHHost) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	f, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("copy own binary: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("copy own binary: %w", err)
	}
	return h.Write(ctx, workerBin(h), 0o755, f, st.Size())
}

// waitCopies waits until this binary is on every worker's node.
func (s *sshNodes) waitCopies(ctx context.Context) error {
	select {
	case err := <-s.copies:
		s.copies <- err // for the next caller
		if err != nil {
			return setupErrorf("copy hiatus to the workers' nodes: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close ends the run on every node it reached: what it started there
// dies, its rules and files go.
func (s *sshNodes) close() error {
	if s.copies != nil {
		s.stopCopies()
		<-s.copies // a copy under way must not write into what Close removes
	}
	var errs []error
	for _, h := range s.all {
		if h != nil {
			errs = append(errs, h.Close())
		}
	}
	return errors.Join(errs...)
}

// workerBin is the binary a worker on h runs: the copy of this one there.
func workerBin(h *topology.SSHHost) string { return h.Dir() + "/hiatus" }
