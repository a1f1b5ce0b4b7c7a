package harness

import (
	"context"
	"fmt"

	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/topology"
)

// The placement of a run over SSH: each server on the nodes of its role,
// from the node's own packages, the lock's nodes and the workers spread
// over theirs in turn.

func (s *sshNodes) control() (string, topology.Host) {
	return s.inv.Control, topology.NewPeer("control", s.inv.Control)
}

func (s *sshNodes) notices() []string { return sharedCuts(s.cfg, s.inv) }

// postgres is PostgreSQL's node; nil when it is given by URL.
func (s *sshNodes) postgres() topology.Host {
	if s.cfg.PostgresURL != "" {
		return nil
	}
	return s.pgNodes[0]
}

func (s *sshNodes) redisNode(ctx context.Context, i int, opt servers.RedisOptions) (*servers.Server, topology.Host, error) {
	h := spread(s.redis, i)
	srv, err := servers.StartRedisOnNode(ctx, h, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("on node %s: %w", h.Name(), err)
	}
	return srv, h, nil
}

func (s *sshNodes) zooKeeper(ctx context.Context, n int) (*servers.ZooKeeper, []topology.Host, error) {
	var nodes []servers.Node
	var on []topology.Host
	for i := range n {
		h := spread(s.zookeeper, i)
		nodes, on = append(nodes, h), append(on, h)
	}
	z, err := servers.StartZooKeeperOnNodes(ctx, nodes)
	return z, on, err
}

func (s *sshNodes) etcd(ctx context.Context) (*servers.Server, topology.Host, error) {
	srv, err := servers.StartEtcdOnNode(ctx, s.etcdNodes[0])
	return srv, s.etcdNodes[0], err
}

// replicated starts the primary and the replica on the first two redis
// nodes, and the sentinels on the sentinel nodes in turn (checkReplicated
// has seen that a failover can cut them apart).
func (s *sshNodes) replicated(ctx context.Context) (*servers.Replicated, []hostRole, error) {
	var rs, ss []servers.CutNode
	var on []hostRole
	for i := range replicatedNodes {
		h := spread(s.redis, i)
		rs, on = append(rs, h), append(on, hostRole{h, replicatedNode(i)})
	}
	for i := range replicatedSentinels {
		h := spread(s.sentinel, i)
		ss, on = append(ss, h), append(on, hostRole{h, sentinelName(i)})
	}
	r, err := servers.StartReplicatedOnNodes(ctx, rs, ss)
	return r, on, err
}

// worker is the worker's node, once the copies of hiatus are there.
func (s *sshNodes) worker(ctx context.Context, slot int) (topology.Host, error) {
	if err := s.waitCopies(ctx); err != nil {
		return nil, err
	}
	return spread(s.workers, slot), nil
}
