package harness

import (
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// linkFaults act on the paths between a worker and the servers: through a
// proxy of the run's in each, or in the kernel between hosts of their own
// (see Config.proxied). A cut holds what was sent until the heal, as TCP
// retransmits it; a delay makes every byte late, or every reply alone; a
// drop resets the links' connections.
func linkFaults() []faultKind {
	link := func(name history.Keyword, about string, needs need, action nemesis.LinkAction) faultKind {
		return faultKind{name: name, about: about, needs: needs | sequenceable,
			build: func(e faultEnv) nemesis.Fault {
				links := e.env.topo.nodeLinks(name == nemesis.KindPartitionMajority)
				if needs&needPostgresLink != 0 {
					links = e.env.topo.postgresLink
				}
				return &nemesis.LinkFault{Which: name, Action: action, Links: links, Writes: needs&needPostgresLink != 0,
					Workers: e.workers.Targets, Slow: e.cfg.delay(), CallWait: e.cfg.HolderWait()}
			}}
	}
	return []faultKind{
		link(nemesis.KindPartitionRedis, "cut a worker from the lock's nodes (a minority of several)", needRedisLinks, nemesis.Partition),
		link(nemesis.KindPartitionMajority, "cut a worker from a majority of the lock's nodes", needRedisLinks, nemesis.Partition),
		link(nemesis.KindPartitionPostgres, "cut a worker from PostgreSQL", needPostgresLink, nemesis.Partition),
		link(nemesis.KindDelayRedis, "every byte between a worker and the lock's nodes arrives --delay late", needRedisLinks|needProxy, nemesis.Delay),
		link(nemesis.KindDelayRedisReplies, "the lock's nodes' replies to a worker arrive --delay late, its requests at once, begun once a lock call of its is sent",
			needRedisLinks|needProxy, nemesis.DelayReplies),
		link(nemesis.KindDelayRedisGrant, "the lock's nodes' replies to a worker arrive --delay late, begun once it asks for the lock while no one holds it: its grant learnt late",
			needRedisLinks|needProxy, nemesis.DelayGrant),
		link(nemesis.KindDelayPostgres, "every byte between a worker and PostgreSQL arrives --delay late", needPostgresLink|needProxy, nemesis.Delay),
		link(nemesis.KindDropRedis, "reset a worker's connections to the lock's nodes", needRedisLinks|needProxy, nemesis.Drop),
		link(nemesis.KindDropPostgres, "reset a worker's connections to PostgreSQL", needPostgresLink|needProxy, nemesis.Drop),
	}
}
