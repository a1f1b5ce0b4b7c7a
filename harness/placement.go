package harness

import (
	"context"
	"fmt"

	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/topology"
)

// A placement is where a run's servers and workers go: this machine
// (local), hosts of a test network of its own (--hosts netns), or nodes
// reached over SSH (--hosts ssh:FILE). The run starts each server and puts
// each worker through it, and cuts, signals and steps them through the
// hosts it returns, alike on all three: newPlacement is where the run
// tells them apart. Each method's host is nil for this machine, and what
// tells where a server went (the run's log) is its caller's.
type placement interface {
	// control is the address the hosts reach this machine at, and this
	// machine as a host they can be cut from; "" and nil without hosts.
	control() (string, topology.Host)
	// postgres is the host of a throwaway PostgreSQL.
	postgres() topology.Host
	// notices are what the placement changes of the experiment, which
	// the run is to say (workers a cut cuts together).
	notices() []string
	// redisNode starts the lock's Redis node i with opt.
	redisNode(ctx context.Context, i int, opt servers.RedisOptions) (*servers.Server, topology.Host, error)
	// zooKeeper starts an ensemble of n servers, and says each's host.
	zooKeeper(ctx context.Context, n int) (*servers.ZooKeeper, []topology.Host, error)
	// etcd starts the etcd lock's server.
	etcd(ctx context.Context) (*servers.Server, topology.Host, error)
	// replicated starts a replicated Redis, and says where each of its
	// servers went.
	replicated(ctx context.Context) (*servers.Replicated, []hostRole, error)
	// worker is where the worker in slot runs.
	worker(ctx context.Context, slot int) (topology.Host, error)
	close() error
}

// newPlacement makes the placement cfg.Hosts names: for netns its test
// network, for ssh:FILE the nodes, connected and checked (startSSH).
func newPlacement(ctx context.Context, cfg runPlan, setup *setupLog) (placement, error) {
	switch {
	case cfg.Hosts == HostsNetns:
		return startNetns(ctx, cfg)
	case cfg.inventory() != "":
		return startSSH(ctx, cfg, setup)
	}
	return localPlacement{}, nil
}

// localPlacement is everything on this machine.
type localPlacement struct{}

func (localPlacement) control() (string, topology.Host) { return "", nil }
func (localPlacement) postgres() topology.Host          { return nil }
func (localPlacement) notices() []string                { return nil }
func (localPlacement) close() error                     { return nil }

func (localPlacement) redisNode(ctx context.Context, _ int, opt servers.RedisOptions) (*servers.Server, topology.Host, error) {
	s, err := servers.StartRedisWith(ctx, opt)
	return s, nil, err
}

func (localPlacement) zooKeeper(ctx context.Context, n int) (*servers.ZooKeeper, []topology.Host, error) {
	z, err := servers.StartZooKeeperOn(ctx, make([]servers.Host, n))
	return z, nil, err
}

func (localPlacement) etcd(ctx context.Context) (*servers.Server, topology.Host, error) {
	s, err := servers.StartEtcdOn(ctx, nil)
	return s, nil, err
}

func (localPlacement) replicated(ctx context.Context) (*servers.Replicated, []hostRole, error) {
	r, err := servers.StartReplicated(ctx, nil)
	return r, nil, err
}

func (localPlacement) worker(context.Context, int) (topology.Host, error) { return nil, nil }

// netnsPlacement is the test network of --hosts netns: a host of its own for each
// worker and each server.
type netnsPlacement struct {
	net *topology.Net
	pg  *topology.NetnsHost // PostgreSQL's; nil when it is given by URL
}

// startNetns makes the test network, and PostgreSQL's host when it is to
// be a throwaway.
func startNetns(ctx context.Context, cfg runPlan) (*netnsPlacement, error) {
	n, err := topology.NewNet(ctx, "") // a name of its own: runs of one process may overlap
	if err != nil {
		return nil, setupErrorf("--hosts netns: %w", err)
	}
	p := &netnsPlacement{net: n}
	if cfg.PostgresURL != "" {
		return p, nil
	}
	if p.pg, err = n.AddHost(ctx, "pg"); err != nil {
		n.Close()
		return nil, setupErrorf("--hosts netns: PostgreSQL's host: %w", err)
	}
	return p, nil
}

func (p *netnsPlacement) control() (string, topology.Host) { return p.net.Root().IP(), p.net.Root() }
func (p *netnsPlacement) notices() []string                { return nil }

// close removes the network, after every server on it has stopped.
func (p *netnsPlacement) close() error { return p.net.Close() }

func (p *netnsPlacement) postgres() topology.Host {
	if p.pg == nil {
		return nil // not a nil pointer in an interface
	}
	return p.pg
}

// host adds a host called name, for what.
func (p *netnsPlacement) host(ctx context.Context, name, what string) (*topology.NetnsHost, error) {
	h, err := p.net.AddHost(ctx, name)
	if err != nil {
		return nil, setupErrorf("--hosts netns: the host of %s: %w", what, err)
	}
	return h, nil
}

func (p *netnsPlacement) redisNode(ctx context.Context, i int, opt servers.RedisOptions) (*servers.Server, topology.Host, error) {
	h, err := p.host(ctx, fmt.Sprintf("n%d", i), fmt.Sprintf("the lock's Redis node %d", i))
	if err != nil {
		return nil, nil, err
	}
	opt.Host = h
	s, err := servers.StartRedisWith(ctx, opt)
	return s, h, err
}

func (p *netnsPlacement) zooKeeper(ctx context.Context, n int) (*servers.ZooKeeper, []topology.Host, error) {
	hosts := make([]servers.Host, n)
	var on []topology.Host
	for i := range hosts {
		h, err := p.host(ctx, fmt.Sprintf("zk%d", i), zkServer(i))
		if err != nil {
			return nil, nil, err
		}
		hosts[i], on = h, append(on, h)
	}
	z, err := servers.StartZooKeeperOn(ctx, hosts)
	return z, on, err
}

func (p *netnsPlacement) etcd(ctx context.Context) (*servers.Server, topology.Host, error) {
	h, err := p.host(ctx, "etcd", etcdServer)
	if err != nil {
		return nil, nil, err
	}
	s, err := servers.StartEtcdOn(ctx, h)
	return s, h, err
}

func (p *netnsPlacement) replicated(ctx context.Context) (*servers.Replicated, []hostRole, error) {
	var on []hostRole
	r, err := servers.StartReplicated(ctx, func(name, what string) (*topology.NetnsHost, error) {
		h, err := p.host(ctx, name, what)
		if err == nil {
			on = append(on, hostRole{h, what})
		}
		return h, err
	})
	return r, on, err
}

func (p *netnsPlacement) worker(ctx context.Context, slot int) (topology.Host, error) {
	h, err := p.host(ctx, fmt.Sprintf("w%d", slot), fmt.Sprintf("worker %d", slot))
	if err != nil {
		return nil, err // not a nil pointer in an interface
	}
	return h, nil
}
