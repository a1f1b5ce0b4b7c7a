package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/hiatus-dev/hiatus/client"
)

// sessionsEnded returns once no worker session is left in PostgreSQL: the
// sessions of workers that died, where a write may still be under way,
// are given 5 s to end, then terminated (a write they had not committed is
// rolled back). Until then a write may land after the final read, which
// would then miss it, or after the audit table was read.
func (e *env) sessionsEnded(ctx context.Context, cfg runPlan, lg *runLog) error {
	app := workerApp(cfg.CounterID)
	const count = `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := e.db.QueryRow(ctx, count, app).Scan(&n); err != nil {
			return fmt.Errorf("count the workers' sessions: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			lg.logf("terminating %d worker sessions still open", n)
			if _, err := e.db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
				return fmt.Errorf("terminate the workers' sessions: %w", err)
			}
			deadline = time.Now().Add(5 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workerApp is the application_name of the workers' sessions.
func workerApp(counterID int64) string { return fmt.Sprintf("hiatus-worker-%d", counterID) }

// settle reads from the audit table which of ids, the run's :info writes,
// took effect (audited) of those it could ask about (asked), once no worker
// session is left that could still commit one (sessionsEnded).
func (e *env) settle(ctx context.Context, cfg runPlan, ids []client.WriteID, lg *runLog) (asked, audited map[client.WriteID]bool) {
	if len(ids) == 0 {
		return nil, nil
	}
	if err := e.sessionsEnded(ctx, cfg, lg); err != nil {
		lg.printf("cannot resolve :info writes: %v", err)
		return nil, nil
	}
	audited, err := e.resource.Audited(ctx, ids)
	if err != nil {
		lg.printf("cannot resolve :info writes: %v", err)
		return nil, nil
	}
	asked = make(map[client.WriteID]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	lg.logf("resolving %d :info writes from the audit table: %d took effect", len(asked), len(audited))
	return asked, audited
}
