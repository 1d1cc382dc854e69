package bench

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"time"
)

// Section is one target's results in a report.
type Section struct {
	// Title names the target ("-dev agent", "3 servers, Raft on disk").
	Title   string
	Results []*Result
}

// Report is what `make bench` writes.
type Report struct {
	Date  time.Time
	Scale string
	Seed  uint64
	// Setup says, in a sentence or two, what ran where.
	Setup    string
	Sections []Section
	// Chart is the file name of the propagation chart, next to the
	// report; empty leaves the chart out.
	Chart string
}

// WriteMarkdown writes the report: per section, one table per benchmark
// (figure, unit, value), and the propagation chart.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# trellis bench, %s\n\n", r.Date.UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "Scale `%s`, seed %d. %s\n\n", r.Scale, r.Seed, r.Setup)
	for _, s := range r.Sections {
		fmt.Fprintf(&b, "## %s\n\n", s.Title)
		for _, res := range s.Results {
			fmt.Fprintf(&b, "### %s\n\n| figure | unit | value |\n| --- | --- | ---: |\n", res.Bench)
			for _, f := range res.Figures {
				fmt.Fprintf(&b, "| %s | %s | %s |\n", f.Label, f.Unit, formatValue(f.Value, true))
			}
			b.WriteString("\n")
		}
	}
	if r.Chart != "" {
		fmt.Fprintf(&b, "## Propagation of an endpoint change\n\n![propagation CDF](%s)\n\n", r.Chart)
		b.WriteString("Each curve is the share of affected streams (y) that had received an\n" +
			"endpoint change within x ms of the write's HTTP answer.\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Series is one curve of a chart.
type Series struct {
	Name   string
	Delays []time.Duration
}

// svgColors are the curves' colours, in order.
func svgColors() []string { return []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"} }

// WriteSVG draws the cumulative distribution of each series' delays
// (share of samples at or below x ms) as a standalone SVG, on a linear x
// axis up to the largest p99 of the series and a little more, so that
// the bulk stays readable; the tail beyond is clipped at the right edge.
func WriteSVG(w io.Writer, title string, series []Series) error {
	const (
		width, height = 720, 400
		left, right   = 60, 20
		top, bottom   = 40, 50
		plotW, plotH  = width - left - right, height - top - bottom
		ticks         = 5
	)
	xmax := time.Millisecond
	for _, s := range series {
		ds := slices.Sorted(slices.Values(s.Delays))
		xmax = max(xmax, Percentile(ds, 0.99)*5/4)
	}
	xmin := time.Duration(0)
	for _, s := range series {
		for _, d := range s.Delays {
			xmin = min(xmin, d)
		}
	}
	span := float64(xmax - xmin)
	x := func(d time.Duration) float64 {
		return left + float64(min(max(d, xmin), xmax)-xmin)/span*plotW
	}
	y := func(share float64) float64 { return top + (1-share)*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14">%s</text>`+"\n", left, html.EscapeString(title))
	for i := 0; i <= ticks; i++ {
		share := float64(i) / ticks
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(share), left+plotW, y(share))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%d%%</text>`+"\n", left-6, y(share)+4, i*100/ticks)
		d := xmin + time.Duration(float64(i)/ticks*span)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(d), top, x(d), top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(d), top+plotH+16, formatValue(ms(d), true))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">ms after the write's answer</text>`+"\n", left+plotW/2, height-10)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	colors := svgColors()
	for i, s := range series {
		ds := slices.Sorted(slices.Values(s.Delays))
		color := colors[i%len(colors)]
		if len(ds) > 0 {
			var pts strings.Builder
			fmt.Fprintf(&pts, "%.1f,%.1f", x(ds[0]), y(0))
			for j, d := range ds {
				fmt.Fprintf(&pts, " %.1f,%.1f %.1f,%.1f", x(d), y(float64(j)/float64(len(ds))), x(d), y(float64(j+1)/float64(len(ds))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, pts.String())
		}
		ly := top + 20 + 18*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", left+plotW-200, ly, left+plotW-180, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s (%d samples)</text>`+"\n", left+plotW-174, ly+4, html.EscapeString(s.Name), len(ds))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
