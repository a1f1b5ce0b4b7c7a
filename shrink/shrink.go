// Package shrink turns a failing run into a small one that still fails:
// delta debugging over its fault schedule and its configuration — faults
// dropped, pauses shortened, the run cut short, fewer workers, less work —
// keeping a candidate only when enough of its replays still show the
// violation. Timing is not deterministic, so a candidate is judged by its
// outcome over several replays, never by one.
package shrink

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// A Judge says how often the configuration cfg shows the violation, and
// the run directory of one replay that did ("" if none did). It stops
// early once the verdict is settled.
type Judge func(ctx context.Context, cfg harness.Config) (Verdict, error)

// A Verdict is a candidate's replays: Failed of Runs showed the violation.
type Verdict struct {
	Failed, Runs int
	Dir          string // a replay that failed
}

// A Step is one candidate tried, for progress.
type Step struct {
	What    string // what the candidate changed
	Verdict Verdict
	Kept    bool
	Left    time.Duration // of the budget
	// Confirm says the step judged the result again (see Shrink), not a
	// candidate; Kept then says it held.
	Confirm bool
}

// Options bound a shrink.
type Options struct {
	Judge  Judge
	Need   int           // replays of Runs that must fail for a candidate to be kept
	Budget time.Duration // time to spend; the smallest failing case so far is the result
	Step   func(Step)    // progress; may be nil
}

// A Result is the smallest configuration found that still fails.
type Result struct {
	Config  harness.Config
	Verdict Verdict // its last judgement
	Tried   int     // candidates tried
	Spent   time.Duration
	// Done says the shrink went on until no smaller candidate failed,
	// rather than stop when the budget ran out.
	Done bool
	// Confirmed says a second judgement of the result failed as the first
	// did; Verdict then sums the two.
	Confirmed bool
}

// Shrink shrinks cfg, which must already fail (v is its judgement), within
// the budget. What ran out of time is not an error: the result is the
// smallest case found, cfg itself when the budget allowed no candidate
// (Result.Tried is 0). A result smaller than cfg is then judged once more,
// past the budget if need be: a candidate kept on one judgement may sit at
// the edge of the window and have passed it by luck (etcd-waiter's work
// halved to 2 ms failed 4 of 4 replays, then 7 of 10). One that fails
// fewer than Need again gives way to the one kept before it, twice at
// most.
func Shrink(ctx context.Context, cfg harness.Config, v Verdict, o Options) (Result, error) {
	if o.Need < 1 || o.Judge == nil || v.Failed < o.Need {
		return Result{Config: cfg, Verdict: v}, fmt.Errorf("shrink: want a judge, a need of 1 or more and a case that fails (%d of %d failed, %d needed)",
			v.Failed, v.Runs, o.Need)
	}
	if o.Budget <= 0 {
		return Result{Config: cfg, Verdict: v}, nil
	}
	start := time.Now()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, o.Budget)
	defer cancel()
	s := &shrinker{o: o, best: Result{Config: cfg, Verdict: v}, deadline: start.Add(o.Budget)}
	for changed := true; changed && ctx.Err() == nil; {
		changed = false
		for _, pass := range []func(context.Context) (bool, error){s.dropFaults, s.shortenFaults, s.earlier, s.cutTime, s.fewerWorkers, s.lessWork} {
			c, err := pass(ctx)
			if err != nil && ctx.Err() == nil {
				s.best.Spent = time.Since(start)
				return s.best, err // the smallest failing case so far is still the result
			}
			changed = changed || c
		}
	}
	s.best.Done = ctx.Err() == nil
	if len(s.kept) > 0 {
		s.confirm(parent)
	}
	s.best.Spent = time.Since(start)
	return s.best, nil
}

// maxBack is how many kept candidates the confirmation may give up.
const maxBack = 2

