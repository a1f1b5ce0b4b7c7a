package history

import (
	"strconv"
	"strings"
)

// The lock server's record (lockserver.edn in a run directory): what the
// lock's own server did to the lock's keys, beside the history of what its
// clients asked and were told. Each event is an op of the history's EDN
// conventions (one map a line, :index dense from 0, :time on the history's
// clock, sorted by it), of type :info, whose :process names the lock node
// as a string ("redis-0", "etcd-0", "postgres", "zk-0") and whose :f is
// one of the acts below. A client's view and the server's, side by side,
// tell which layer broke: the lease model (the holder outlived its key),
// the library (it said ok when the server's record says otherwise), or the
// server (it let two holders have the key at once).
const (
	// SGrant: the key took a token it did not hold before (a SET NX that
	// found it free, a create, an advisory lock granted); :token the token,
	// :client who, :deadline when it would expire unless renewed.
	SGrant Keyword = "grant"
	// SRefuse: a taking of the key that found it held (a SET NX that
	// wrote nothing); :token the token that holds it, :client who asked.
	SRefuse Keyword = "refuse"
	// SRenew: the key's deadline moved (PEXPIRE, a SET XX PX, a lease
	// kept alive), the token unchanged; :deadline the new one, Unset for
	// none (a PERSIST, or a PEXPIRE to 0 or less deletes: SDelete).
	SRenew Keyword = "renew"
	// SOverwrite: the key took another token while it held one (a SET
	// without NX); :token the new token, :was the old.
	SOverwrite Keyword = "overwrite"
	// SDelete: the key was removed by a command (DEL, a compare-and-
	// delete, a PEXPIRE to 0, a lease revoked, an unlock); :token the token
	// it held, :client who removed it.
	SDelete Keyword = "delete"
	// SExpire: the key's deadline passed with no renewal: the server's
	// clock removed it; :token the token it held. Not a command: derived
	// from the deadlines the record saw.
	SExpire Keyword = "expire"
	// SFence: a fencing token handed out (an INCR of the fence counter,
	// a revision, a sequence number); :value the token, :client who.
	SFence Keyword = "fence"
	// SGap: the record lost sight of the node from :time until :until
	// (absent when it never saw it again): its connection broke, the node
	// restarted. What the node did meanwhile is not in the record, and the
	// events after it start from the key's state as the node then had it;
	// :value says why.
	SGap Keyword = "gap"
)

// Extra keys of the lock server's record.
const (
	KeyKey      Keyword = "key"       // the key acted on
	KeyClient   Keyword = "client"    // the connection's name: "worker-3" (process 3's), "" when not known
	KeyDeadline Keyword = "deadline"  // when the key expires unless renewed, on the history's clock (ns); absent for never
	KeyWas      Keyword = "was"       // the token an overwrite replaced
	KeyCommand  Keyword = "command"   // the command as the server logged it, for explanations: "PEXPIRE lock 0"
	KeyNodeTime Keyword = "node-time" // the node's own clock at the event (ns since the run's start), when it is not the history's
	KeyUntil    Keyword = "until"     // the end of a gap, on the history's clock (ns)
	// KeyUncertainty is how far the event's :time may be from when the
	// node acted, on the history's clock (ns), as the record measured the
	// node's clock against it; absent when its stamp is the history's
	// clock itself. The checker's slack is at least the widest.
	KeyUncertainty Keyword = "uncertainty"
	// KeyExpiryGrain, on a grant, is how long past its lease the server
	// may keep a key whose holder fell silent (ns): ZooKeeper expires a
	// session at the first tick boundary past its timeout. Absent: none
	// known.
	KeyExpiryGrain Keyword = "expiry-grain"
	// KeyGuess, true, marks an event the record read by its own guess:
	// a command within a millisecond of the key's deadline, which the
	// server may have read the other way (a record of the commands alone,
	// without the server's notifications), and every event after it until
	// the key's state is sure again. Absent for an event the record knows.
	KeyGuess Keyword = "guess"
)

// Clients of the lock server's record that are no worker.
const (
	// ClientPrimary is a replica's replication link: the commands it
	// applied from its primary, whoever sent them there.
	ClientPrimary = "primary"
	// ClientRun is the run's own connections (the recorder's, the final
	// read's), never a worker's.
	ClientRun = "hiatus"
)

// WorkerName is the name the connections of process p's worker carry, in
// a run of workers workers: "worker-N" for the worker slot N, the worker
// that began as process N. A worker keeps its connections, and its name,
// when it takes a new process after an :info (N+workers, N+2·workers…),
// and the worker that replaces one the nemesis killed takes its slot's
// name: so the name says the slot, p mod workers, and the history says
// which of the slot's processes was running at a given time.
func WorkerName(p Process, workers int) string {
	if workers <= 0 || p < 0 {
		return ""
	}
	return "worker-" + strconv.FormatInt(int64(p)%int64(workers), 10)
}

// WorkerSlot is the worker slot a connection's name says (WorkerName's
// inverse): N for "worker-N"; ok is false for any other name.
func WorkerSlot(client string) (slot int64, ok bool) {
	n, ok := strings.CutPrefix(client, "worker-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n, 10, 64)
	return v, err == nil && v >= 0
}

// ServerActs lists the acts of the lock server's record, for readers and
// tests.
func ServerActs() []Keyword {
	return []Keyword{SGrant, SRefuse, SRenew, SOverwrite, SDelete, SExpire, SFence, SGap}
}
