package harness

import (
	"fmt"

	"github.com/hiatus-dev/hiatus/nemesis"
)

// killFaults end a process abruptly and start it again when the fault
// ends: a throwaway server, restarted where it was, or a worker, replaced.
func killFaults() []faultKind {
	throwaway := func(flag string, url func(runPlan) string) func(runPlan) error {
		return func(c runPlan) error {
			if url(c) != "" {
				return fmt.Errorf("--nemesis kill-%s restarts the server: it works on the throwaway server only, not on --%s-url", flag, flag)
			}
			return nil
		}
	}
	return []faultKind{
		{name: nemesis.KindKillRedis, about: "SIGKILL the run's redis-server, restart it empty", needs: needRunRedis,
			check: throwaway("redis", func(c runPlan) string { return c.RedisURL }),
			build: func(e faultEnv) nemesis.Fault {
				return &nemesis.KillServer{Which: nemesis.KindKillRedis, Target: serverRedis, Server: e.env.redis}
			}},
		{name: nemesis.KindKillPostgres, about: "immediate shutdown of PostgreSQL, restart",
			check: throwaway("postgres", func(c runPlan) string { return c.PostgresURL }),
			build: func(e faultEnv) nemesis.Fault {
				return &nemesis.KillServer{Which: nemesis.KindKillPostgres, Target: serverPostgres, Server: e.env.postgres}
			}},
		{name: nemesis.KindKillWorker, about: "SIGKILL a worker, start a new one",
			build: func(e faultEnv) nemesis.Fault { return &nemesis.KillWorker{Workers: e.workers} }},
	}
}
