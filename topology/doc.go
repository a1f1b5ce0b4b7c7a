// Package topology owns the network between a run's parts. A Link is a TCP
// proxy in the path of one link — a worker to Redis, a worker to PostgreSQL,
// a replica to its primary — through which the nemesis cuts, slows or breaks
// that link. It never interprets the bytes it carries.
package topology
