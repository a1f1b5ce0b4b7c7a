package report

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
)

//go:embed timeline.js
var timelineJS string

//go:embed timeline.css
var timelineCSS string

// ErrNoSections is returned for a history with no critical section in the
// window asked for: the timeline would be empty.
var ErrNoSections = errors.New("no critical section to draw")

// A TimelinePage is what timeline.html shows besides the history: the
// run's summary, and a link to porcupine's view of it when there is one.
type TimelinePage struct {
	Summary
	Linear string // porcupine's page, relative to the timeline; "" if none
	Source string // the history's path, as the page names it
}

// WriteHTML writes timeline.html: one self-contained page, its script and
// data inline, that works offline.
func (t *Timeline) WriteHTML(w io.Writer, page TimelinePage) error {
	switch {
	case t.untimed:
		return ErrUntimed
	case t.unsorted:
		return ErrUnsorted
	}
	t.finish()
	if len(t.secs) == 0 {
		return ErrNoSections
	}
	data, err := json.Marshal(t.data())
	if err != nil {
		return fmt.Errorf("timeline data: %w", err)
	}
	return timelinePage.Execute(w, struct {
		TimelinePage
		Shown string
		Data  template.JS // encoding/json escapes <, > and &: no </script> can end it early
		JS    template.JS
		CSS   template.CSS
	}{page, t.shown(), template.JS(data), template.JS(timelineJS), template.CSS(timelineCSS)})
}

// shown says how much of the history the page holds, when not all of it.
func (t *Timeline) shown() string {
	if kept := len(t.secs); kept < t.total {
		return fmt.Sprintf("This timeline holds %d of the history's %d critical sections, from %s to %s; "+
			"hiatus timeline --from and --to draw another window.", kept, t.total,
			ms(t.secs[0].start-t.first), ms(t.secs[kept-1].start-t.first))
	}
	return ""
}

func ms(ns int64) string { return fmt.Sprintf("%.3f s", float64(ns)/1e9) }

// tlData is the page's data, in columns: one entry a section, times in µs
// from the first op, each column coded so that its numbers are short
// (starts and acquire indexes as differences from the section before,
// other times from the section's start). timeline.js decodes it.
type tlData struct {
	End      int64             `json:"end"` // µs: the last op
	Rows     []tlRow           `json:"rows"`
	Faults   []fault           `json:"faults"`
	FaultAt  [][2]int64        `json:"faultAt"`  // µs: each fault's start and end
	FaultRow []int             `json:"faultRow"` // -1: every row
	Marks    []tlMark          `json:"marks"`
	MarkAt   []int64           `json:"markAt"`
	MarkRow  []int             `json:"markRow"`
	Rels     []history.Keyword `json:"rels"`
	S        tlColumns         `json:"s"`
	Server   tlServer          `json:"server"` // the lock server's record: a row a node, under the workers'
}

type tlColumns struct {
	Row   []int   `json:"row"`
	Proc  []int64 `json:"proc"`
	Acq   []int64 `json:"acq"`   // difference from the section before
	T0    []int64 `json:"t0"`    // µs, difference from the section before
	D     []int64 `json:"d"`     // µs the section lasted
	Lease []int64 `json:"lease"` // ms; 0 if not recorded
	Fence []int64 `json:"fence"`
	RA    []int64 `json:"ra"` // µs after the start the read completed; -1 if none
	R     []int64 `json:"r"`
	WI    []int64 `json:"wi"` // µs after the start the write was sent
	WV    []int64 `json:"wv"`
	WT    []int   `json:"wt"`  // 0 no write, 1 ok, 2 fail, 3 info
	WX    []int64 `json:"wx"`  // the write's completion index less the acquire's; -1 if none
	Rel   []int   `json:"rel"` // index into rels: how the release ended
	Ext   []int   `json:"ext"` // index into rels: how the extend before the write ended; 0 none
	Flags []int   `json:"fl"`  // flag bits; not []uint8, which JSON would make base64
	Top   []int64 `json:"top"` // a stale write: the counter's value when it was sent
}