// confirm judges the result again, and steps back to the candidate kept
// before it while one fails fewer than Need (see Shrink).
func (s *shrinker) confirm(ctx context.Context) {
	for back := 0; back <= maxBack; back++ {
		v, err := s.o.Judge(ctx, s.best.Config)
		if err != nil || ctx.Err() != nil {
			return // unconfirmed: an interrupt, or a judgement that failed to run
		}
		held := v.Failed >= s.o.Need
		if s.o.Step != nil {
			s.o.Step(Step{What: "confirm the result", Verdict: v, Kept: held, Confirm: true})
		}
		if held {
			s.best.Verdict = Verdict{Failed: s.best.Verdict.Failed + v.Failed, Runs: s.best.Verdict.Runs + v.Runs,
				Dir: cmp.Or(s.best.Verdict.Dir, v.Dir)}
			s.best.Confirmed = true
			return
		}
		if len(s.kept) == 0 {
			return
		}
		prev := s.kept[len(s.kept)-1]
		s.kept = s.kept[:len(s.kept)-1]
		s.best.Config, s.best.Verdict = prev.Config, prev.Verdict
	}
}

type shrinker struct {
	o        Options
	best     Result
	kept     []Result // the cases best held before, oldest first
	deadline time.Time
	errors   int // judgements in a row that ended in an error
}

// maxErrors is how many judgements in a row may fail (a throwaway server
// that did not start, say) before the shrink gives up.
const maxErrors = 3

// try judges a candidate and keeps it if it still fails.
func (s *shrinker) try(ctx context.Context, what string, cfg harness.Config) (bool, error) {
	if ctx.Err() != nil {
		return false, nil
	}
	v, err := s.o.Judge(ctx, cfg)
	switch {
	case ctx.Err() != nil:
		return false, nil
	case err != nil:
		// One candidate's trouble is not the shrink's: it is not kept.
		if s.errors++; s.errors >= maxErrors {
			return false, fmt.Errorf("%d candidates in a row could not be judged: %w", s.errors, err)
		}
		if s.o.Step != nil {
			s.o.Step(Step{What: what + " (could not be judged: " + err.Error() + ")", Left: time.Until(s.deadline).Round(time.Second)})
		}
		return false, nil
	}
	s.errors = 0
	s.best.Tried++
	kept := v.Failed >= s.o.Need
	if kept {
		s.kept = append(s.kept, s.best)
		s.best.Config, s.best.Verdict = cfg, v
	}
	if s.o.Step != nil {
		s.o.Step(Step{What: what, Verdict: v, Kept: kept, Left: time.Until(s.deadline).Round(time.Second)})
	}
	return kept, nil
}

// dropFaults is ddmin over the schedule: remove ever smaller chunks of
// faults while the rest still fails.
func (s *shrinker) dropFaults(ctx context.Context) (bool, error) {
	changed := false
	for n := 2; len(s.best.Config.Plan) > 0 && ctx.Err() == nil; {
		plan := s.best.Config.Plan
		size := max(1, (len(plan)+n-1)/n)
		removed := false
		for i := 0; i < len(plan); i += size {
			rest := append(append(nemesis.Plan{}, plan[:i]...), plan[min(i+size, len(plan)):]...)
			cfg := s.best.Config
			cfg.Plan = rest
			what := fmt.Sprintf("drop faults %d–%d of %d", i+1, min(i+size, len(plan)), len(plan))
			if min(i+size, len(plan))-i == 1 {
				what = fmt.Sprintf("drop fault %d of %d (%s)", i+1, len(plan), describe(plan[i]))
			}
			ok, err := s.try(ctx, what, cfg)
			if err != nil {
				return changed, err
			}
			if ok {
				changed, removed = true, true
				n = max(n-1, 2)
				break
			}
		}
		if !removed {
			if size == 1 {
				return changed, nil
			}
			n = min(n*2, len(plan))
		}
	}
	return changed, nil
}

// shortenFaults halves each fault's length while the case still fails.
func (s *shrinker) shortenFaults(ctx context.Context) (bool, error) {
	changed := false
	for i := 0; i < len(s.best.Config.Plan) && ctx.Err() == nil; i++ {
		for {
			f := s.best.Config.Plan[i]
			shorter := (f.Length / 2).Round(time.Millisecond)
			if shorter < 10*time.Millisecond {
				break
			}
			cfg := s.best.Config
			cfg.Plan = append(nemesis.Plan{}, cfg.Plan...)
			cfg.Plan[i].Length = shorter
			ok, err := s.try(ctx, fmt.Sprintf("shorten fault %d (%s) to %v", i+1, describe(f), shorter), cfg)
			if err != nil {
				return changed, err
			}
			if !ok {
				break // this one is as short as it fails; the next may shorten
			}
			changed = true
		}
	}
	return changed, nil
}

