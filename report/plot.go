package report

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/store"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Files the performance plots are written to, as Jepsen names them.
const (
	LatencyRaw       = "latency-raw.png"
	LatencyQuantiles = "latency-quantiles.png"
	Rate             = "rate.png"
)

// ErrUntimed is returned for a history whose ops have no :time: there is no
// axis to plot them on.
var ErrUntimed = errors.New("the history's ops have no :time")

// WritePlots draws latency-raw.png, latency-quantiles.png and rate.png
// into dir, each with the fault windows shaded.
func (p *Perf) WritePlots(dir string) error {
	if p.untimed {
		return ErrUntimed
	}
	p.finish()
	for _, pl := range []struct {
		file string
		draw func() (*plot.Plot, error)
	}{
		{LatencyRaw, p.rawPlot},
		{LatencyQuantiles, p.quantilePlot},
		{Rate, p.ratePlot},
	} {
		plt, err := pl.draw()
		if err != nil {
			return fmt.Errorf("%s: %w", pl.file, err)
		}
		if err := save(plt, dir, pl.file); err != nil {
			return fmt.Errorf("%s: %w", pl.file, err)
		}
	}
	return nil
}

// seconds is a history time on the plots' x axis.
func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// millis is a latency on the plots' y axis.
func millis(ns int64) float64 { return max(float64(ns)/1e6, 0.001) }

