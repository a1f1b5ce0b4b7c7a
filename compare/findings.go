package compare

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// A Finding is a bug a lock library shipped, made runs: the version that
// shipped it and the version that fixed it, each an adapter of its own,
// on one schedule aimed at the bug's window. It counts only when the
// affected version fails where the fixed one passes (docs/findings.md).
type Finding struct {
	Name      string // as --scenario names it
	Upstream  string // the report and the fix
	Mechanism string // what goes wrong, in a sentence or two
	Anomaly   string // what the affected version's runs show
	// Use is how the workload uses the library, as its documentation
	// tells a careful user to.
	Use             string
	Affected, Fixed Version
	// Contrast says Fixed is no fixed release (none exists, or none can
	// be installed here) but a contrast: the library's careful use, or a
	// sibling library, on the same schedule. Its rows say so.
	Contrast bool
	// Schedule is the runs' setup but for the lock: the same for both.
	Schedule Setup
}

// A Version is one side of a finding: the library at one version, as a
// lock hiatus can run.
type Version struct {
	Library string // the library and its version, as the table says it
	Lock    string // exec:PROGRAM, which scripts/setup --adapters builds
}

// FindingsName names every finding at once.
const FindingsName = "findings"

// Findings are the bugs hiatus reproduces, each beside its fix (or, where
// none exists, a contrast).
func Findings() []Finding {
	return []Finding{redsyncExtend(), etcdWaiter(), redisSemaphoreRefresh(), nodeRedlockRetries(), simpleRedisMutexFence(), toozEtcd3gwHeartbeat(), redisSemaphoreRedlock()}
}

// redsyncExtend is the redsync-extend finding.
func redsyncExtend() Finding {
	return Finding{
		Name:     "redsync-extend",
		Upstream: "https://github.com/go-redsync/redsync/pull/61 (commit 5e3c32b, \"Fix extend and unlock\")",
		Mechanism: "Extend and Unlock compare the script's reply, an int64, with the untyped constant 0 (and Unlock with \"ERR\"): " +
			"never equal, so both say true whatever the script did. A holder whose lease lapsed is told its lock was extended.",
		Anomaly:  "lost updates: a holder frozen past its lease extends, is told yes, and writes over the next holder's update",
		Use:      "each holder calls Extend right before its write and writes only when Extend returned true (--extend-before-write)",
		Affected: Version{Library: "redsync v4.0.3", Lock: "exec:bin/redsync-v4.0.3"},
		Fixed:    Version{Library: "redsync v4.0.4", Lock: "exec:bin/redsync-v4.0.4"},
		// Every other section of each holder stops its whole process
		// (adapter and renewals too) for two leases between its read and
		// its extend: the next holder takes the lock meanwhile. The rest
		// write, so the fixed version's runs are not valid for want of
		// writes.
		Schedule: Setup{Lease: 300 * time.Millisecond, Pause: PauseStop, PauseLen: 600 * time.Millisecond, Every: 2,
			Extend: true, Limit: 4 * time.Second},
	}
}

