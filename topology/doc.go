// Package topology owns the network between a run's parts. A Link is a TCP
// proxy in the path of one link — a worker to Redis, a worker to PostgreSQL,
// a replica to its primary — through which the nemesis cuts, slows or breaks
// that link. It never interprets the bytes it carries. A Host is where a
// server or a worker runs: Local, or a network namespace on a Net, a
// private bridge, whose packets Isolate drops by rules in the host's own
// namespace, never in the machine's firewall.
package topology
