package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/browser"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// writeTimeline writes the timeline of a generated history into a new
// directory and returns the page's path and the Timeline.
func writeTimeline(t testing.TB, cfg gen.Config, page TimelinePage) (string, *Timeline) {
	t.Helper()
	ops, _, err := gen.Ops(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tl := timelineOf(ops, cfg.Workers)
	path := filepath.Join(t.TempDir(), TimelineFile)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := tl.WriteHTML(f, page); err != nil {
		t.Fatal(err)
	}
	return path, tl
}

// evalInto evaluates a script into dst.
func evalInto[T any](dst *T, script string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		v, err := chromedp.Evaluate[T](script)(ctx, tg)
		*dst = v
		return err
	})
}

// viewRange is the span of history the canvas shows, in µs.
func viewRange(ctx context.Context, t *testing.T) [2]float64 {
	t.Helper()
	r, err := chromedp.Run(ctx, chromedp.Evaluate[[2]float64](`timeline.range`))
	if err != nil {
		t.Fatalf("read the view: %v", err)
	}
	return r
}

// TestTimelineInBrowser drives the page in headless Chromium as a person
// would: it draws every section of the history, "first violation" brings
// the first stale write or lost update into view and describes it, the
// wheel zooms, a drag pans, an op named in an explanation is a link to it,
// and a history's words stay text.
func TestTimelineInBrowser(t *testing.T) {
	evil := `<img src=x onerror="document.title='pwned'">`
	probe, tl := writeTimeline(t, gen.Config{Sections: 400, Workers: 4, Lost: 3, Seed: 2}, TimelinePage{})
	os.Remove(probe)
	tl.finish()
	stale := flagged(tl, flagStale|flagLost)
	slices.SortFunc(stale, func(a, b *tlSection) int { return int(a.start - b.start) })
	if len(stale) == 0 {
		t.Fatal("the generated history has no stale write to find")
	}
	first := stale[0]
	// The explanation names an op of the last stale write, far from the
	// first, so that following its link moves the view.
	last := stale[len(stale)-1]
	expl := fmt.Sprintf("first stale write: op %d %s", last.wIdx, evil)
	path, _ := writeTimeline(t, gen.Config{Sections: 400, Workers: 4, Lost: 3, Seed: 2}, TimelinePage{
		Summary: Summary{Name: "gen", Verdict: "false", Checks: []Check{{Name: "lock-counter", Verdict: "false", Explanation: expl}}}})
	us := func(ns int64) float64 { return float64((ns - tl.first) / 1e3) }
	within := func(r [2]float64, at float64) bool { return r[0] <= at && at <= r[1] }

	ctx := browser.New(t, 1400, 900, 2*time.Minute)
	var sections, drawn int
	var title, checks string
	var injected int
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path),
		evalInto(&sections, `timeline.sections`),
		evalInto(&drawn, `+document.getElementById("status").dataset.drawn`),
		evalInto(&title, `document.title`),
		evalInto(&checks, `document.getElementById("checks").textContent`),
		evalInto(&injected, `document.querySelectorAll("#checks img, #checks script").length`),
	); err != nil {
		t.Fatal(err)
	}
	if sections != len(tl.secs) || drawn == 0 {
		t.Errorf("the page holds %d sections and drew %d; want %d, some drawn", sections, drawn, len(tl.secs))
	}
	if title == "pwned" || injected != 0 || !strings.Contains(checks, evil) {
		t.Errorf("an explanation's markup was not kept as text: title %q, %d elements, text %q", title, injected, checks)
	}

	whole := viewRange(ctx, t)
	var selected string
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("go-first")),
		evalInto(&selected, `document.getElementById("selected").textContent`)); err != nil {
		t.Fatal(err)
	}
	r := viewRange(ctx, t)
	if !within(r, us(first.start)) || r[1]-r[0] >= whole[1]-whole[0] {
		t.Errorf("first violation: the view is %v µs, want a narrower one around %v", r, us(first.start))
	}
	if !strings.Contains(selected, "STALE WRITE") && !strings.Contains(selected, "LOST UPDATE") {
		t.Errorf("first violation: the details say %q", selected)
	}
	seen := looks(ctx, t)
	if seen.Verdict != "valid? false" {
		t.Errorf("the header says %q, want valid? false", seen.Verdict)
	}
	if !near(seen.Bar, 214, 32, 32) && !near(seen.Bar, 142, 36, 170) {
		t.Errorf("the first violation's bar is drawn in %v, not a violation's red or purple", seen.Bar)
	}
	if seen.Lease >= seen.End || !near(seen.Overran, 214, 32, 32) || !near(seen.LeaseLine, 159, 208, 240) {
		t.Errorf("a section paused past its lease: lease ends at x=%.0f, the section at x=%.0f, past the lease %v, the lease line %v; "+
			"want the lease line blue and shorter, the part past it underlined red", seen.Lease, seen.End, seen.Overran, seen.LeaseLine)
	}
	browser.Screenshot(ctx, t, "timeline-first-violation")

	// The wheel zooms in about the pointer; a drag to the right shows what
	// came before.
	// A zero DeltaX would be left out of the event, and Chromium wants one.
	wheel := func(p *input.DispatchMouseEventParams) { p.DeltaX, p.DeltaY = 0.01, -500 }
	if err := chromedp.Do(ctx, chromedp.MouseEvent(chromedp.MouseWheel, 700, 300, wheel)); err != nil {
		t.Fatal(err)
	}
	zoomed := viewRange(ctx, t)
	if w0, w1 := r[1]-r[0], zoomed[1]-zoomed[0]; w1 > 0.9*w0 {
		t.Errorf("wheel: the view went from %.0f to %.0f µs wide, want narrower", w0, w1)
	}
	left := func(p *input.DispatchMouseEventParams) { p.Button, p.Buttons = input.MouseButtonLeft, 1 }
	if err := chromedp.Do(ctx,
		chromedp.MouseEvent(chromedp.MousePressed, 600, 300, left, chromedp.ClickCount(1)),
		chromedp.MouseEvent(chromedp.MouseMoved, 700, 300, left),
		chromedp.MouseEvent(chromedp.MouseMoved, 800, 300, left),
		chromedp.MouseEvent(chromedp.MouseReleased, 800, 300, left, chromedp.ClickCount(1)),
	); err != nil {
		t.Fatal(err)
	}
	panned := viewRange(ctx, t)
	if panned[0] >= zoomed[0] || panned[1]-panned[0] != zoomed[1]-zoomed[0] {
		t.Errorf("drag right: the view went from %v to %v, want the same width, earlier", zoomed, panned)
	}

	// A missing link or a view that never moves fails in seconds, not at
	// the browser's end.
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(short, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#checks a[href="#op-%d"]`, last.wIdx)))); err != nil {
		t.Fatalf("the explanation's op is no link: %v", err)
	}
	if err := chromedp.Do(short, chromedp.Poll[chromedp.Void](fmt.Sprintf(`timeline.range[0] <= %f && %f <= timeline.range[1]`, us(last.start), us(last.start)))); err != nil {
		t.Errorf("following op %d: the view %v misses its section at %v µs: %v", last.wIdx, viewRange(ctx, t), us(last.start), err)
	}
	browser.Screenshot(ctx, t, "timeline-op-link")
}

