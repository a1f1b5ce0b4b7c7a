package checker

// LockCounterFigures are the figures of the :lock-counter check, typed so
// that a reader (the run summary, compare's tables and plots) cannot
// misspell one into a silent zero. Each has one name, the one results.edn
// gives it, defined in docs/checkers.md; the evidence behind them (which
// writes were stale, which sections overlapped) stays in the Result's
// Fields.
type LockCounterFigures struct {
	Sections       int64 // :sections — critical sections: acquires that were granted
	LeasedSections int64 // :leased-sections — of them, those granted with a lease (:lease-ms)
	Writes         int64 // :writes — acknowledged (:ok) writes
	InfoWrites     int64 // :info-writes — writes of unknown outcome: completed :info or never completed
	// Counted says the history has a final read, so that Final, LostMin and
	// LostMax are known; without one they are nil in results.edn.
	Counted          bool
	Final            int64 // :final — the counter at the final read
	LostMin, LostMax int64 // :lost-min, :lost-max — the lost updates the history proves, and allows
	ProvenWrites     int64 // :proven-writes — writes of unknown outcome that reads prove took effect
	Overlapping      int64 // :overlapping-sections — sections overlapping another, of those whose write may have happened
	LockOverlapping  int64 // :lock-overlapping-sections — sections overlapping another, of all
	StaleRejected    int64 // :stale-rejected — writes (and fence-rmw reads) Postgres refused for a stale fence
	ChangeRejected   int64 // :change-rejected — writes Postgres refused because the counter changed since their read (cas)
	LateWrites       int64 // :late-writes — acknowledged writes sent after the writer's lease expired
	FenceViolations  int64 // :fence-violations — accepted writes whose fence was no larger than one accepted before them
	Pauses           int64 // :pauses — processes frozen: by the nemesis (SIGSTOP) or in-section pauses
	Faults           int64 // :faults — nemesis faults begun: pauses of processes or servers, kills
	InfoOps          int64 // :info-ops — client ops of any kind that completed :info
}

// fields are the figures as results.edn writes them, in its order.
func (f LockCounterFigures) fields() []Field {
	var final, lo, hi any // nil without a final read
	if f.Counted {
		final, lo, hi = f.Final, f.LostMin, f.LostMax
	}
	return []Field{
		{"sections", f.Sections},
		{"leased-sections", f.LeasedSections},
		{"writes", f.Writes},
		{"info-writes", f.InfoWrites},
		{"final", final},
		{"lost-min", lo},
		{"lost-max", hi},
		{"proven-writes", f.ProvenWrites},
		{"overlapping-sections", f.Overlapping},
		{"lock-overlapping-sections", f.LockOverlapping},
		{"stale-rejected", f.StaleRejected},
		{"change-rejected", f.ChangeRejected},
		{"late-writes", f.LateWrites},
		{"fence-violations", f.FenceViolations},
		{"pauses", f.Pauses},
		{"faults", f.Faults},
		{"info-ops", f.InfoOps},
	}
}

// LockCounter returns the figures of the :lock-counter check, if r is one.
func (r Result) LockCounter() (LockCounterFigures, bool) {
	if r.lockCounter == nil {
		return LockCounterFigures{}, false
	}
	return *r.lockCounter, true
}

// LockCounter returns the figures of the :lock-counter check among rs, if
// there is one.
func (rs Results) LockCounter() (LockCounterFigures, bool) {
	for _, r := range rs.Checks {
		if f, ok := r.LockCounter(); ok {
			return f, true
		}
	}
	return LockCounterFigures{}, false
}
