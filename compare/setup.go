// Package compare runs grids of hiatus runs — the reference table, locks ×
// pauses × fencing, or a sweep of the pause/lease ratio — and tabulates and
// plots their figures. It knows nothing of how a run is made: the command
// hands it a function that runs one Setup and returns its Figures.
package compare

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// Pause kinds a Setup may have.
const (
	PauseNone    = "none"                      // no faults
	PauseSigStop = string(nemesis.KindSigStop) // the nemesis SIGSTOPs a random worker every Interval
	PauseSleep   = string(nemesis.KindSleep)   // a worker blocks inside its every Every-th section
	PauseStop    = string(nemesis.KindStop)    // a worker SIGSTOPs its own process inside its every Every-th section
	// PauseStopWaiters: a worker blocks inside its every Every-th section,
	// and the workers waiting for the lock meanwhile are SIGSTOPped as long.
	PauseStopWaiters = string(nemesis.KindStopWaiters)
)

// DefaultPauses are the pauses a grid compares when --pauses names none:
// the nemesis's and two in-section kinds, or for a sweep the nemesis's.
func DefaultPauses(sweep bool) string {
	if sweep {
		return PauseSigStop
	}
	return strings.Join([]string{PauseSigStop, PauseSleep, PauseStop}, ",")
}

// PauseChoices lists the pauses a Setup may have, in the order tables
// show them: none, the nemesis's sigstop, and the in-section kinds.
func PauseChoices() []string {
	return []string{PauseNone, PauseSigStop, PauseSleep, PauseStop, PauseStopWaiters}
}

// A Setup is what the runs of one row are made of, apart from what every row
// of a grid shares (workers, time limit, work).
type Setup struct {
	Lock     string
	Lease    time.Duration
	Pause    string        // one of PauseChoices
	PauseLen time.Duration // how long each pause lasts
	Interval time.Duration // between SIGSTOP pauses
	Every    int           // in-section pauses: every Every-th section of each worker
	Fenced   bool
	Ratio    float64 // in a sweep, the row's pause/lease ratio; 0 elsewhere

	// A scenario's row (Scenarios) names it, and sets what the grids leave
	// to the base: the faults (Nemesis, instead of Pause's), the guard,
	// and the work and time limit when not zero.
	Scenario    string
	Nemesis     string
	Guard       client.Guard
	Work, Limit time.Duration
	// A finding's row (Findings) says which side of it it is (affected or
	// fixed) and the library's version; Extend has each holder extend its
	// grant before it writes.
	Side, Version string
	Extend        bool
	NodeAOF       bool // the lock's nodes fsync every write (--node-aof)
	Workers       int  // when not zero, the scenario's own number of workers
	// Nodes and AdapterStore, when set, are the scenario's lock nodes
	// (--nodes) and where its adapter keeps the lock (--adapter-store).
	Nodes        int
	AdapterStore string
	// Probe is a census row's column: the battery's fault it runs
	// under (Probes); Delay is what its delay faults add (--delay).
	Probe string
	Delay time.Duration
	// Retry, when set, is the wait between attempts (--retry): a
	// finding's schedule may need waiters that poll slowly.
	Retry time.Duration
}

// Slug names the setup in run names: setnx-500ms-sigstop-fenced.
func (s Setup) Slug() string {
	switch {
	case s.Probe != "":
		return s.Scenario + "-" + slugWord(s.Version+" "+s.Side) + "-" + s.Probe
	case s.Side != "":
		return s.Scenario + "-" + s.Side
	case s.Scenario != "":
		return s.Scenario + "-" + string(s.Guard)
	}
	parts := []string{client.LockLabel(s.Lock), s.Lease.String(), s.Pause}
	if s.Fenced {
		parts = append(parts, "fenced")
	}
	return strings.Join(parts, "-")
}

// Short is a compact label, for plots.
func (s Setup) Short() string {
	switch {
	case s.Probe != "":
		return fmt.Sprintf("%s, %s: %s", s.Version, s.Side, s.Probe)
	case s.Side != "":
		return fmt.Sprintf("%s %s (%s)", s.Scenario, s.Side, s.Version)
	case s.Scenario != "":
		return fmt.Sprintf("%s %s guard %s", s.Scenario, client.LockLabel(s.Lock), s.Guard)
	}
	label := fmt.Sprintf("%s %s %s", client.LockLabel(s.Lock), duration(s.Lease), s.Pause)
	if s.Fenced {
		label += " fenced"
	}
	return label
}

