package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hiatus-dev/hiatus/topology"
	"github.com/redis/go-redis/v9"
)

// MasterName is the replicated Redis's name among its sentinels.
const MasterName = "hiatus"

// A Replicated is a replicated Redis for the failover fault: a primary
// and a replica, replicating asynchronously, and three sentinels (quorum
// two) that promote the replica when the primary stops answering them.
// The nemesis isolates a node from the sentinels and the other node while
// the workers still reach it: the primary on the wrong side of a
// partition, which takes locks that are never replicated while the other
// side elects a new one. On this machine each node is reached by the
// sentinels and the other node through a link of its own (it announces the
// link's address), which the nemesis cuts; on hosts of their own (--hosts
// netns), everyone dials the node's host, and the cut is a rule in its
// filter.
type Replicated struct {
	nodes     []*Server
	links     []*topology.Link // links[i] is how sentinels and replicas reach nodes[i]; none on hosts
	hosts     []topology.Host  // hosts[i] is nodes[i]'s, then the sentinels'; none on this machine
	sentinels []*Server
}

// StartReplicated starts the primary, the replica and the sentinels, each
// on the host newHost makes for it (name, and what it is for the run's
// log), or on this machine when newHost is nil, and waits until the
// sentinels know the replica and one another: a failover is possible from
// then on.
func StartReplicated(ctx context.Context, newHost func(name, what string) (*topology.NetnsHost, error)) (_ *Replicated, err error) {
	r := &Replicated{}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	host := func(name, what string) (Host, error) {
		if newHost == nil {
			return nil, nil
		}
		h, err := newHost(name, what)
		if err != nil {
			return nil, err
		}
		r.hosts = append(r.hosts, h)
		return h, nil
	}
	for i := range 2 {
		h, err := host(fmt.Sprintf("r%d", i), fmt.Sprintf("the replicated Redis's node %d", i))
		if err != nil {
			return nil, err
		}
		opt := RedisOptions{Host: h}
		if i == 1 && h != nil {
			opt.ReplicaOf = r.addr(0) // on this machine, link tells it, through node 0's link
		}
		s, err := StartRedisWith(ctx, opt)
		if err != nil {
			return nil, fmt.Errorf("the lock's Redis node %d: %w", i+1, err)
		}
		r.nodes = append(r.nodes, s)
		if h == nil {
			if err := r.link(ctx, i); err != nil {
				return nil, err
			}
		}
	}
	for i := range 3 {
		h, err := host(fmt.Sprintf("s%d", i), fmt.Sprintf("sentinel %d", i))
		if err != nil {
			return nil, err
		}
		s, err := StartSentinel(ctx, SentinelOptions{Master: MasterName, Addr: r.addr(0), Quorum: 2, Host: h})
		if err != nil {
			return nil, fmt.Errorf("sentinel %d: %w", i+1, err)
		}
		r.sentinels = append(r.sentinels, s)
	}
	if err := r.awaitReady(ctx); err != nil {
		return nil, fmt.Errorf("the replicated Redis: %v", err)
	}
	return r, nil
}

// A CutNode is a node a server runs on that the nemesis can cut off.
type CutNode interface {
	Node
	topology.Host
}

// StartReplicatedOnNodes starts the primary on nodes[0], the replica on
// nodes[1] and a sentinel on each of sentinels, from the nodes' own
// redis-server, as StartReplicated does on hosts: a failover cuts the
// primary's node off from the others' in its firewall. The caller sees to
// it that the primary's and the replica's nodes are apart from each other
// and from the sentinels': a node cannot be cut from itself.
func StartReplicatedOnNodes(ctx context.Context, nodes, sentinels []CutNode) (_ *Replicated, err error) {
	if len(nodes) != 2 || len(sentinels) != 3 {
		return nil, fmt.Errorf("the replicated Redis: %d nodes and %d sentinels, want 2 and 3", len(nodes), len(sentinels))
	}
	r := &Replicated{}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	for i, n := range nodes {
		var opt RedisOptions
		if i == 1 {
			opt.ReplicaOf = r.addr(0)
		}
		s, err := StartRedisOnNode(ctx, n, opt)
		if err != nil {
			return nil, fmt.Errorf("the lock's Redis node %d, on node %s: %w", i+1, n.Name(), err)
		}
		r.nodes, r.hosts = append(r.nodes, s), append(r.hosts, n)
	}
	for i, n := range sentinels {
		s, err := StartSentinelOnNode(ctx, n, SentinelOptions{Master: MasterName, Addr: r.addr(0), Quorum: 2})
		if err != nil {
			return nil, fmt.Errorf("sentinel %d, on node %s: %w", i+1, n.Name(), err)
		}
		r.sentinels, r.hosts = append(r.sentinels, s), append(r.hosts, n)
	}
	if err := r.awaitReady(ctx); err != nil {
		return nil, fmt.Errorf("the replicated Redis: %v", err)
	}
	return r, nil
}

