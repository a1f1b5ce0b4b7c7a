package report

import (
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// run is a history of n sections of one process, each an acquire, read,
// write and release of the given latencies, one after another; every
// tenth section's write fails. A pause of the process from 2 s to 3 s.
func run(n int, lat time.Duration) []history.Op {
	var ops []history.Op
	t := int64(0)
	add := func(typ history.Type, p history.Process, f history.Keyword, v any) {
		ops = append(ops, history.Op{Index: int64(len(ops)), Time: t, Type: typ, Process: p, F: f, Value: v})
	}
	pause := map[history.Keyword]any{"kind": history.Keyword("sigstop"), "process": int64(0)}
	paused := false
	for i := range n {
		for _, f := range []history.Keyword{history.FAcquire, history.FRead, history.FWrite, history.FRelease} {
			add(history.Invoke, 0, f, nil)
			t += int64(lat)
			typ := history.Ok
			if f == history.FWrite && i%10 == 9 {
				typ = history.Fail
			}
			add(typ, 0, f, nil)
		}
		if !paused && t >= 2e9 {
			add(history.Info, history.Nemesis, history.FPause, pause)
			t += 1e9
			add(history.Info, history.Nemesis, history.FResume, pause)
			paused = true
		}
	}
	return ops
}

// TestPerfBounded: a long history keeps a bounded sample and bounded
// buckets, the rate counts every completion, and the quantiles are the
// latencies' within a sixteenth.
func TestPerfBounded(t *testing.T) {
	const n = 200_000
	p := NewPerf()
	for _, o := range run(n, time.Millisecond) { // 800 s
		p.Add(o)
	}
	var completions int64
	for s, rs := range p.rate {
		if len(rs) > maxBuckets {
			t.Errorf("%v: %d rate buckets, more than %d", s, len(rs), maxBuckets)
		}
		for _, c := range rs {
			completions += c
		}
	}
	if completions != 4*n {
		t.Errorf("rate counts %d completions, want %d", completions, 4*n)
	}
	for s, sm := range p.raw {
		if len(sm.pts) > maxPoints || len(sm.pts) < maxPoints/2 {
			t.Errorf("%v: %d raw points, want between %d and %d", s, len(sm.pts), maxPoints/2, maxPoints)
		}
	}
	if got := p.rate[Series{F: history.FWrite, Type: history.Fail}]; sum(got) != n/10 {
		t.Errorf("%d failed writes counted, want %d", sum(got), n/10)
	}
	for _, h := range p.quant[history.FRead] {
		if v, ok := h.quantile(0.5); ok && (v > int64(time.Millisecond) || v < int64(time.Millisecond)*15/16) {
			t.Fatalf("median read latency %v, want 1ms within a sixteenth", time.Duration(v))
		}
	}
	p.finish()
	if ws := p.windows(); len(ws) != 1 || ws[0].Start < 2e9 || ws[0].End-ws[0].Start != 1e9 {
		t.Errorf("fault windows %+v, want one of 1 s after 2 s", ws)
	}
}

func sum(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// TestSlot: every latency falls in a slot whose value is at most it and
// more than fifteen sixteenths of it.
func TestSlot(t *testing.T) {
	for _, ns := range []int64{0, 1, 15, 16, 17, 31, 32, 1000, 999_999, 1e6, 123_456_789, 1 << 40, 5e12} {
		v := slotValue(slot(ns))
		if v > ns || ns > 16 && v*16 < ns*15 {
			t.Errorf("latency %d: slot %d of value %d", ns, slot(ns), v)
		}
	}
}

// TestWritePlots: the three plots are PNG images; a history without :time
// has none.
func TestWritePlots(t *testing.T) {
	dir := t.TempDir()
	p := NewPerf()
	for _, o := range run(5000, time.Millisecond) {
		p.Add(o)
	}
	if err := p.WritePlots(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{LatencyRaw, LatencyQuantiles, Rate} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() < 800 {
			t.Errorf("%s: %v, %v", name, err, img)
		}
	}
	untimed := NewPerf()
	untimed.Add(history.Op{Time: history.Unset, Type: history.Invoke, F: history.FRead})
	if err := untimed.WritePlots(t.TempDir()); !errors.Is(err, ErrUntimed) {
		t.Errorf("untimed history: %v, want ErrUntimed", err)
	}
}

// TestPerfFailedFault: a fault the nemesis could not begin shades nothing.
func TestPerfFailedFault(t *testing.T) {
	p := NewPerf()
	for _, o := range run(50, time.Millisecond) {
		p.Add(o)
	}
	p.Add(history.Op{Index: 1000, Time: 5e6, Type: history.Info, Process: history.Nemesis, F: history.FPause,
		Value: map[history.Keyword]any{"kind": history.Keyword("sigstop"), "process": int64(0), "error": "no such process"}})
	p.finish()
	if ws := p.windows(); len(ws) != 0 {
		t.Errorf("a fault that never began shades %+v", ws)
	}
}

// TestFaultsOfTwoKinds: an in-section stop and the nemesis's SIGSTOP of the
// same process overlap; each band runs from its begin to its own end.
func TestFaultsOfTwoKinds(t *testing.T) {
	ev := func(f history.Keyword, kind string, ms int64) history.Op {
		return history.Op{Time: ms * 1e6, Type: history.Info, Process: history.Nemesis, F: f,
			Value: map[history.Keyword]any{"process": int64(2), "kind": history.Keyword(kind)}}
	}
	var l faultLog
	for _, o := range []history.Op{ev(history.FPause, "stop", 100), ev(history.FPause, "sigstop", 200),
		ev(history.FResume, "stop", 900), ev(history.FResume, "sigstop", 1000)} {
		l.add(o)
	}
	l.finish(5000e6)
	if len(l.faults) != 2 {
		t.Fatalf("faults %+v, want 2", l.faults)
	}
	for i, w := range [][2]int64{{100e6, 900e6}, {200e6, 1000e6}} {
		if f := l.faults[i]; f.Start != w[0] || f.End != w[1] {
			t.Errorf("fault %d (%s): %d–%d, want %d–%d", i, f.Kind, f.Start, f.End, w[0], w[1])
		}
	}
}
