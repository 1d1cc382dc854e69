package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anishathalye/porcupine"
)

// jepsenArtifacts writes the run's files into dir, named after the run:
// the history (one operation per line), the summary (report, faults), and
// porcupine's HTML visualization when viz is set. It returns the paths.
func jepsenArtifacts(dir, name string, ops []jepsenOp, faults []faultEvent, r jepsenReport, info porcupine.LinearizationInfo, viz bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(dir, name)
	hist := base + "-history.jsonl"
	if err := writeJSONLines(hist, ops); err != nil {
		return nil, err
	}
	files := []string{hist}
	summary := base + "-summary.json"
	b, err := json.MarshalIndent(struct {
		Report jepsenReport `json:"report"`
		Faults []faultEvent `json:"faults"`
	}{r, faults}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(summary, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	files = append(files, summary)
	if viz {
		html := base + "-linearizability.html"
		info.AddAnnotations(faultAnnotations(faults))
		if err := porcupine.VisualizePath(registerModel, info, html); err != nil {
			return files, fmt.Errorf("visualization: %w", err)
		}
		files = append(files, html)
	}
	return files, nil
}

// readJSONLines reads a history written by writeJSONLines.
func readJSONLines(path string) ([]jepsenOp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var ops []jepsenOp
	dec := json.NewDecoder(f)
	for dec.More() {
		var o jepsenOp
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("%s: operation %d: %w", path, len(ops)+1, err)
		}
		ops = append(ops, o)
	}
	return ops, nil
}

func writeJSONLines(path string, ops []jepsenOp) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, o := range ops {
		if err := enc.Encode(o); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// faultAnnotations shows each fault as a bar on a "nemesis" row, so a
// violation can be read against what was broken at the time.
func faultAnnotations(faults []faultEvent) []porcupine.Annotation {
	var out []porcupine.Annotation
	for _, f := range faults {
		if f.Skipped != "" {
			continue
		}
		out = append(out, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           f.Start,
			End:             f.End,
			Description:     fmt.Sprintf("%s %s", f.Fault, f.Target),
			Details:         fmt.Sprintf("%s: %s %s (pid %d) %s", f.Nemesis, f.Fault, f.Target, f.PID, f.Err),
			BackgroundColor: "#f8d0d0",
		})
	}
	return out
}
