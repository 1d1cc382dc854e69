package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"
)

// Sentinel errors of the package.
var (
	// ErrInvalidParams is returned for a benchmark or scale that cannot run.
	ErrInvalidParams = errors.New("bench: invalid parameters")
	// ErrTarget is returned when the target answers what a Consul agent
	// would not (an error status, a missing field).
	ErrTarget = errors.New("bench: unexpected answer from the target")
)

// Figure is one measured number.
type Figure struct {
	// Key names it in the RESULT line (snake case, unit last).
	Key string
	// Label is its row in the table.
	Label string
	// Unit is printed after the value.
	Unit  string
	Value float64
}

// Result is what one benchmark measured on one target.
type Result struct {
	Bench   string
	Target  Target
	Figures []Figure
	// Propagation holds every endpoint-change delay of XDS (write
	// returned to EDS update received, per affected stream), for the
	// report's chart; nil for the other benchmarks.
	Propagation []time.Duration
}

func (r *Result) add(key, label, unit string, v float64) {
	r.Figures = append(r.Figures, Figure{Key: key, Label: label, Unit: unit, Value: v})
}

// addDist adds a distribution's p50/p90/p99/max in milliseconds.
func (r *Result) addDist(key, label string, s Summary, withP90 bool) {
	r.add(key+"_p50_ms", label+" p50", "ms", ms(s.P50))
	if withP90 {
		r.add(key+"_p90_ms", label+" p90", "ms", ms(s.P90))
	}
	r.add(key+"_p99_ms", label+" p99", "ms", ms(s.P99))
	r.add(key+"_max_ms", label+" max", "ms", ms(s.Max))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Figure returns the value of key and whether r has it.
func (r *Result) Figure(key string) (float64, bool) {
	for _, f := range r.Figures {
		if f.Key == key {
			return f.Value, true
		}
	}
	return 0, false
}

// WriteTable prints results of one benchmark side by side, one column per
// target, and with exactly two targets a ratio column (first / second).
// Rows follow the first result's figures.
func WriteTable(w io.Writer, results []*Result) error {
	if len(results) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "\t" + "unit"
	for _, r := range results {
		header += "\t" + r.Target.label()
	}
	if len(results) == 2 {
		header += "\tratio"
	}
	_, _ = fmt.Fprintln(tw, results[0].Bench+header+"\t")
	for _, f := range results[0].Figures {
		line := f.Label + "\t" + f.Unit
		for _, r := range results {
			v, ok := r.Figure(f.Key)
			line += "\t" + formatValue(v, ok)
		}
		if len(results) == 2 {
			a, _ := results[0].Figure(f.Key)
			b, ok := results[1].Figure(f.Key)
			line += "\t" + formatRatio(a, b, ok)
		}
		_, _ = fmt.Fprintln(tw, line+"\t")
	}
	return tw.Flush()
}

func formatValue(v float64, ok bool) string {
	switch {
	case !ok:
		return "-"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func formatRatio(a, b float64, ok bool) string {
	if !ok || b == 0 {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "x"
}

// resultLine is the JSON of the RESULT line.
type resultLine struct {
	Bench   string         `json:"bench"`
	Scale   string         `json:"scale"`
	Seed    uint64         `json:"seed"`
	Params  Params         `json:"params"`
	Targets []resultTarget `json:"targets"`
}

type resultTarget struct {
	Name     string             `json:"name"`
	HTTPAddr string             `json:"http_addr"`
	GRPCAddr string             `json:"grpc_addr,omitempty"`
	PID      int                `json:"pid,omitempty"`
	Figures  map[string]float64 `json:"figures"`
}

// WriteResultLine prints `RESULT {json}`: the benchmark, its scale, seed
// and parameters, and each target's figures by key, on one line, for
// scripts that compare runs.
func WriteResultLine(w io.Writer, scale string, seed uint64, p Params, results []*Result) error {
	if len(results) == 0 {
		return nil
	}
	line := resultLine{Bench: results[0].Bench, Scale: scale, Seed: seed, Params: p}
	for _, r := range results {
		t := resultTarget{Name: r.Target.label(), HTTPAddr: r.Target.HTTPAddr, GRPCAddr: r.Target.GRPCAddr, PID: r.Target.PID, Figures: map[string]float64{}}
		for _, f := range r.Figures {
			t.Figures[f.Key] = f.Value
		}
		line.Targets = append(line.Targets, t)
	}
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("bench: encode the result: %w", err)
	}
	_, err = fmt.Fprintf(w, "RESULT %s\n", b)
	return err
}