func newPlot(title, y string, logY bool) *plot.Plot {
	plt := plot.New()
	plt.Title.Text = title
	plt.X.Label.Text = "time (s, Redis clock, from the run's start)"
	plt.Y.Label.Text = y
	plt.X.Min = 0
	if logY {
		plt.Y.Scale = plot.LogScale{}
		plt.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	plt.Add(plotter.NewGrid())
	return plt
}

func (p *Perf) rawPlot() (*plot.Plot, error) {
	plt := newPlot("latency of every op, by :f and outcome", "latency (ms)", true)
	p.shade(plt)
	for i, s := range series(p.raw) {
		var xys plotter.XYs
		for _, pt := range p.raw[s].pts {
			xys = append(xys, plotter.XY{X: seconds(pt.at), Y: millis(pt.latency)})
		}
		for _, pt := range p.peaks[s] {
			if pt.latency >= 0 {
				xys = append(xys, plotter.XY{X: seconds(pt.at), Y: millis(pt.latency)})
			}
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Color = plotutil.Color(i)
		sc.GlyphStyle.Shape = plotutil.Shape(i)
		sc.GlyphStyle.Radius = vg.Points(1.5)
		plt.Add(sc)
		plt.Legend.Add(s.String(), sc)
	}
	return plt, nil
}

// quantiles are the lines of latency-quantiles.png.
var quantiles = []struct {
	q    float64
	name string
}{{0.5, "0.5"}, {0.95, "0.95"}, {0.99, "0.99"}, {1, "max"}}

func (p *Perf) quantilePlot() (*plot.Plot, error) {
	plt := newPlot("latency quantiles of ok ops, by :f", "latency (ms)", true)
	p.shade(plt)
	fs := make([]history.Keyword, 0, len(p.quant))
	for f := range p.quant {
		fs = append(fs, f)
	}
	slices.Sort(fs)
	for i, f := range fs {
		for j, q := range quantiles {
			var xys plotter.XYs
			for b, h := range p.quant[f] {
				if v, ok := h.quantile(q.q); ok {
					xys = append(xys, plotter.XY{X: seconds(int64(b)*p.width + p.width/2), Y: millis(v)})
				}
			}
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color, l.Dashes = plotutil.Color(i), plotutil.Dashes(j)
			plt.Add(l)
			plt.Legend.Add(fmt.Sprintf("%s %s", f, q.name), l)
		}
	}
	return plt, nil
}

func (p *Perf) ratePlot() (*plot.Plot, error) {
	plt := newPlot(fmt.Sprintf("completed ops per second, by :f and outcome (%v s buckets)", seconds(p.width)), "ops/s", false)
	plt.Y.Min = 0
	p.shade(plt)
	for i, s := range series(p.rate) {
		var xys plotter.XYs
		for b, n := range p.rate[s] {
			xys = append(xys, plotter.XY{X: seconds(int64(b)*p.width + p.width/2), Y: float64(n) / seconds(p.width)})
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color, l.Dashes = plotutil.Color(i), plotutil.Dashes(i/7)
		plt.Add(l)
		plt.Legend.Add(s.String(), l)
	}
	return plt, nil
}

// faultColors shade the windows of each kind of fault.
var faultColors = []color.NRGBA{
	{R: 255, G: 160, B: 0, A: 60}, {R: 120, G: 120, B: 255, A: 60}, {R: 255, G: 80, B: 80, A: 60},
	{R: 80, G: 200, B: 120, A: 60},
}

// shade adds the fault windows, a band each across the whole height, and a
// legend entry a kind.
func (p *Perf) shade(plt *plot.Plot) {
	var kinds []history.Keyword
	windows := p.windows()
	for _, w := range windows {
		if !slices.Contains(kinds, w.Kind) {
			kinds = append(kinds, w.Kind)
		}
	}
	for i, k := range kinds {
		b := &bands{color: faultColors[i%len(faultColors)]}
		for _, w := range windows {
			if w.Kind != k {
				continue
			}
			// Windows of one kind that overlap (two workers paused at
			// once) are one band: translucent bands drawn over each
			// other would look like a fault of another kind.
			if n := len(b.windows); n > 0 && w.Start <= b.windows[n-1].End {
				b.windows[n-1].End = max(b.windows[n-1].End, w.End)
				continue
			}
			b.windows = append(b.windows, w)
		}
		plt.Add(b)
		plt.Legend.Add(fmt.Sprintf("fault: %s", k), b)
	}
	plt.X.Max = max(plt.X.Max, seconds(p.end))
}

// bands draws fault windows as shaded bands from the bottom of the plot to
// its top.
type bands struct {
	windows []Window
	color   color.Color
}

// Plot implements plot.Plotter.
func (b *bands) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	c.SetColor(b.color)
	for _, w := range b.windows {
		x0, x1 := trX(seconds(w.Start)), trX(seconds(w.End))
		if w.End == w.Start {
			x1 = x0 + vg.Points(1) // an instant: still seen
		}
		var path vg.Path
		path.Move(vg.Point{X: x0, Y: c.Min.Y})
		path.Line(vg.Point{X: x1, Y: c.Min.Y})
		path.Line(vg.Point{X: x1, Y: c.Max.Y})
		path.Line(vg.Point{X: x0, Y: c.Max.Y})
		path.Close()
		c.Fill(path)
	}
}

// DataRange implements plot.DataRanger: the bands span the windows' time
// and none of the y axis.
func (b *bands) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = 0, 0
	for _, w := range b.windows {
		xmax = max(xmax, seconds(w.End))
	}
	return xmin, xmax, math.Inf(1), math.Inf(-1) // no y range: the bands take the data's
}

// Thumbnail implements plot.Thumbnailer.
func (b *bands) Thumbnail(c *draw.Canvas) {
	c.SetColor(b.color)
	c.Fill(c.Rectangle.Path())
}

// save writes plt as the PNG name in dir, whole or not at all, with its
// legend in a strip of its own to the right, so that it never covers the
// data.
func save(plt *plot.Plot, dir, name string) (err error) {
	// gonum panics on data it cannot draw; a plot is not worth the run.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("plot: %v", p)
		}
	}()
	if _, ok := plt.Y.Scale.(plot.LogScale); ok {
		// A log axis needs a positive range that is not a point.
		switch {
		case math.IsInf(plt.Y.Min, 0) || math.IsInf(plt.Y.Max, 0):
			plt.Y.Min, plt.Y.Max = 0.1, 1
		case plt.Y.Min >= plt.Y.Max:
			plt.Y.Min, plt.Y.Max = plt.Y.Min/2, plt.Y.Max*2
		}
	}
	const w, h, strip = 11 * vg.Inch, 5 * vg.Inch, 2.4 * vg.Inch
	c := vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	legend := plt.Legend
	plt.Legend = plot.NewLegend()
	plt.Draw(draw.Crop(draw.New(c), 0, -strip, 0, 0))
	legend.Top, legend.Left = true, true
	legend.Draw(draw.Crop(draw.New(c), w-strip+vg.Points(8), 0, 0, -vg.Points(24)))
	return store.Run{Dir: dir}.WriteWith(name, func(w io.Writer) error {
		_, err := c.WriteTo(w)
		return err
	})
}