// etcdWaiter is the etcd-waiter finding.
func etcdWaiter() Finding {
	return Finding{
		Name:     "etcd-waiter",
		Upstream: "https://github.com/etcd-io/etcd/issues/11456 (and #9921; fixed in 3.5 by https://github.com/etcd-io/etcd/pull/11408)",
		Mechanism: "etcd 3.4's concurrency.Mutex, which the server runs for its Lock RPC, waits for the keys put before the caller's to go " +
			"and never looks at the caller's own: a waiter whose lease ran out while it waited (its key deleted with it) is told it holds the lock " +
			"once the holder releases, and so is the next in line. From 3.5 the Mutex reads its key after the wait and returns ErrSessionExpired.",
		Anomaly: "lost updates: waiters frozen in line past their leases are granted the lock when the holder releases it, beside the next holder, and all write",
		Use: "each acquisition grants a lease and keeps it alive (keep-alives from before Lock, while it waits and holds, until the release), " +
			"checks what Lock returns, and holds the lock Lock said it holds until its release; the same for both versions",
		Affected: Version{Library: "etcd-server 3.4.23 (Debian), its Lock RPC", Lock: "etcd-v3lock"},
		Fixed:    Version{Library: "etcd client/v3 v3.7.3 Mutex, same server", Lock: "etcd"},
		// The holder of every 2nd section of each worker blocks for two
		// leases (its keep-alives run on: it keeps the lock), and every
		// worker waiting for the lock then is stopped as long: a waiter's
		// lease runs out at most a lease after its stop began (its last
		// keep-alive was before it), etcd revokes an expired lease within
		// 500 ms, and the holder releases two leases after the stop
		// began. The lease is etcd 3.4's shortest with its default timings.
		Schedule: Setup{Lease: 2 * time.Second, Pause: PauseStopWaiters, PauseLen: 4 * time.Second, Every: 2,
			Limit: 10 * time.Second},
	}
}

// redisSemaphoreRefresh is the redis-semaphore-refresh finding.
func redisSemaphoreRefresh() Finding {
	return Finding{
		Name:     "redis-semaphore-refresh",
		Upstream: "https://github.com/swarthy/redis-semaphore/issues/175, fix https://github.com/swarthy/redis-semaphore/pull/177 (5.3.1, \"Fixed reacquire expired resource in refresh\")",
		Mechanism: "Mutex's refresh script SETs the key again when it finds it gone (`elseif value == false then set … return 1`), and says refreshed: " +
			"a holder whose lease lapsed while another holder took the lock and released it is told it still holds it, and onLockLost never fires. 5.3.1 returns 0.",
		Anomaly: "lost updates: a holder frozen past its lease refreshes after the next holder's section, is told yes, and writes over its update",
		Use: "each grant is a Mutex with its own refresh (every 0.8 lease) and onLockLost; right before its write each holder has the library refresh the grant " +
			"(a Mutex of its identifier, externallyAcquiredIdentifier, whose acquire refreshes) and writes only when the refresh said yes and onLockLost has not fired (--extend-before-write)",
		Affected: Version{Library: "redis-semaphore 5.3.0", Lock: "exec:bin/redis-semaphore-v5.3.0"},
		Fixed:    Version{Library: "redis-semaphore 5.3.1", Lock: "exec:bin/redis-semaphore-v5.3.1"},
		// Two workers, every other section of each stopped (adapter and
		// its refresh timer too) for three leases between its read and its
		// extend: the other worker takes the lock, writes, releases, takes
		// it again for its own stopped section, and that lease lapses too,
		// so the key is gone when the first wakes, which is the only case
		// 5.3.0's refresh gets wrong (a key another holder has is refused
		// by both). A third worker would hold the key at the wake.
		Schedule: Setup{Lease: 300 * time.Millisecond, Pause: PauseStop, PauseLen: 900 * time.Millisecond, Every: 2,
			Extend: true, Limit: 4 * time.Second, Workers: 2},
	}
}