// PauseLabel says in words what the pause is.
func (s Setup) PauseLabel() string {
	if s.Nemesis != "" && s.Nemesis != PauseNone {
		return fmt.Sprintf("%s %s every %s", s.Nemesis, duration(s.PauseLen), duration(s.Interval))
	}
	switch s.Pause {
	case PauseSigStop:
		return fmt.Sprintf("SIGSTOP %s every %s", duration(s.PauseLen), duration(s.Interval))
	case PauseSleep:
		return fmt.Sprintf("blocking %s pause in every %s section", duration(s.PauseLen), ordinal(s.Every))
	case PauseStop:
		return fmt.Sprintf("self-SIGSTOP %s in every %s section", duration(s.PauseLen), ordinal(s.Every))
	case PauseStopWaiters:
		return fmt.Sprintf("waiters SIGSTOPped %s while the holder blocks, in every %s section", duration(s.PauseLen), ordinal(s.Every))
	}
	return "no faults"
}

// duration writes d as a table reads best: 500 ms, 2 s, 0.8 s.
func duration(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// Faults are the pause parameters every row of a grid shares.
type Faults struct {
	Pause    time.Duration // length of each pause
	Interval time.Duration // between SIGSTOP pauses
	Every    int           // in-section pauses: every Every-th section
}

func (f Faults) setup(lock string, lease time.Duration, pause string, fenced bool) Setup {
	return Setup{Lock: lock, Lease: lease, Pause: pause, PauseLen: f.Pause, Interval: f.Interval,
		Every: f.Every, Fenced: fenced}
}

// Reference is the reference grid of the setnx lock: a 500 ms lease without
// faults, under SIGSTOP, and under a blocking in-section pause; a 2 s lease
// under SIGSTOP; and the 500 ms lease fenced under both pauses.
func Reference(f Faults) []Setup {
	const lease, long = 500 * time.Millisecond, 2 * time.Second
	return []Setup{
		f.setup("setnx", lease, PauseNone, false),
		f.setup("setnx", lease, PauseSigStop, false),
		f.setup("setnx", long, PauseSigStop, false),
		f.setup("setnx", lease, PauseSleep, false),
		f.setup("setnx", lease, PauseSigStop, true),
		f.setup("setnx", lease, PauseSleep, true),
	}
}

// Grid is every lock under every pause, with each fencing choice: one row
// per combination, the lock varying slowest.
func Grid(f Faults, locks, pauses []string, fencing []bool, lease time.Duration) []Setup {
	var out []Setup
	for _, l := range locks {
		for _, p := range pauses {
			for _, fenced := range fencing {
				out = append(out, f.setup(l, lease, p, fenced))
			}
		}
	}
	return out
}

// Sweep is Grid over a range of pause/lease ratios: the pause stays
// f.Pause, so every row suffers the same faults, and the lease is
// f.Pause/ratio, rounded to the millisecond. Rows of one series (lock,
// pause, fencing) are adjacent, by increasing ratio.
func Sweep(f Faults, locks, pauses []string, fencing []bool, ratios []float64) []Setup {
	var out []Setup
	for _, s := range Grid(f, locks, pauses, fencing, 0) {
		for _, r := range ratios {
			s.Ratio = r
			s.Lease = max(time.Millisecond, (time.Duration(float64(f.Pause)/r) + time.Millisecond/2).Truncate(time.Millisecond))
			out = append(out, s)
		}
	}
	return out
}

// ParseSweep reads a sweep's range, "pause/lease=A..B".
func ParseSweep(s string) (lo, hi float64, err error) {
	rest, ok := strings.CutPrefix(s, "pause/lease=")
	if !ok {
		return 0, 0, fmt.Errorf("--sweep %q: want pause/lease=A..B, as pause/lease=0.25..4", s)
	}
	a, b, ok := strings.Cut(rest, "..")
	if !ok {
		return 0, 0, fmt.Errorf("--sweep %q: want a range A..B", s)
	}
	if lo, err = strconv.ParseFloat(a, 64); err == nil {
		hi, err = strconv.ParseFloat(b, 64)
	}
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("--sweep %q: %w", s, err)
	case !(lo > 0) || math.IsInf(hi, 0) || !(hi >= lo):
		return 0, 0, fmt.Errorf("--sweep %q: want 0 < A <= B", s)
	}
	return lo, hi, nil
}

// Ratios returns steps ratios from lo to hi, evenly spaced on a log scale:
// a ratio and its inverse are equally far from 1, and 0.25..4 in 5 steps is
// 0.25, 0.5, 1, 2, 4.
func Ratios(lo, hi float64, steps int) []float64 {
	if steps <= 1 || lo == hi {
		return []float64{lo}
	}
	out := make([]float64, steps)
	for i := range out {
		r := lo * math.Pow(hi/lo, float64(i)/float64(steps-1))
		// Trim the float noise of the power, so that 1 is 1.
		out[i] = math.Round(r*1e6) / 1e6
	}
	return out
}
