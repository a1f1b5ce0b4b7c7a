package shrink

import (
	"context"

	"github.com/hiatus-dev/hiatus/harness"
)

// Replays is the Judge that runs a candidate up to runs times, as ordinary
// runs, and counts those whose checks find one of the violations named
// (harness.Violated) again. It stops as soon as need of them have, or can
// no longer. done, if not nil, hears of each run. The runs draw no plots:
// a shrink makes dozens, whose pictures nobody opens, and under the race
// detector a 1 s run's plots took 1.6 s of CPU, more than its check
// (hiatus plot RUN-DIR draws them for a run kept).
func Replays(violated []string, runs, need int, done func(harness.Result)) Judge {
	return func(ctx context.Context, cfg harness.Config) (Verdict, error) {
		cfg.NoPlots = true
		var v Verdict
		for v.Runs < runs && v.Failed < need && v.Failed+runs-v.Runs >= need {
			res, err := harness.Run(ctx, cfg)
			if err == nil {
				err = res.Leftover
			}
			if err != nil {
				return v, err
			}
			if res.Interrupted {
				return v, ctx.Err()
			}
			v.Runs++
			if harness.Recurs(violated, res.Results) {
				v.Failed++
				v.Dir = res.Dir
			}
			if done != nil {
				done(res)
			}
		}
		return v, nil
	}
}