// nodeRedlockRetries is the node-redlock-retries finding.
func nodeRedlockRetries() Finding {
	return Finding{
		Name: "node-redlock-retries",
		Upstream: "https://github.com/mike-marcacci/node-redlock/pull/369 (its F2, \"Prevent Self-Blocking during Retries\"), open since 14 September 2026 and not merged; " +
			"no issue reports it; unchanged on node-redlock's main (afe5cf9), whose last release is 5.0.0-beta.2",
		Mechanism: "acquire retries its acquire script with one value and releases what a failed attempt took only after its last attempt, and the script refuses a key " +
			"that exists, its own value too: an attempt that took a minority of the nodes keeps it through its retries, which can take at most the other nodes, " +
			"as can everyone else's. Contenders that split the nodes leave the lock held by no one until their keys expire, a lease later. " +
			"The Redlock algorithm unlocks every instance after each failed attempt.",
		Anomaly: "unavailability: no holder for a lease or more while acquires wait, with no fault (orphans longer than the lease)",
		Use: "as its README shows: new Redlock(clients, {driftFactor: 0.01, retryDelay: 200, retryJitter: 200}) on five nodes, acquire with as many retries as fit in " +
			"hiatus's wait; the contrast gives redlock no retries (retryCount 0) and calls acquire again after the same delay, which releases a failed attempt's keys first",
		Affected: Version{Library: "redlock 5.0.0-beta.2, its retries", Lock: "exec:node adapters/node/redlock.js --readme"},
		Fixed:    Version{Library: "redlock 5.0.0-beta.2, retries outside it", Lock: "exec:node adapters/node/redlock.js --readme --retry-outside"},
		Contrast: true,
		// Sixteen workers on five nodes, no fault: enough contenders that
		// attempts collide and split the nodes. The README's jitter keeps
		// most retries apart: with eight workers, 7 of 10 runs of 4 s and
		// 5 of 10 of 8 s split them.
		Schedule: Setup{Lease: 500 * time.Millisecond, Limit: 4 * time.Second, Workers: 16, Nodes: 5, AdapterStore: harness.AdapterOnRedisNodes},
	}
}

// simpleRedisMutexFence is the simple-redis-mutex-fence finding.
func simpleRedisMutexFence() Finding {
	return Finding{
		Name: "simple-redis-mutex-fence",
		Upstream: "not reported: AmrSaber/simple-redis-mutex's issues and pull requests, open and closed, searched on 6 December 2026 " +
			"(#15 \"Issue fencing tokens\" added them; none reports their order); docs/findings.md has the report ready to file",
		Mechanism: "tryLock SETs the key NX PX and only after that reply INCRs the token counter, a second command: a client whose SET reply " +
			"comes later than its lease (a slow link, a pause) is granted, its key expires, another client takes the lock and a token, " +
			"and the first then takes a larger token than the holder's. The README offers the token \"to identify the order at which locks are acquired\" " +
			"for fencing; a guard that keeps the largest token seen then accepts the stale client's writes and refuses the holder's.",
		Anomaly: "fence inversions (:fence-order false): a later grant with the smaller token; lost updates when the stale holder's read comes before the holder's write",
		Use: "as the README's \"Using tryLock\" does: tryLock again every retry until hiatus's wait is over, each attempt awaited, and the grant's " +
			"release.fencingToken checked by PostgreSQL at the write (--guard fence); both sides release by the library's release script made to say " +
			"whether it found its key (--release-says: the library's returns nothing), so that they differ in the token alone; the contrast is the fix " +
			"the report suggests, applied in the adapter (--fix-fence): the SET NX PX and the INCR in one script",
		Affected: Version{Library: "simple-redis-mutex 3.0.0, its fencing token", Lock: "exec:node adapters/node-simple-redis-mutex/main.js --fencing --try --release-says"},
		Fixed:    Version{Library: "simple-redis-mutex 3.0.0 with the suggested fix", Lock: "exec:node adapters/node-simple-redis-mutex/main.js --fencing --try --release-says --fix-fence"},
		Contrast: true,
		// Two workers. The replies to one's lock calls are held back
		// 500 ms, more than the 200 ms lease, once it asks for the lock
		// while the other does not hold it (delay-redis-grant): granted
		// at once, it learns it 500 ms later, its INCR's answer 500 ms
		// after that. The other, polling every 100 ms, takes the key once
		// its lease ends, before its INCR. A third worker could race the
		// delayed acquire to the free key and win (the fault then holds a
		// refusal): the shrunk reproducer of 3 workers recurred in 7 of
		// 10, of 2 in 10 of 10. A reply delay aimed at any lock call
		// caught such an acquire about one time in four: 16 s runs of it,
		// of 3 workers, were invalid in 6 of 10.
		Schedule: Setup{Lease: 200 * time.Millisecond, Nemesis: string(nemesis.KindDelayRedisGrant), Delay: 500 * time.Millisecond,
			PauseLen: 600 * time.Millisecond, Interval: 500 * time.Millisecond, Retry: 100 * time.Millisecond,
			Limit: 8 * time.Second, Guard: client.GuardFence, Workers: 2},
	}
}

