package history

// The vocabulary of lock-counter histories (docs/history-format.md), shared
// by the client that writes them and the checker that reads them. Each
// critical section of a worker is :acquire, :read, :write, :release; the
// nemesis records :pause and :resume, :kill and :restart, or :start and
// :stop; a read with
// :final? true closes the run.
const (
	FAcquire Keyword = "acquire"
	FRead    Keyword = "read"
	FWrite   Keyword = "write"
	FRelease Keyword = "release"
	// FExtend is a holder asking, before its write, that its grant last
	// another lease (--extend-before-write): :ok, it writes; :fail, the
	// lock said it is not the holder's any more, and it does not.
	FExtend Keyword = "extend"
	// FRenew is a lock's own renewal of a grant while its holder holds it
	// (a watchdog's, an adapter's library's), recorded under the holder's
	// renewer process (Renewer), beside the worker's ops: :ok, the lock
	// says the grant lasts another lease; :fail with :error :lost,
	// :expired or :stolen, it says the grant is not the holder's any
	// more; :info, the answer is unknown. It carries the grant's :token,
	// the :lease-ms asked for, and :by, who renewed.
	FRenew   Keyword = "renew"
	FPause   Keyword = "pause"
	FResume  Keyword = "resume"
	FKill    Keyword = "kill"
	FRestart Keyword = "restart"
	// FStart and FStop begin and end the faults of links, clocks and
	// failovers: nothing is paused or killed, something is cut, slowed,
	// jumped or taken over.
	FStart Keyword = "start"
	FStop  Keyword = "stop"
	// FOpsMissing is an event of the run itself, by the nemesis process:
	// ops it could not record (a journal the disk refused, a worker whose
	// output was not ops); its :value says which. A history that has one
	// is incomplete, and no check of it can be valid.
	FOpsMissing Keyword = "ops-missing"
)

// The vocabulary of list-append histories (docs/history-format.md), after
// Jepsen's list-append: a section reads a key's list, :value [:r k [e …]],
// and appends one element to it, :f :append with :value [:append k e]; the
// final read is a transaction of reads of every key, [[:r k [e …]] …].
// The lock's ops, the faults' and the :info settlement are the
// lock-counter's.
const (
	FAppend Keyword = "append" // the section's write: its op's :f, and the micro-op in its :value
	MicroR  Keyword = "r"      // a read of one key's list, in a read's :value
)

// ListRead is a list-append read's :value: [:r key [element …]].
func ListRead(key int64, elems []int64) []any {
	xs := make([]any, len(elems))
	for i, e := range elems {
		xs[i] = e
	}
	return []any{MicroR, key, xs}
}

// ListAppend is an append's :value: [:append key element].
func ListAppend(key, elem int64) []any { return []any{FAppend, key, elem} }

// ListElement is the element the section-th section of process p
// appends: p × 10⁹ + section, unique in a run.
func ListElement(p Process, section int64) int64 { return int64(p)*1_000_000_000 + section }

// IsWrite says whether f is a section's write: a counter's :write, a
// list's :append.
func IsWrite(f Keyword) bool { return f == FWrite || f == FAppend }

// The kinds of in-section pause, the :kind of their events. They are
// declared here, not with the other kinds of fault in nemesis, since the
// checker tells them apart: a pause of the worker's goroutine alone
// leaves its lock's renewals running.
const (
	PauseSleep       Keyword = "sleep"        // the worker's goroutine blocks in its section
	PauseStop        Keyword = "stop"         // the worker stops its own process in its section
	PauseStopWaiters Keyword = "stop-waiters" // the worker blocks in its section while the workers waiting for the lock are stopped
)

// Extra keys of lock-counter ops.
const (
	KeyToken    Keyword = "token"    // the holder's random token, on an acquire's completion
	KeyFence    Keyword = "fence"    // the fencing token, on an acquire's completion and the write
	KeyLeaseMS  Keyword = "lease-ms" // the lease granted, on an acquire's completion
	KeySection  Keyword = "section"  // the worker's section number, on a write: its audit key
	KeyFinal    Keyword = "final?"   // true on the final read
	KeyResolved Keyword = "resolved" // :audit on a write whose :info the audit table settled
	KeyBy       Keyword = "by"       // who made a renewal: ByWatchdog, ByLibrary or ByAdapter
)

// Who made a renewal (:by on a :renew op).
const (
	// ByWatchdog: hiatus's own watchdog, in the worker, every lease/3 (a
	// built-in lock's, or one asking an adapter to renew).
	ByWatchdog Keyword = "watchdog"
	// ByAdapter: the adapter's library on its own, as the adapter reported
	// it (docs/adapter-protocol.md).
	ByAdapter Keyword = "adapter"
	// ByLibrary: the lock's client library on its own, in the worker
	// (etcd's client, keeping a lease alive).
	ByLibrary Keyword = "library"
)

// Error values of lock-counter ops.
const (
	ErrTimeout    Keyword = "timeout"       // an acquire given up when the run ended
	ErrStaleFence Keyword = "stale-fence"   // a fenced write (or fenced read) Postgres rejected
	ErrChanged    Keyword = "value-changed" // a write Postgres rejected: the counter changed since the read (cas)
	ErrExpired    Keyword = "expired"       // a release that found no lock: the lease had lapsed
	ErrStolen     Keyword = "stolen"        // a release that found another holder's token
	ErrLost       Keyword = "lost"          // an extend the lock refused: the grant is not the holder's (expired or taken)
	ErrKilled     Keyword = "killed"        // the op of a worker the nemesis killed
)
