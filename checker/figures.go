package checker

import "github.com/hiatus-dev/hiatus/history"

// LockFigures are the figures of a lock's sections, which the
// :lock-counter check and list-append's carry under the same names, typed
// so that a reader (the run summary, compare's tables and plots) cannot
// misspell one into a silent zero. Each has one name, the one results.edn
// and table.json give it (figureNames, the json tags), defined in
// docs/checkers.md; the evidence behind them (which writes were stale,
// which sections overlapped) stays in the Result's Fields.
type LockFigures struct {
	Sections       int64 `json:"sections"`        // critical sections: acquires that were granted
	LeasedSections int64 `json:"leased-sections"` // of them, those granted with a lease (:lease-ms)
	Writes         int64 `json:"writes"`          // acknowledged (:ok) writes
	InfoWrites     int64 `json:"info-writes"`     // writes of unknown outcome: completed :info or never completed
	// Counted says the history has a final read, so that Final, LostMin and
	// LostMax are known; without one they are nil in results.edn.
	Counted         bool  `json:"counted"`
	Final           int64 `json:"final"`                     // the counter at the final read
	LostMin         int64 `json:"lost-min"`                  // the lost updates the history proves
	LostMax         int64 `json:"lost-max"`                  // and allows
	ProvenWrites    int64 `json:"proven-writes"`             // writes of unknown outcome that reads prove took effect
	Overlapping     int64 `json:"overlapping-sections"`      // sections overlapping another, of those whose write may have happened
	LockOverlapping int64 `json:"lock-overlapping-sections"` // sections overlapping another, of all
	StaleRejected   int64 `json:"stale-rejected"`            // writes (and fence-rmw reads) Postgres refused for a stale fence
	ChangeRejected  int64 `json:"change-rejected"`           // writes Postgres refused because the counter changed since their read (cas)
	LateWrites      int64 `json:"late-writes"`               // acknowledged writes sent after the writer's lease expired
	FenceViolations int64 `json:"fence-violations"`          // accepted writes whose fence was no larger than one accepted before them
	Pauses          int64 `json:"pauses"`                    // processes frozen: by the nemesis (SIGSTOP) or in-section pauses
	Faults          int64 `json:"faults"`                    // nemesis faults begun: pauses of processes or servers, kills
	InfoOps         int64 `json:"info-ops"`                  // the workers' ops of any kind that completed :info (not the lock's renewals)
}

// figureNames pairs each figure with its one name, in results.edn's order:
// the table that writes them (fields) and reads them back
// (ReadLockFigures). final, lost-min and lost-max are nil in
// results.edn without a final read.
func (f *LockFigures) figureNames() []struct {
	name    string
	p       *int64
	counted bool // known only with a final read (Counted)
} {
	type figure = struct {
		name    string
		p       *int64
		counted bool
	}
	return []figure{
		{"sections", &f.Sections, false},
		{"leased-sections", &f.LeasedSections, false},
		{"writes", &f.Writes, false},
		{"info-writes", &f.InfoWrites, false},
		{"final", &f.Final, true},
		{"lost-min", &f.LostMin, true},
		{"lost-max", &f.LostMax, true},
		{"proven-writes", &f.ProvenWrites, false},
		{"overlapping-sections", &f.Overlapping, false},
		{"lock-overlapping-sections", &f.LockOverlapping, false},
		{"stale-rejected", &f.StaleRejected, false},
		{"change-rejected", &f.ChangeRejected, false},
		{"late-writes", &f.LateWrites, false},
		{"fence-violations", &f.FenceViolations, false},
		{"pauses", &f.Pauses, false},
		{"faults", &f.Faults, false},
		{"info-ops", &f.InfoOps, false},
	}
}

// fields are the figures as results.edn writes them, in its order.
func (f LockFigures) fields() []Field {
	var out []Field
	for _, fig := range f.figureNames() {
		var v any = *fig.p
		if fig.counted && !f.Counted {
			v = nil
		}
		out = append(out, Field{fig.name, v})
	}
	return out
}

// ReadLockFigures reads the figures of a :lock-counter check back
// from results.edn, the check's map; ok is false when it has none of them.
func ReadLockFigures(check map[history.Keyword]any) (f LockFigures, ok bool) {
	for _, fig := range f.figureNames() {
		v, isInt := history.Int(check[history.Keyword(fig.name)])
		*fig.p = v
		ok = ok || isInt
		if fig.name == "lost-min" {
			f.Counted = isInt // nil, with final and lost-max, without a final read
		}
	}
	return f, ok
}

// LockFigures returns the figures of a lock's sections, if r is a check
// that carries them (the :lock-counter check, list-append's: HasLockFigures).
func (r Result) LockFigures() (LockFigures, bool) {
	if r.lockFigures == nil {
		return LockFigures{}, false
	}
	return *r.lockFigures, true
}

// LockFigures returns the figures of the first check among rs that
// carries them, if one does.
func (rs Results) LockFigures() (LockFigures, bool) {
	for _, r := range rs.Checks {
		if f, ok := r.LockFigures(); ok {
			return f, true
		}
	}
	return LockFigures{}, false
}
