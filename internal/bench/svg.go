package bench

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Point is one sample of a Series.
type Point struct{ X, Y float64 }

// Series is one line of a Plot.
type Series struct {
	Name   string
	Points []Point
	// Dashed draws the line dashed (the comparison run's series).
	Dashed bool
	// Color is an SVG color; empty picks one by the series' position.
	Color string
}

// Plot is a line chart: latency over time in this package.
type Plot struct {
	Title, XLabel, YLabel string
	// LogY draws the Y axis in powers of ten: latencies span a local
	// fsync to an S3 tail. Points with Y <= 0 are left out.
	LogY bool
	// MarkX draws a vertical marker at each X (the end of warm-up).
	MarkX  []float64
	Series []Series
}

// Plot geometry, in SVG user units.
const (
	svgWidth, svgHeight = 960, 540
	svgLeft, svgRight   = 80, 200
	svgTop, svgBottom   = 40, 60
)

var svgColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// WriteSVG draws p as a standalone SVG document. It needs no plotting
// library: axes, ticks, polylines and a legend are all it draws.
func WriteSVG(w io.Writer, p Plot) error {
	bw := bufio.NewWriter(w)
	xmin, xmax, ymin, ymax := bounds(p)
	plotW := float64(svgWidth - svgLeft - svgRight)
	plotH := float64(svgHeight - svgTop - svgBottom)
	ty := func(y float64) float64 { return y }
	if p.LogY {
		ty = math.Log10
	}
	sx := func(x float64) float64 { return svgLeft + (x-xmin)/(xmax-xmin)*plotW }
	sy := func(y float64) float64 { return svgTop + plotH - (ty(y)-ty(ymin))/(ty(ymax)-ty(ymin))*plotH }

	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(bw, `<text x="%d" y="24" font-size="16">%s</text>`+"\n", svgLeft, esc(p.Title))
	// Axes.
	fmt.Fprintf(bw, `<path d="M%d %d V%d H%d" stroke="black" fill="none"/>`+"\n",
		svgLeft, svgTop, svgHeight-svgBottom, svgWidth-svgRight)
	// Y ticks: powers of ten on a log axis, five steps on a linear one.
	for _, y := range yTicks(ymin, ymax, p.LogY) {
		py := sy(y)
		fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", svgLeft, py, svgWidth-svgRight, py)
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", svgLeft-6, py+4, esc(fmtTick(y)))
	}
	for _, x := range linearTicks(xmin, xmax) {
		px := sx(x)
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`+"\n", px, svgHeight-svgBottom, px, svgHeight-svgBottom+5)
		fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px, svgHeight-svgBottom+18, esc(fmtTick(x)))
	}
	fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", svgLeft+plotW/2, svgHeight-16, esc(p.XLabel))
	fmt.Fprintf(bw, `<text transform="translate(20 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", svgTop+plotH/2, esc(p.YLabel))
	for _, x := range p.MarkX {
		if x < xmin || x > xmax {
			continue
		}
		px := sx(x)
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999" stroke-dasharray="2 3"/>`+"\n", px, svgTop, px, svgHeight-svgBottom)
	}
	for i, s := range p.Series {
		color := s.Color
		if color == "" {
			color = svgColors[i%len(svgColors)]
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []byte
		for _, pt := range s.Points {
			if p.LogY && pt.Y <= 0 || math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) {
				continue
			}
			pts = fmt.Appendf(pts, "%.1f,%.1f ", sx(pt.X), sy(pt.Y))
		}
		if len(pts) > 0 {
			fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", color, dash, pts[:len(pts)-1])
		}
		ly := svgTop + 10 + 20*i
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n",
			svgWidth-svgRight+12, ly, svgWidth-svgRight+36, ly, color, dash)
		fmt.Fprintf(bw, `<text x="%d" y="%d">%s</text>`+"\n", svgWidth-svgRight+42, ly+4, esc(s.Name))
	}
	fmt.Fprintln(bw, `</svg>`)
	return bw.Flush()
}

// bounds returns the data range, widened so that neither axis is empty.
func bounds(p Plot) (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, s := range p.Series {
		for _, pt := range s.Points {
			if p.LogY && pt.Y <= 0 || math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) {
				continue
			}
			xmin, xmax = min(xmin, pt.X), max(xmax, pt.X)
			ymin, ymax = min(ymin, pt.Y), max(ymax, pt.Y)
		}
	}
	if math.IsInf(xmin, 1) {
		xmin, xmax, ymin, ymax = 0, 1, 1, 10
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	if p.LogY {
		ymin = math.Pow(10, math.Floor(math.Log10(ymin)))
		ymax = math.Pow(10, math.Ceil(math.Log10(ymax)))
		if ymax <= ymin {
			ymax = ymin * 10
		}
	} else {
		ymin = min(ymin, 0)
		if ymax <= ymin {
			ymax = ymin + 1
		}
	}
	return xmin, xmax, ymin, ymax
}

func yTicks(lo, hi float64, logY bool) []float64 {
	if !logY {
		return linearTicks(lo, hi)
	}
	var out []float64
	for e := math.Round(math.Log10(lo)); e <= math.Log10(hi)+1e-9; e++ {
		out = append(out, math.Pow(10, e))
	}
	return out
}

// linearTicks returns about six round ticks in [lo, hi].
func linearTicks(lo, hi float64) []float64 {
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

func fmtTick(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func esc(s string) string {
	var sb strings.Builder
	xml.EscapeText(&sb, []byte(s))
	return sb.String()
}
