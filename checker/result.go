// Package checker gives offline verdicts on histories: lost updates,
// overlapping critical sections, fencing, and linearizability against
// Jepsen's models with porcupine. It is pure: it reads ops, never a server,
// so the verdict printed at the end of a run and the one given on the saved
// history months later come from the same code.
package checker

import (
	"fmt"

	"github.com/hiatus-dev/hiatus/history"
)

// A Validity is a three-way verdict, as Jepsen's :valid?. Its zero value is
// Unknown, so that a verdict nobody reached (a Results returned beside an
// error, a Result a check forgot to judge) never reads as valid.
type Validity uint8

const (
	// Unknown: the check could not decide (a timeout, a truncated history,
	// unknown outcomes it could not resolve), or did not run.
	Unknown Validity = iota
	// Valid: the check found the history correct.
	Valid
	// Invalid: the check found a violation.
	Invalid
)

// rank orders verdicts from best to worst: valid, unknown, invalid.
func (v Validity) rank() int {
	switch v {
	case Valid:
		return 0
	case Invalid:
		return 2
	}
	return 1
}

func (v Validity) String() string {
	switch v {
	case Valid:
		return "true"
	case Invalid:
		return "false"
	}
	return ":unknown"
}

// EDN returns v as Jepsen writes :valid?: true, false or :unknown.
func (v Validity) EDN() any {
	switch v {
	case Valid:
		return true
	case Invalid:
		return false
	}
	return history.Keyword("unknown")
}

// Merge returns the worse of a and b, as Jepsen's merge-valid: false beats
// :unknown beats true.
func Merge(a, b Validity) Validity {
	if a.rank() > b.rank() {
		return a
	}
	return b
}

// ExitCode is the process exit status for a verdict, as Jepsen's CLI:
// 0 valid, 1 invalid, 2 unknown.
func (v Validity) ExitCode() int {
	switch v {
	case Valid:
		return 0
	case Invalid:
		return 1
	}
	return 2
}

// A Result is one check's verdict and the evidence behind it.
type Result struct {
	Name  string   // the check's name, a keyword in results.edn
	Valid Validity // this check's verdict
	// Fields are the check's figures and evidence, written under the check's
	// key in results.edn in the order given.
	Fields []Field
	// Explanation says in words why the check is not valid; empty when valid.
	Explanation string
	// lockFigures holds the figures of a lock's sections, typed; nil for a
	// check that has none (HasLockFigures).
	lockFigures *LockFigures
	// blame are the writes the check blames, the first first, for the
	// layer the lock server's record says broke; nil if none.
	blame []blame
}

// A blame is a write of a process, sent at a time.
type blame struct {
	process history.Process
	time    int64
}

// A Field is one named figure or piece of evidence of a Result.
type Field struct {
	Key   string
	Value any
}

// Get returns the value of the field named key, or nil.
func (r Result) Get(key string) any {
	for _, f := range r.Fields {
		if f.Key == key {
			return f.Value
		}
	}
	return nil
}

// Results are the verdicts of all checks run on one history. With no check
// added, the verdict is Unknown: nothing was checked.
type Results struct {
	Valid  Validity
	Checks []Result
	// Processes says how the history writes each process the evidence
	// numbers below -1 (history.Reader.Processes); nil when none.
	Processes map[history.Process]string
}

// Add appends r and merges its verdict into the whole.
func (rs *Results) Add(r Result) {
	if len(rs.Checks) == 0 {
		rs.Valid = r.Valid
	} else {
		rs.Valid = Merge(rs.Valid, r.Valid)
	}
	rs.Checks = append(rs.Checks, r)
}

// Check returns the result named name and whether there is one.
func (rs Results) Check(name string) (Result, bool) {
	for _, r := range rs.Checks {
		if r.Name == name {
			return r, true
		}
	}
	return Result{}, false
}

// AppendEDN appends rs in Jepsen's results shape: a map with a top-level
// :valid? and one map per check, each with its own :valid?.
func (rs Results) AppendEDN(dst []byte) []byte {
	dst = append(dst, "{:valid? "...)
	dst = history.AppendValue(dst, rs.Valid.EDN())
	for _, r := range rs.Checks {
		dst = append(dst, ",\n :"...)
		dst = append(dst, r.Name...)
		dst = append(dst, " {:valid? "...)
		dst = history.AppendValue(dst, r.Valid.EDN())
		for _, f := range r.Fields {
			dst = append(dst, ",\n   :"...)
			dst = append(dst, f.Key...)
			dst = append(dst, ' ')
			dst = history.AppendValue(dst, f.Value)
		}
		if r.Explanation != "" {
			dst = append(dst, ",\n   :explanation "...)
			dst = history.AppendValue(dst, r.Explanation)
		}
		dst = append(dst, '}')
	}
	if len(rs.Processes) > 0 {
		m := make(map[any]any, len(rs.Processes))
		for p, name := range rs.Processes {
			m[int64(p)] = name
		}
		dst = append(dst, ",\n :processes "...)
		dst = history.AppendValue(dst, m)
	}
	return append(dst, "}\n"...)
}

// recovered turns a checker panic into an :unknown result that says why,
// so that one broken check never takes the whole verdict down.
func recovered(name string, r *Result) {
	if p := recover(); p != nil {
		*r = Result{Name: name, Valid: Unknown, Explanation: fmt.Sprintf("checker panicked: %v", p)}
		if e, ok := p.(spillError); ok {
			r.Explanation = e.Error()
		}
	}
}