func (t *Timeline) data() tlData {
	us := func(ns int64) int64 { return (ns - t.first) / 1e3 }
	rowOf, rows := t.rows()
	// Every list is there, empty or not: the page reads them all.
	d := tlData{End: us(t.last), Rows: rows, Rels: []history.Keyword{""},
		Faults: []fault{}, FaultAt: [][2]int64{}, FaultRow: []int{}, Marks: []tlMark{}, MarkAt: []int64{}, MarkRow: []int{}}
	from, to := t.secs[0].start, t.last
	if t.dropped > 0 || t.To > 0 {
		to = slices.MaxFunc(t.secs, func(a, b tlSection) int { return cmp.Compare(a.end, b.end) }).end
	}
	for _, f := range t.faults.faults {
		if f.End < from || f.Start > to {
			continue // outside the window
		}
		row, ok := rowOf[history.Process(f.Proc)]
		if !ok {
			row = -1
		}
		d.Faults, d.FaultAt, d.FaultRow = append(d.Faults, f), append(d.FaultAt, [2]int64{us(f.Start), us(f.End)}), append(d.FaultRow, row)
	}
	for _, m := range t.marks {
		d.Marks, d.MarkAt, d.MarkRow = append(d.Marks, m), append(d.MarkAt, us(m.At)), append(d.MarkRow, rowOf[history.Process(m.Proc)])
	}
	d.Server = t.serverData(us)
	rel := map[history.Keyword]int{"": 0}
	c := &d.S
	var prevT0, prevAcq int64
	for _, s := range t.secs {
		t0 := us(s.start)
		c.Row, c.Proc = append(c.Row, rowOf[s.proc]), append(c.Proc, int64(s.proc))
		c.Acq, c.T0, prevAcq, prevT0 = append(c.Acq, s.acq-prevAcq), append(c.T0, t0-prevT0), s.acq, t0
		c.D, c.Lease, c.Fence = append(c.D, us(s.end)-t0), append(c.Lease, s.lease/1e6), append(c.Fence, s.fence)
		ra := int64(-1)
		if s.readAt >= 0 {
			ra = us(s.readAt) - t0
		}
		c.RA, c.R = append(c.RA, ra), append(c.R, s.read)
		wt, wi, wx := 0, int64(0), int64(-1)
		if s.sent {
			wt, wi = 3, us(s.wInv)-t0 // sent and never completed: of unknown outcome
		}
		if s.wType != 0 {
			wt = writeCode(s.wType)
		}
		if s.wIdx >= 0 {
			wx = s.wIdx - s.acq
		}
		c.WI, c.WV, c.WT, c.WX = append(c.WI, wi), append(c.WV, s.wValue), append(c.WT, wt), append(c.WX, wx)
		code := func(k history.Keyword) int {
			r, ok := rel[k]
			if !ok {
				r = len(d.Rels)
				rel[k] = r
				d.Rels = append(d.Rels, k)
			}
			return r
		}
		r := code(s.rel)
		c.Ext = append(c.Ext, code(s.ext))
		c.Rel, c.Flags, c.Top = append(c.Rel, r), append(c.Flags, int(s.flags)), append(c.Top, s.top) // top is set on stale writes only
	}
	return d
}

// writeCode codes a write's outcome for the page: 0 no write (or one
// never invoked), 1 ok, 2 fail, 3 info or never completed.
func writeCode(t history.Type) int {
	switch t {
	case history.Ok:
		return 1
	case history.Fail:
		return 2
	case history.Info:
		return 3
	}
	return 0
}

var timelinePage = template.Must(template.New("timeline").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>hiatus timeline: {{.Name}}</title>
<style>{{.CSS}}</style></head><body>
<header>
<h1>{{.Name}} <span class="verdict v-{{.Verdict}}">valid? {{.Verdict}}</span></h1>
<p class="muted">{{if not .Started.IsZero}}{{.Started.Format "2006-01-02 15:04:05"}} UTC · {{end}}{{.Config}}{{if .Source}} · {{.Source}}{{end}}</p>
{{if .Figures}}<p>{{.Figures}}</p>{{end}}
<div id="checks">{{range .Checks}}<p class="check"><span class="verdict v-{{.Verdict}}">{{.Name}}</span> <span class="expl">{{if .Explanation}}{{.Explanation}}{{else}}valid? {{.Verdict}}{{end}}</span></p>{{end}}</div>
{{if .Shown}}<p class="note">{{.Shown}}</p>{{end}}
</header>
<nav class="tabs"><a class="tab on" href="#">Timeline</a>{{if .Linear}}<a class="tab" href="{{.Linear}}">Linearizability (porcupine)</a>{{else}}<span class="tab off" title="hiatus check --html linear.html history.edn makes it">Linearizability (porcupine): not made; <code>hiatus check --html linear.html history.edn</code></span>{{end}}</nav>
<div id="toolbar">
<button id="fit" title="the whole history (0)">fit</button>
<button id="zoomout" title="zoom out (-)">−</button>
<button id="zoomin" title="zoom in (+)">+</button>
<button id="go-first" title="the first violation (f); #first in the address opens at it">first violation</button>
<button id="prev" title="the violation before (p)">◀</button>
<button id="next" title="the next violation (n)">▶</button>
<span id="status" data-t0="" data-t1="" data-drawn=""></span>
<span class="muted">wheel: zoom · drag: pan · click a section: its ops</span>
</div>
<div id="legend"></div>
<div id="chart"><canvas id="canvas"></canvas><div id="tip" hidden></div></div>
<section id="details"><h2>Selected</h2><div id="selected" class="muted">Click a section, a fault or an op named in an explanation.</div>
<h2>Violations</h2><div id="violations"></div></section>
<script id="data" type="application/json">{{.Data}}</script>
<script>{{.JS}}</script>
</body></html>`))
