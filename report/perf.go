// Package report draws offline pictures of a run from its history and its
// results: Jepsen's performance plots (latency-raw.png,
// latency-quantiles.png, rate.png) with the nemesis's fault windows shaded,
// and timeline.html, the run on the Redis clock coloured by what the check
// found; and it reads a run directory's summary for them and for `hiatus
// serve`. A saved history gives the same pictures months later; nothing
// here knows how the run was made.
package report

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
)

// Limits that bound a Perf's memory, whatever the length of the history.
const (
	maxBuckets = 512    // time buckets of the quantile and rate plots; they widen as the run grows
	maxPoints  = 20_000 // latency-raw points a series keeps; beyond, every other one is dropped
	firstWidth = 100e6  // ns: the width of a time bucket until the run outgrows maxBuckets of them
	subBuckets = 16     // latency histogram slots per doubling: quantiles within 1/16 of the truth
)

// A Perf gathers, one op at a time, what the performance plots show. Its
// memory is bounded by the pictures' resolution, not by the history: each
// latency-raw series keeps an evenly thinned sample (every 2^k-th op) and
// the largest latency of each time bucket, and the quantiles come from a
// log-scale histogram a time bucket.
type Perf struct {
	open    map[history.Process]opened
	raw     map[Series]*sample
	peaks   map[Series][]point              // the largest latency of each bucket
	quant   map[history.Keyword][]histogram // per :f, ok ops only: one histogram a bucket
	rate    map[Series][]int64              // completions a bucket
	width   int64                           // ns a bucket
	faults  faultLog
	end     int64 // the latest :time
	untimed bool
}

// A Series is the ops of one :f with one outcome.
type Series struct {
	F    history.Keyword
	Type history.Type // ok, fail or info
}

func (s Series) String() string { return fmt.Sprintf("%s %s", s.F, s.Type) }

// A Window is a fault, from the event that began it to the one that ended
// it (or the history's end).
type Window struct {
	Kind       history.Keyword
	Start, End int64 // ns on the history's clock
}

type opened struct {
	f    history.Keyword
	time int64
}

// A point is one op's latency at its invocation.
type point struct{ at, latency int64 }

// A sample keeps every stride-th point of a series, and the largest of each
// bucket, so that a thinned plot still shows every pause.
type sample struct {
	n      int64 // points offered
	stride int64
	pts    []point
}

// A histogram counts latencies in log-scale slots.
type histogram []uint32

// NewPerf returns an empty Perf.
func NewPerf() *Perf {
	return &Perf{open: map[history.Process]opened{}, raw: map[Series]*sample{}, peaks: map[Series][]point{},
		quant: map[history.Keyword][]histogram{}, rate: map[Series][]int64{}, width: firstWidth}
}

// Add takes the next op of a history in time order.
func (p *Perf) Add(o history.Op) {
	if o.Time == history.Unset {
		p.untimed = true
		return
	}
	p.end = max(p.end, o.Time)
	if !o.IsClient() {
		p.faults.add(o)
		return
	}
	if o.Type == history.Invoke {
		p.open[o.Process] = opened{f: o.F, time: o.Time}
		return
	}
	inv, ok := p.open[o.Process]
	if !ok {
		return
	}
	delete(p.open, o.Process)
	s := Series{F: inv.f, Type: o.Type}
	lat := max(o.Time-inv.time, 0)
	p.grow(o.Time)
	p.sample(s).add(point{at: inv.time, latency: lat})
	p.peak(s, point{at: inv.time, latency: lat})
	p.bump(s, o.Time)
	if o.Type == history.Ok {
		hs := p.quant[s.F]
		b := p.bucket(inv.time)
		for len(hs) <= b {
			hs = append(hs, nil)
		}
		if hs[b] == nil {
			hs[b] = make(histogram, 64*subBuckets)
		}
		hs[b][slot(lat)]++
		p.quant[s.F] = hs
	}
}

func (p *Perf) sample(s Series) *sample {
	sm := p.raw[s]
	if sm == nil {
		sm = &sample{stride: 1}
		p.raw[s] = sm
	}
	return sm
}