// earliest is the soonest a replayed fault begins: the workers need a
// moment to start and take the lock.
const earliest = 500 * time.Millisecond

// earlier moves the whole schedule earlier, the gaps between its faults
// kept, halving the wait before the first while the case fails: so that
// cutTime can end the run sooner.
func (s *shrinker) earlier(ctx context.Context) (bool, error) {
	changed := false
	for ctx.Err() == nil && len(s.best.Config.Plan) > 0 {
		first := s.best.Config.Plan[0].At
		shift := first - max(earliest, (first/2).Round(100*time.Millisecond))
		if shift < 100*time.Millisecond {
			return changed, nil
		}
		cfg := s.best.Config
		cfg.Plan = append(nemesis.Plan{}, cfg.Plan...)
		for i := range cfg.Plan {
			cfg.Plan[i].At -= shift
		}
		ok, err := s.try(ctx, fmt.Sprintf("begin the faults %v earlier", shift), cfg)
		if err != nil || !ok {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// cutTime ends the run soon after its last fault, then halves it.
func (s *shrinker) cutTime(ctx context.Context) (bool, error) {
	cfg := s.best.Config
	tail := max(cfg.Lease, time.Second) // the overrun's stale write comes after the fault
	var end time.Duration
	for _, f := range cfg.Plan {
		end = max(end, f.At+f.Length)
	}
	changed := false
	for _, limit := range []time.Duration{(end + tail).Round(100 * time.Millisecond), (cfg.TimeLimit / 2).Round(100 * time.Millisecond)} {
		cfg := s.best.Config
		if limit >= cfg.TimeLimit || limit < max(end, cfg.Pause) || limit <= 0 {
			continue
		}
		cfg.TimeLimit = limit
		ok, err := s.try(ctx, fmt.Sprintf("cut the run to %v", limit), cfg)
		if err != nil {
			return changed, err
		}
		changed = changed || ok
	}
	return changed, nil
}

// fewerWorkers tries two workers (the fewest that contend), then one
// fewer, moving faults aimed at a worker that is no more to one that is.
func (s *shrinker) fewerWorkers(ctx context.Context) (bool, error) {
	changed := false
	for _, n := range []int{2, s.best.Config.Workers - 1} {
		cfg := s.best.Config
		if n < 2 || n >= cfg.Workers {
			continue
		}
		cfg.Workers = n
		cfg.Plan = append(nemesis.Plan{}, cfg.Plan...)
		for i := range cfg.Plan {
			if w, ok := cfg.Plan[i].Worker.Index(); ok && w >= n {
				cfg.Plan[i].Worker = nemesis.On(w % n)
			}
		}
		ok, err := s.try(ctx, fmt.Sprintf("%d workers", n), cfg)
		if err != nil {
			return changed, err
		}
		changed = changed || ok
	}
	return changed, nil
}

// lessWork halves the work between read and write while the case fails.
func (s *shrinker) lessWork(ctx context.Context) (bool, error) {
	changed := false
	for ctx.Err() == nil {
		cfg := s.best.Config
		less := (cfg.Work / 2).Round(time.Millisecond)
		if cfg.Work <= time.Millisecond {
			return changed, nil
		}
		cfg.Work = less
		ok, err := s.try(ctx, fmt.Sprintf("work %v", less), cfg)
		if err != nil || !ok {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

func describe(f nemesis.Planned) string {
	if w, ok := f.Worker.Index(); ok {
		return fmt.Sprintf("%s of worker %d at %v for %v", f.Kind, w, f.At, f.Length)
	}
	return fmt.Sprintf("%s at %v for %v", f.Kind, f.At, f.Length)
}
