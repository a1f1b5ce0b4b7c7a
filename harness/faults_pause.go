package harness

import (
	"fmt"

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
			check: func(c Config) error {
				if c.RedisURL != "" && c.RedisPID == 0 {
					return fmt.Errorf("--nemesis pause-redis with --redis-url needs --redis-pid")
				}
				return nil
			},
			build: func(e faultEnv) nemesis.Fault {
				return &nemesis.PauseServer{Which: nemesis.KindPauseRedis, PID: pid(e.env.redis, e.cfg.RedisPID), Freezer: e.freezer}
			}},
		{name: nemesis.KindPausePostgres, about: "SIGSTOP PostgreSQL's postmaster and backends",
			check: func(c Config) error {
				if c.PostgresURL != "" && c.PostgresPID == 0 {
					return fmt.Errorf("--nemesis pause-postgres with --postgres-url needs --postgres-pid (the postmaster's)")
				}
				return nil
			},
			build: func(e faultEnv) nemesis.Fault {
				return &nemesis.PauseServer{Which: nemesis.KindPausePostgres, PID: pid(e.env.postgres, e.cfg.PostgresPID), Freezer: e.freezer}
			}},
	}
}