// link puts a link in front of node i, has it announce the link's address
// as its own, and makes node 1 a replica of node 0 through node 0's link.
func (r *Replicated) link(ctx context.Context, i int) error {
	s := r.nodes[i]
	l, err := topology.Listen(s.Addr)
	if err != nil {
		return fmt.Errorf("a link to Redis node %d: %v", i+1, err)
	}
	r.links = append(r.links, l)
	host, port, _ := net.SplitHostPort(l.Addr())
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	err = c.ConfigSet(ctx, "replica-announce-ip", host).Err()
	if err == nil {
		err = c.ConfigSet(ctx, "replica-announce-port", port).Err()
	}
	if err == nil && i == 1 {
		h, p, _ := net.SplitHostPort(r.addr(0))
		err = c.ReplicaOf(ctx, h, p).Err()
	}
	if err != nil {
		return fmt.Errorf("Redis node %d: %v", i+1, err)
	}
	return nil
}

// addr is where the sentinels and the other node reach node i: its link,
// or its host.
func (r *Replicated) addr(i int) string {
	if r.links != nil {
		return r.links[i].Addr()
	}
	return r.nodes[i].Addr
}

// awaitReady polls every 50 ms, for 30 s at most, until every sentinel
// knows the replica and the two other sentinels.
func (r *Replicated) awaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		if last = r.ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sentinels not ready in 30 s: %w", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *Replicated) ready(ctx context.Context) error {
	for _, s := range r.sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		replicas, err := c.Replicas(ctx, MasterName).Result()
		var others []map[string]string
		if err == nil {
			others, err = c.Sentinels(ctx, MasterName).Result()
		}
		c.Close()
		switch {
		case err != nil:
			return err
		case len(replicas) < 1 || len(others) < 2:
			return fmt.Errorf("sentinel %s knows %d replicas and %d other sentinels", s.URL, len(replicas), len(others))
		}
	}
	return nil
}

// SentinelAddrs are where clients ask for the primary.
func (r *Replicated) SentinelAddrs() []string {
	var out []string
	for _, s := range r.sentinels {
		out = append(out, s.Addr)
	}
	return out
}

// Direct maps each node's link address, which the sentinels give as the
// primary's, to the node itself: the workers are on the primary's side of
// the partition the nemesis makes. On hosts, the address is the node's:
// nil.
func (r *Replicated) Direct() map[string]string {
	if r.links == nil {
		return nil
	}
	m := map[string]string{}
	for i, l := range r.links {
		m[l.Addr()] = r.nodes[i].Addr
	}
	return m
}

// primary returns the node the sentinels name the primary now: the one
// named by the sentinel whose configuration is the newest (the highest
// config epoch). The sentinel that led a failover switches at once; the
// others learn of it from its hellos, every 2 s, so that one sentinel
// alone may still name the old primary well after the replica was
// promoted: asking the first alone, TestRecordReconciles's
// adapter-sentinel-failover took the first 3 s failover of 9 runs of 9 for
// none, though the next failover of each began on the promoted node.
func (r *Replicated) primary(ctx context.Context) (int, error) {
	var at string
	epoch := int64(-1)
	var errs []error
	for _, s := range r.sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		m, err := c.Master(ctx, MasterName).Result()
		c.Close()
		var e int64
		if err == nil {
			e, err = strconv.ParseInt(m["config-epoch"], 10, 64)
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("ask sentinel %s for the primary: %w", s.Addr, err))
		case e > epoch:
			epoch, at = e, net.JoinHostPort(m["ip"], m["port"])
		}
	}
	if at == "" {
		return -1, errors.Join(errs...)
	}
	for i := range r.nodes {
		if r.addr(i) == at {
			return i, nil
		}
	}
	return -1, fmt.Errorf("the sentinels name %s the primary, no node of the run", at)
}

// Close stops every server of r, and its links.
func (r *Replicated) Close() {
	for _, s := range r.sentinels {
		s.Stop()
	}
	for _, l := range r.links {
		l.Close()
	}
	for _, s := range r.nodes {
		s.Stop()
	}
}

// Primary implements nemesis.Replicated.
func (r *Replicated) Primary(ctx context.Context) (int, error) { return r.primary(ctx) }

// Isolate implements nemesis.Replicated: node's link, by which the
// sentinels and the other node reach it, is cut; on hosts, node's host
// drops what crosses between it and theirs.
func (r *Replicated) Isolate(ctx context.Context, node int) error {
	if r.hosts == nil {
		r.links[node].Cut()
		return nil
	}
	return r.hosts[node].Isolate(ctx, r.peers(node)...)
}

// peers are the hosts of every server of r but node.
func (r *Replicated) peers(node int) []topology.Host {
	var out []topology.Host
	for i, h := range r.hosts {
		if i != node {
			out = append(out, h)
		}
	}
	return out
}

// Rejoin implements nemesis.Replicated.
func (r *Replicated) Rejoin(ctx context.Context, node int) error {
	if r.hosts == nil {
		r.links[node].Heal()
		return nil
	}
	return r.hosts[node].Heal(ctx, r.peers(node)...)
}

// NodeURLs are the nodes' own URLs, the first primary first: where a
// recorder of their commands dials them, past the links the nemesis cuts.
func (r *Replicated) NodeURLs() []string {
	var out []string
	for _, s := range r.nodes {
		out = append(out, s.URL)
	}
	return out
}
