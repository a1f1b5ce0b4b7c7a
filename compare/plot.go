package compare

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"github.com/hiatus-dev/hiatus/client"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot draws the table in format ("png" or "svg"): for a sweep, lost
// updates per 1,000 sections against the pause/lease ratio, a panel per
// pause kind (each with its own scale: a SIGSTOP at a random moment loses
// far fewer than a pause inside every 20th section) and a line per lock and
// fencing, each point the mean of its runs with their min–max as an error
// bar; for a grid, one bar per row with the same figure.
func Plot(t *Table, format string) (_ []byte, err error) {
	// gonum panics on data it cannot draw; a plot is not worth the tables.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("plot: %v", p)
		}
	}()
	var panels []*plot.Plot
	w, h := 7*vg.Inch, vg.Length(len(t.Rows))*0.3*vg.Inch+1.5*vg.Inch
	if t.sweep() {
		for _, kind := range PauseChoices() {
			p, err := sweepPanel(t, kind)
			if err != nil {
				return nil, fmt.Errorf("plot: %w", err)
			}
			if p != nil {
				panels = append(panels, p)
			}
		}
		h = vg.Length(max(1, len(panels))) * 3.5 * vg.Inch
	} else {
		p, err := gridPlot(t)
		if err != nil {
			return nil, fmt.Errorf("plot: %w", err)
		}
		panels = append(panels, p)
	}
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	if len(panels) > 0 {
		rows := make([][]*plot.Plot, len(panels))
		for i, p := range panels {
			rows[i] = []*plot.Plot{p}
		}
		tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(2), PadBottom: vg.Points(2)}
		for i, tc := range plot.Align(rows, tiles, draw.New(c)) {
			rows[i][0].Draw(tc[0])
		}
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	return b.Bytes(), nil
}

// errorPoints are points with asymmetric error bars in y.
type errorPoints struct {
	plotter.XYs
	plotter.YErrors
}

// errorBars are points with asymmetric error bars in x.
type errorBars struct {
	plotter.XYs
	plotter.XErrors
}

func caption(t *Table, per string) string {
	return fmt.Sprintf("%d workers, %s runs, %s per %s", t.Workers, duration(t.Limit), plural(t.Runs, "run"), per)
}

// plural writes n things: 1 run, 3 runs.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// sweepPanel draws the sweep's rows of one pause kind, or returns nil when
// it has none.
func sweepPanel(t *Table, kind string) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "pause / lease (the pause fixed, the lease varied)"
	p.Y.Label.Text = "lost updates per 1,000 sections"
	p.X.Scale = plot.LogScale{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8) // clear of the y axis

	var ticks []plot.Tick
	seen := map[float64]bool{}
	ymax := 1.0
	xmin, xmax := math.Inf(1), math.Inf(-1)
	var order []string
	series := map[string]*errorPoints{}
	for _, r := range t.Rows {
		if r.Pause != kind || len(r.Runs) == 0 {
			continue
		}
		if p.Title.Text == "" {
			p.Title.Text = r.PauseLabel() + " (" + caption(t, "point") + ")"
		}
		name := client.LockLabel(r.Lock)
		if r.Fenced {
			name += ", fenced"
		}
		if series[name] == nil {
			order = append(order, name)
			series[name] = &errorPoints{}
		}
		s := series[name]
		l := r.LostPer1000()
		s.XYs = append(s.XYs, plotter.XY{X: r.Ratio, Y: l.Mean})
		s.YErrors = append(s.YErrors, struct{ Low, High float64 }{l.Mean - l.Min, l.Max - l.Mean})
		ymax = max(ymax, l.Max)
		xmin, xmax = min(xmin, r.Ratio), max(xmax, r.Ratio)
		if !seen[r.Ratio] {
			seen[r.Ratio] = true
			ticks = append(ticks, plot.Tick{Value: r.Ratio, Label: strconv.FormatFloat(r.Ratio, 'g', 3, 64)})
		}
	}
	if len(order) == 0 {
		return nil, nil
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Tick.Marker = plainTicks{}
	// A margin on the log scale, which also keeps a sweep of one ratio off 0.
	p.X.Min, p.X.Max = xmin/1.15, xmax*1.15
	// Room above the data for the legend, a line an entry (and one for the
	// reference line), so that it never covers a point.
	p.Y.Min, p.Y.Max = 0, ymax*1.1/(1-0.08*float64(len(order)+1))

	return p, drawSweep(p, order, series)
}

// drawSweep draws on p the line where the pause outlasts the lease, then
// each series, named, in order.
func drawSweep(p *plot.Plot, order []string, series map[string]*errorPoints) error {
	one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: 0}, {X: 1, Y: p.Y.Max}})
	if err != nil {
		return err
	}
	one.Color = color.Gray{Y: 160}
	one.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(one)
	p.Legend.Add("pause = lease", one)
	for i, name := range order {
		s := series[name]
		line, points, err := plotter.NewLinePoints(s)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		bars, err := plotter.NewYErrorBars(s)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i)
		p.Add(line, points, bars)
		p.Legend.Add(name, line, points)
	}
	return nil
}

func gridPlot(t *Table) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Lost updates per 1,000 sections (" + caption(t, "bar") + ")"
	p.X.Label.Text = "lost updates per 1,000 sections (mean; bars: min–max)"
	n := len(t.Rows)
	values := make(plotter.Values, n)
	bars := &errorBars{XYs: make(plotter.XYs, n), XErrors: make(plotter.XErrors, n)}
	labels := make([]string, n)
	xmax := 1.0
	for i, r := range t.Rows {
		// The first row on top.
		at := n - 1 - i
		l := r.LostPer1000()
		values[at] = l.Mean
		bars.XYs[at] = plotter.XY{X: l.Mean, Y: float64(at)}
		bars.XErrors[at] = struct{ Low, High float64 }{l.Mean - l.Min, l.Max - l.Mean}
		labels[at] = "  " + r.Short() // gonum measures a label a little short: keep its start in the picture
		if len(r.Runs) == 0 {
			labels[at] += " (not run)"
		}
		xmax = max(xmax, l.Max)
	}
	chart, err := plotter.NewBarChart(values, vg.Points(12))
	if err != nil {
		return nil, err
	}
	chart.Horizontal = true
	// One colour for every bar: a colour of their own would seem to mean
	// something the legend-less chart never says.
	chart.Color = color.Gray{Y: 150}
	chart.LineStyle.Width = 0
	eb, err := plotter.NewXErrorBars(bars)
	if err != nil {
		return nil, err
	}
	p.Add(chart, eb)
	p.NominalY(labels...)
	p.X.Min, p.X.Max = 0, xmax*1.1
	p.X.Tick.Marker = plainTicks{}
	return p, nil
}

// plainTicks are gonum's default ticks, labelled as numbers are written
// (500, 2.5, 0.25), so that every panel writes its scale alike: gonum's own
// labels give one panel "6" and another "500.00".
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}
