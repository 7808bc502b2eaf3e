package load

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// A tiny chart writer (image/png and x/image's fixed font): a plotting
// library would bring a PDF and SVG stack into the module for two line
// charts.

var (
	white = color.RGBA{255, 255, 255, 255}
	black = color.RGBA{0, 0, 0, 255}
	grey  = color.RGBA{220, 220, 220, 255}
	// One colour per series, in order.
	palette = []color.RGBA{{31, 119, 180, 255}, {214, 39, 40, 255}, {44, 160, 44, 255}, {148, 103, 189, 255}, {255, 127, 14, 255},
		{140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}, {188, 189, 34, 255}, {23, 190, 207, 255}}
)

// Series is one line of a panel.
type Series struct {
	Name string
	X, Y []float64
}

// Panel is one chart with a shared x axis.
type Panel struct {
	Title  string
	XLabel string
	YLabel string
	Series []Series
}

// PlotReports writes the latency/throughput chart of one or more reports:
// ops/s per second of the run on top, p50 and p99 below.
func PlotReports(path string, reps []Report) error {
	thr := Panel{Title: "throughput per second of the run", XLabel: "seconds", YLabel: "ops/s"}
	lat := Panel{Title: "latency per second of the run", XLabel: "seconds", YLabel: "ms"}
	both := len(reps) <= 3 // p50 and p99 each; with more series, p99 alone stays readable
	if !both {
		lat.Title = "p99 latency per second of the run"
	}
	for _, r := range reps {
		name := fmt.Sprintf("%s %s c=%d", r.Target, r.Workload, r.Clients)
		var x, ops, p50, p99 []float64
		for i, s := range r.Timeline {
			if i > 0 && i == len(r.Timeline)-1 && s.T-r.Timeline[i-1].T < 0.5 {
				break // a sliver of a second says nothing
			}
			x = append(x, s.T)
			ops = append(ops, s.OpsPerSec)
			p50 = append(p50, s.P50Ms)
			p99 = append(p99, s.P99Ms)
		}
		thr.Series = append(thr.Series, Series{Name: name, X: x, Y: ops})
		if both {
			lat.Series = append(lat.Series, Series{Name: name + " p50", X: x, Y: p50}, Series{Name: name + " p99", X: x, Y: p99})
		} else {
			lat.Series = append(lat.Series, Series{Name: name + " p99", X: x, Y: p99})
		}
	}
	return WritePNG(path, []Panel{thr, lat})
}

// WritePNG draws the panels stacked vertically.
func WritePNG(path string, panels []Panel) error {
	const w, ph = 900, 300
	heights := make([]int, len(panels))
	total := 0
	for i, p := range panels {
		heights[i] = ph + 14*((len(p.Series)+1)/2) // room for the legend
		total += heights[i]
	}
	img := image.NewRGBA(image.Rect(0, 0, w, total))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	y := 0
	for i, p := range panels {
		drawPanel(img, image.Rect(0, y, w, y+heights[i]), p)
		y += heights[i]
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func drawPanel(img *image.RGBA, r image.Rectangle, p Panel) {
	// Plot area inside margins.
	legend := 14 * ((len(p.Series) + 1) / 2)
	a := image.Rect(r.Min.X+70, r.Min.Y+28, r.Max.X-20, r.Max.Y-56-legend)
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range p.Series {
		for i := range s.X {
			xmin, xmax = math.Min(xmin, s.X[i]), math.Max(xmax, s.X[i])
			if !math.IsNaN(s.Y[i]) {
				ymax = math.Max(ymax, s.Y[i])
			}
		}
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	xmin = math.Min(xmin, 0)
	xmax = math.Ceil(xmax)
	ymax = niceCeil(ymax)
	text(img, r.Min.X+70, r.Min.Y+16, p.Title, black)
	// Grid and ticks.
	for i := 0; i <= 4; i++ {
		y := a.Max.Y - i*a.Dy()/4
		hline(img, a.Min.X, a.Max.X, y, grey)
		label := fmtTick(ymax * float64(i) / 4)
		text(img, a.Min.X-8-7*len(label), y+4, label, black)
	}
	for i := 0; i <= 5; i++ {
		x := a.Min.X + i*a.Dx()/5
		vline(img, x, a.Min.Y, a.Max.Y, grey)
		label := fmtTick(xmin + (xmax-xmin)*float64(i)/5)
		text(img, x-7*len(label)/2, a.Max.Y+16, label, black)
	}
	hline(img, a.Min.X, a.Max.X, a.Max.Y, black)
	vline(img, a.Min.X, a.Min.Y, a.Max.Y, black)
	text(img, a.Max.X-7*len(p.XLabel), a.Max.Y+30, p.XLabel, black)
	text(img, r.Min.X+4, a.Min.Y-6, p.YLabel, black)
	px := func(x float64) int { return a.Min.X + int((x-xmin)/(xmax-xmin)*float64(a.Dx())) }
	py := func(y float64) int {
		if ymax == 0 {
			return a.Max.Y
		}
		return a.Max.Y - int(y/ymax*float64(a.Dy()))
	}
	for si, s := range p.Series {
		c := palette[si%len(palette)]
		for i := 1; i < len(s.X); i++ {
			if math.IsNaN(s.Y[i-1]) || math.IsNaN(s.Y[i]) {
				continue
			}
			line(img, px(s.X[i-1]), py(s.Y[i-1]), px(s.X[i]), py(s.Y[i]), c)
		}
		for i := range s.X {
			if !math.IsNaN(s.Y[i]) {
				dot(img, px(s.X[i]), py(s.Y[i]), c)
			}
		}
		// Legend under the axis, two per row.
		lx := r.Min.X + 70 + (si%2)*420
		ly := a.Max.Y + 46 + (si/2)*14
		for k := 0; k < 14; k++ {
			img.Set(lx+k, ly-4, c)
			img.Set(lx+k, ly-3, c)
		}
		text(img, lx+20, ly, s.Name, black)
	}
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*e {
			return m * e
		}
	}
	return 10 * e
}

func fmtTick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 10000:
		return fmt.Sprintf("%.0fk", v/1000)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.3g", v)
	}
	return fmt.Sprintf("%.2g", v)
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func hline(img *image.RGBA, x0, x1, y int, c color.Color) {
	for x := x0; x <= x1; x++ {
		img.Set(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.Color) {
	for y := y0; y <= y1; y++ {
		img.Set(x, y, c)
	}
}

func dot(img *image.RGBA, x, y int, c color.Color) {
	for dx := -1; dx <= 1; dx++ {
		for dy := -1; dy <= 1; dy++ {
			img.Set(x+dx, y+dy, c)
		}
	}
}

// line is Bresenham's, two pixels thick.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		img.Set(x0, y0, c)
		img.Set(x0, y0+1, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