func (sm *sample) add(pt point) {
	sm.n++
	if sm.n%sm.stride == 0 {
		sm.pts = append(sm.pts, pt)
	}
	if len(sm.pts) > maxPoints {
		// Every other point goes, in one pass; the stride doubles.
		keep := sm.pts[:0]
		for i, q := range sm.pts {
			if i%2 == 1 {
				keep = append(keep, q)
			}
		}
		sm.pts, sm.stride = keep, sm.stride*2
	}
}

func (p *Perf) peak(s Series, pt point) {
	ps := p.peaks[s]
	b := p.bucket(pt.at)
	for len(ps) <= b {
		ps = append(ps, point{latency: -1})
	}
	if pt.latency > ps[b].latency {
		ps[b] = pt
	}
	p.peaks[s] = ps
}

func (p *Perf) bump(s Series, t int64) {
	rs := p.rate[s]
	b := p.bucket(t)
	for len(rs) <= b {
		rs = append(rs, 0)
	}
	rs[b]++
	p.rate[s] = rs
}

// bucket is the time bucket of t.
func (p *Perf) bucket(t int64) int { return int(max(t, 0) / p.width) }

// grow widens the buckets, merging pairs, until t falls in one of them.
func (p *Perf) grow(t int64) {
	for p.bucket(t) >= maxBuckets {
		p.width *= 2
		for s, rs := range p.rate {
			for i := range rs {
				if i%2 == 1 {
					rs[i/2] += rs[i]
				} else {
					rs[i/2] = rs[i]
				}
			}
			p.rate[s] = rs[:(len(rs)+1)/2]
		}
		for s, ps := range p.peaks {
			for i := range ps {
				if i%2 == 0 || ps[i].latency > ps[i/2].latency {
					ps[i/2] = ps[i]
				}
			}
			p.peaks[s] = ps[:(len(ps)+1)/2]
		}
		for f, hs := range p.quant {
			for i := range hs {
				switch {
				case i%2 == 0:
					hs[i/2] = hs[i]
				case hs[i/2] == nil:
					hs[i/2] = hs[i]
				case hs[i] != nil:
					for j, n := range hs[i] {
						hs[i/2][j] += n
					}
				}
			}
			p.quant[f] = hs[:(len(hs)+1)/2]
		}
	}
}

// slot is the histogram slot of a latency of ns nanoseconds: its power of
// two, then which sixteenth of it.
func slot(ns int64) int {
	if ns < subBuckets {
		return int(ns)
	}
	e := bits.Len64(uint64(ns)) - 1 // 2^e <= ns < 2^(e+1)
	frac := int((uint64(ns) >> (e - 4)) & (subBuckets - 1))
	return min(e*subBuckets+frac, 64*subBuckets-1)
}

// slotValue is the smallest latency of a slot.
func slotValue(s int) int64 {
	if s < subBuckets {
		return int64(s)
	}
	e, frac := s/subBuckets, s%subBuckets
	return int64(1)<<e + int64(frac)<<(e-4)
}

// quantile returns the q-quantile of h, and false when h is empty.
func (h histogram) quantile(q float64) (int64, bool) {
	var total uint64
	for _, n := range h {
		total += uint64(n)
	}
	if total == 0 {
		return 0, false
	}
	rank := uint64(q*float64(total-1)) + 1
	var seen uint64
	for s, n := range h {
		if seen += uint64(n); seen >= rank {
			return slotValue(s), true
		}
	}
	return slotValue(len(h) - 1), true
}

// finish closes the fault windows still open at the history's end.
func (p *Perf) finish() { p.faults.finish(p.end) }

// windows are the faults the plots shade: those that began.
func (p *Perf) windows() []Window {
	var ws []Window
	for _, f := range p.faults.faults {
		if !f.Failed {
			ws = append(ws, Window{Kind: f.Kind, Start: f.Start, End: f.End})
		}
	}
	return ws
}

// series returns the keys of m in a stable order: by :f, then outcome.
func series[V any](m map[Series]V) []Series {
	out := make([]Series, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Series) int { return cmp.Or(cmp.Compare(a.F, b.F), cmp.Compare(a.Type, b.Type)) })
	return out
}