// What a person sees of the page: the verdict in the header and, as the
// canvas paints them, the colours of the first violation's bar and of a
// section that outlasted its lease (which it brings into view).
type sight struct {
	Verdict                 string
	Bar, Overran, LeaseLine []int
	Lease, End              float64
}

func looks(ctx context.Context, t *testing.T) sight {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[sight](`(() => {
		const c = document.getElementById("canvas"), d = devicePixelRatio || 1;
		const px = (x, y) => Array.from(c.getContext("2d").getImageData(Math.round(x * d), Math.round(y * d), 1, 1).data.slice(0, 3));
		const first = timeline.place(timeline.violations[0]);
		const bar = px((first.x0 + first.x1) / 2, first.top + first.barY + first.barH / 2);
		const i = timeline.violations.find(i => timeline.place(i).flags & 16);
		timeline.show(i);
		const p = timeline.place(i);
		return {Verdict: document.querySelector("h1 .verdict").textContent, Bar: bar,
			Overran: px((p.lease + p.x1) / 2, p.top + p.barY + p.barH + 2), // below the selection's outline
			LeaseLine: px((p.x0 + p.lease) / 2, p.top + p.leaseY + 1), Lease: p.lease, End: p.x1};
	})()`))
	if err != nil {
		t.Fatalf("look at the page: %v", err)
	}
	return v
}

// near reports whether a pixel is the colour r, g, b, give or take what
// anti-aliasing does.
func near(px []int, r, g, b int) bool {
	d := func(a, b int) int { return max(a-b, b-a) }
	return len(px) == 3 && d(px[0], r)+d(px[1], g)+d(px[2], b) < 40
}