// toozEtcd3gwHeartbeat is the tooz-etcd3gw-heartbeat finding.
func toozEtcd3gwHeartbeat() Finding {
	return Finding{
		Name: "tooz-etcd3gw-heartbeat",
		Upstream: "not reported: openstack/tooz on GitHub (issues and pull requests) and its git history's Closes-Bug trailers searched on 6 December 2026 " +
			"(LP#1975524 fixed the same -1 for the membership lease only); its tracker, bugs.launchpad.net/python-tooz, could not be searched from here; " +
			"unchanged on tooz's master; docs/findings.md has the report ready to file",
		Mechanism: "Etcd3Lock.heartbeat (tooz/drivers/etcd3gw.py) refreshes the lock's lease and returns True whatever the refresh says: " +
			"etcd3gw's Lease.refresh() returns -1 for a lease etcd has expired, and the lock stays in the coordinator's acquired locks, so the heart " +
			"refreshes a dead lease for good. A holder stopped longer than its lease, whose key etcd deleted and another client re-took, is told " +
			"by heartbeat() that it still holds the lock; tooz's etcd3gw lock has no is_still_owner.",
		Anomaly: "lost updates: a holder frozen past its lease asks heartbeat(), is told yes, and writes over the next holder's update",
		Use: "as OpenStack services do (get_coordinator, start(start_heart=True), get_lock, acquire), and, as a careful user, heartbeat() right before each write, " +
			"writing only when it says True (--extend-before-write); the contrast is the lock tooz wraps, python3-etcd3gw's own Lock, as its docs show, " +
			"whose refresh() before each write says -1 of an expired lease (tooz's acquire retries about once a second, the contrast every retry: " +
			"each library's own)",
		Affected: Version{Library: "tooz 3.1.0 etcd3gw driver (python3-tooz)", Lock: "exec:adapters/python/tooz_lock.py etcd3gw --careful"},
		Fixed:    Version{Library: "etcd3gw 2.0.0 Lock (python3-etcd3gw), the lock tooz wraps", Lock: "exec:adapters/python/etcd3gw_lock.py"},
		Contrast: true,
		// Every 10th section of each worker stops its whole process
		// (adapter and heart too) for 3 s, more than the 2 s lease etcd
		// grants at the least, between its read and its heartbeat: etcd
		// expires the lease and deletes the key, another worker takes
		// the lock and writes.
		Schedule: Setup{Lease: 500 * time.Millisecond, Pause: PauseStop, PauseLen: 3 * time.Second, Every: 10,
			Extend: true, Limit: 10 * time.Second, AdapterStore: harness.AdapterOnEtcd},
	}
}

