package harness

import (
	"fmt"
	"syscall"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// pauseFaults freeze a process with SIGSTOP until the fault ends: a worker,
// or a server whose clients' requests wait meanwhile.
func pauseFaults() []faultKind {
	return []faultKind{
		{name: nemesis.KindSigStop, about: "SIGSTOP a random worker",
			build: func(e faultEnv) nemesis.Fault {
				return &nemesis.SigStop{Targets: e.workers.Targets, Freezer: e.freezer}
			}},
		{name: nemesis.KindPauseRedis, about: "SIGSTOP the run's redis-server", needs: needRunRedis,
			check: givenPID(nemesis.KindPauseRedis, "--redis-url", "--redis-pid", func(c runPlan) bool { return c.RedisURL != "" && c.RedisPID == 0 }),
			build: func(e faultEnv) nemesis.Fault {
				return &nemesis.PauseServer{Which: nemesis.KindPauseRedis, Target: serverRedis, PID: pid(e.env.redis, e.cfg.RedisPID), Freezer: e.freezer}
			}},
		{name: nemesis.KindPausePostgres, about: "SIGSTOP PostgreSQL's postmaster and backends",
			check: givenPID(nemesis.KindPausePostgres, "--postgres-url", "--postgres-pid (the postmaster's)", func(c runPlan) bool { return c.PostgresURL != "" && c.PostgresPID == 0 }),
			build: func(e faultEnv) nemesis.Fault {
				f := &nemesis.PauseServer{Which: nemesis.KindPausePostgres, Target: serverPostgres, PID: pid(e.env.postgres, e.cfg.PostgresPID), Freezer: e.freezer}
				if e.env.postgres != nil {
					f.Remote = serverTree{e.env.postgres} // taken when PID is 0: a server on a node (over SSH), whose PID is none of this machine's
				}
				return f
			}},
	}
}

// givenPID is the check of a pause of a server: one given by URL needs its
// PID, which missing says is missing.
func givenPID(kind history.Keyword, url, pid string, missing func(runPlan) bool) func(runPlan) error {
	return func(c runPlan) error {
		if missing(c) {
			return fmt.Errorf("--nemesis %s with %s needs %s", kind, url, pid)
		}
		return nil
	}
}

// A serverTree is a throwaway server on a node and its children there, as
// a pause stops them.
type serverTree struct{ s *servers.Server }

func (t serverTree) Signal(sig syscall.Signal) error { return t.s.SignalTree(sig) }