// BenchmarkTimelineOpen measures how long Chromium takes to open the
// timeline of a history of 250,000 critical sections (2 million ops) and
// draw it whole: from the start of navigation to the end of the first
// draw, as the page's own clock tells (ms-to-drawn), and then how long a
// redraw of the whole takes (ms-a-redraw: each step of a zoom or a pan).
// Run it with
// go test ./report -run '^$' -bench TimelineOpen -benchtime 3x.
func BenchmarkTimelineOpen(b *testing.B) {
	path, tl := writeTimeline(b, gen.Config{Sections: 250_000, Workers: 8, Lost: 20, Seed: 9}, TimelinePage{Summary: Summary{Name: "bench"}})
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := browser.New(b, 1400, 900, 10*time.Minute)
	b.ResetTimer()
	// A redraw (a step of a zoom, a pan) with the whole history in view.
	const redraw = `(() => { timeline.fit(); const a = performance.now(); for (let i = 0; i < 10; i++) timeline.zoom(1); return (performance.now() - a) / 10; })()`
	var total, draws float64
	for b.Loop() {
		var ms, draw float64
		if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path), evalInto(&ms, `timeline.ready`), evalInto(&draw, redraw)); err != nil {
			b.Fatal(err)
		}
		total, draws = total+ms, draws+draw
	}
	b.ReportMetric(total/float64(b.N), "ms-to-drawn")
	b.ReportMetric(draws/float64(b.N), "ms-a-redraw")
	b.ReportMetric(float64(fi.Size())/1e6, "MB-page")
	b.ReportMetric(float64(len(tl.secs)), "sections")
}

// TestTimelineEdgesInBrowser: pages that once drew nothing or hung draw —
// a history with no fault, one whose ops span centuries, one of thousands
// of processes, one opened at a malformed address — and an op named in an
// explanation is shown at every click on it, not the first only.
func TestTimelineEdgesInBrowser(t *testing.T) {
	write := func(name string, ops []history.Op, page TimelinePage) string {
		tl := timelineOf(ops, 0)
		path := filepath.Join(t.TempDir(), name+".html")
		var buf bytes.Buffer
		if err := tl.WriteHTML(&buf, page); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	calm, _, err := gen.Ops(gen.Config{Sections: 500, Workers: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	centuries := append(slices.Clone(calm), history.Op{Index: int64(len(calm)), Time: 1e18, Type: history.Info,
		Process: history.Nemesis, F: history.FPause, Value: map[history.Keyword]any{"kind": history.Keyword("sigstop")}})
	var crowd []history.Op
	for p := range 3000 {
		crowd = append(crowd, section(history.Process(p), int64(10+p), int64(12+p), int64(13+p), int64(14+p), int64(p), int64(p+1))...)
	}
	crowd = sorted(crowd)
	op := timelineOf(calm, 0).secs[20].acq
	expl := TimelinePage{Summary: Summary{Checks: []Check{{Name: "lock-counter", Verdict: "false", Explanation: fmt.Sprintf("see op %d", op)}}}}
	ctx := browser.New(t, 1200, 800, 2*time.Minute)
	for _, tc := range []struct {
		name, path string
	}{
		{"no fault", write("calm", calm, expl)},
		{"centuries", write("centuries", centuries, TimelinePage{})},
		{"3000 processes", write("crowd", crowd, TimelinePage{})},
		{"malformed address", write("calm2", calm, TimelinePage{}) + "#%E0"},
	} {
		short, cancel := context.WithTimeout(ctx, 20*time.Second)
		var drawn int
		err := chromedp.Do(short, chromedp.Navigate("file://"+tc.path),
			chromedp.Poll[chromedp.Void](`window.timeline && timeline.sections > 0`),
			evalInto(&drawn, `+document.getElementById("status").dataset.drawn`))
		cancel()
		if err != nil || drawn == 0 {
			t.Errorf("%s: %d sections drawn: %v", tc.name, drawn, err)
		}
	}
	// The op an explanation names, twice, the whole history shown in
	// between.
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	link := chromedp.Click(chromedp.CSS(fmt.Sprintf(`#checks a[href="#op-%d"]`, op)))
	fit := chromedp.Evaluate[chromedp.Void](`timeline.fit(); window.whole = timeline.range[1] - timeline.range[0]`)
	narrow := chromedp.Poll[chromedp.Void](`timeline.range[1] - timeline.range[0] < window.whole / 4`)
	if err := chromedp.Do(short, chromedp.Navigate("file://"+write("again", calm, expl)), fit, link, narrow, fit, link, narrow); err != nil {
		t.Errorf("the second click on op %d left the whole history in view: %v", op, err)
	}
}