// redisSemaphoreRedlock is the redis-semaphore-redlock finding.
func redisSemaphoreRedlock() Finding {
	return Finding{
		Name: "redis-semaphore-redlock",
		Upstream: "not reported: swarthy/redis-semaphore's issues and pull requests, open and closed, searched on 6 December 2026 " +
			"(#21 added RedlockMutex; #208 is a cluster set-up); unchanged in 5.8.0, the latest; docs/findings.md has the report ready to file",
		Mechanism: "RedlockMutex's acquire (lib/redlockMutex/acquire.js) SETs the key on every node, waits for all of them (Promise.all, no timeout " +
			"of its own on the README's clients), and says acquired on a quorum of OKs however long they took: the Redlock algorithm it cites " +
			"gives each node a short timeout (step 2) and counts a quorum only when the attempt took less than the lease (step 3). A client whose " +
			"answers come later than its lease is told it holds a lock whose keys expired meanwhile, and that another client took.",
		Anomaly: "lost updates: a grant answered after its keys expired, beside the holder that took them meanwhile",
		Use: "as the README's RedlockMutex example shows (an ioredis client per node, with no command timeout, as there, and maxRetriesPerRequest 1, as every ioredis client of hiatus's adapters; lockTimeout the lease), " +
			"tryAcquire until hiatus's wait is over and release after the write; the contrast is the fix the report suggests, applied in the adapter " +
			"(--fix-redlock): each node's SET given 5% of the lease, as redsync does, and a quorum counted only when the attempt took less than " +
			"the lease less the drift, every node unlocked otherwise",
		Affected: Version{Library: "redis-semaphore 5.8.0 RedlockMutex, 3 nodes", Lock: "exec:node adapters/node/redis-semaphore.js"},
		Fixed:    Version{Library: "redis-semaphore 5.8.0 RedlockMutex with the suggested fix", Lock: "exec:node adapters/node/redis-semaphore.js --fix-redlock"},
		Contrast: true,
		// Two workers on three nodes. The replies of one node (a
		// minority, as every delay fault but the majority's takes) to one
		// worker are held back 800 ms (lease 500 ms) once it asks for the
		// lock while no one holds it: its SETs land at once, and those on
		// the two others expire while it waits for the third; the other
		// worker, whose acquire retries every 5 ms (the library's own
		// loop, until hiatus's wait ends), takes those two meanwhile, and
		// its 300 ms of work is still going when the first is told yes
		// and reads.
		Schedule: Setup{Lease: 500 * time.Millisecond, Nemesis: string(nemesis.KindDelayRedisGrant), Delay: 800 * time.Millisecond,
			PauseLen: 900 * time.Millisecond, Interval: 700 * time.Millisecond, Retry: 100 * time.Millisecond,
			Work: 300 * time.Millisecond, Limit: 8 * time.Second, Workers: 2, Nodes: 3, AdapterStore: harness.AdapterOnRedisNodes},
	}
}

// findingSetups are the rows of the finding f: affected, then fixed,
// unguarded (a guard would hide what the library does) unless the
// finding is about the library's own guard, its fencing token.
func findingSetups(f Finding) []Setup {
	var out []Setup
	for _, side := range []struct {
		name string
		v    Version
	}{{"affected", f.Affected}, {f.otherSide(), f.Fixed}} {
		s := f.Schedule
		s.Scenario, s.Side, s.Version, s.Lock = f.Name, side.name, side.v.Library, side.v.Lock
		s.Guard = cmp.Or(f.Schedule.Guard, client.GuardNone)
		out = append(out, s)
	}
	return out
}

// otherSide names the row beside the affected one: fixed, or contrast.
func (f Finding) otherSide() string {
	if f.Contrast {
		return "contrast"
	}
	return "fixed"
}

// built says whether the program prog is there, with the npm packages its
// directory pins (a package.json beside it) installed. A Python adapter's
// Debian packages are not looked for: its hello says what it lacks.
func built(prog string) bool {
	if _, err := os.Stat(prog); err != nil {
		return false
	}
	dir := filepath.Dir(prog)
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		return true
	}
	_, err := os.Stat(filepath.Join(dir, "node_modules"))
	return err == nil
}

// MissingAdapters says which adapters of setups are not built, and how to
// build them; "" when all are.
func MissingAdapters(setups []Setup) string {
	var missing []string
	for _, s := range setups {
		cmd, ok := strings.CutPrefix(s.Lock, client.ExecPrefix)
		if !ok || s.Side == "" {
			continue
		}
		// The program, or the script an interpreter runs: the first
		// argument that is a path ("node adapters/…", "python3 -u x/y.py").
		prog := ""
		for _, a := range strings.Fields(cmd) {
			if strings.Contains(a, "/") {
				prog = a
				break
			}
		}
		if prog == "" {
			continue // a program on PATH: nothing hiatus builds
		}
		if !built(prog) && !slices.Contains(missing, cmd) {
			missing = append(missing, cmd)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("the adapters %s are not built: run scripts/setup --adapters in hiatus's directory", strings.Join(missing, ", "))
}
