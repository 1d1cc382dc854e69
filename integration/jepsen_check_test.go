package integration

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// jepsenReport is what one run found. Every list but Counts is a finding
// that fails the run (the stale-read self-test expects Result Illegal).
type jepsenReport struct {
	Result    porcupine.CheckResult `json:"result"`
	CheckTook string                `json:"checkTook"`
	// Counts is the number of operations per "<kind> <outcome>".
	Counts map[string]int `json:"counts"`
	// Violations names each key whose history is not linearizable and the
	// operation porcupine could not place.
	Violations []string `json:"violations,omitempty"`
	// DoubleApplies lists values read with two ModifyIndexes: one write
	// applied twice.
	DoubleApplies []string `json:"doubleApplies,omitempty"`
	// FalseFailures lists writes answered "No cluster leader" (not
	// applied) whose value a read later returned.
	FalseFailures []string `json:"falseFailures,omitempty"`
	// FalseCASFailures lists CAS operations answered 200 false whose value
	// a read later returned.
	FalseCASFailures []string `json:"falseCASFailures,omitempty"`
	// StaleReads counts, per read mode and phase, reads that returned a
	// value an acknowledged write had replaced before the read began;
	// StaleExamples shows the first few.
	StaleReads    map[string]int `json:"staleReads,omitempty"`
	StaleExamples []string       `json:"staleExamples,omitempty"`
	// Disagreements lists keys the servers answered differently once all
	// had caught up after the final restart.
	Disagreements []string `json:"disagreements,omitempty"`
	// Problems are protocol violations, crashes and harness failures.
	Problems []string `json:"problems,omitempty"`
}

// failures describes every finding, one per line; empty when the run is
// clean.
func (r *jepsenReport) failures() []string {
	var out []string
	switch r.Result {
	case porcupine.Illegal:
		out = append(out, "history is not linearizable (porcupine: Illegal)")
		for _, v := range r.Violations {
			out = append(out, "  "+v)
		}
	case porcupine.Unknown:
		// The race detector slows porcupine down by an order of magnitude.
		out = append(out, "linearizability check timed out after "+r.CheckTook+
			" (porcupine: Unknown); check the history again without -race with TestJepsenRecheck")
	}
	if len(r.StaleReads) > 0 {
		out = append(out, fmt.Sprintf("stale reads by phase and mode: %v", r.StaleReads))
	}
	for _, l := range []struct {
		what  string
		items []string
	}{
		{"write applied twice", r.DoubleApplies},
		{"false failure", r.FalseFailures},
		{"CAS answered false but applied", r.FalseCASFailures},
		{"stale read", r.StaleExamples},
		{"servers disagree after the final restart", r.Disagreements},
		{"problem", r.Problems},
	} {
		for _, it := range l.items {
			out = append(out, l.what+": "+it)
		}
	}
	return out
}

// summary counts the findings in one line.
func (r *jepsenReport) summary() string {
	return fmt.Sprintf("%d keys not linearizable, %d writes applied twice, %d false failures, %d false CAS failures, stale reads %v, %d disagreements, %d problems",
		len(r.Violations), len(r.DoubleApplies), len(r.FalseFailures), len(r.FalseCASFailures),
		r.StaleReads, len(r.Disagreements), len(r.Problems))
}

// checkHistory runs porcupine and the direct checks over ops.
func checkHistory(ops []jepsenOp, timeout time.Duration) (jepsenReport, porcupine.LinearizationInfo) {
	r := jepsenReport{Counts: map[string]int{}}
	for _, o := range ops {
		r.Counts[fmt.Sprintf("%s %s", o.Kind, o.Outcome)]++
	}
	start := time.Now()
	pops := porcupineOps(ops)
	res, info := porcupine.CheckOperationsVerbose(registerModel, pops, timeout)
	r.Result = res
	r.CheckTook = time.Since(start).Round(time.Millisecond).String()
	if res == porcupine.Illegal {
		r.Violations = explainIllegal(pops, info)
	}
	r.DoubleApplies = doubleApplies(ops)
	r.FalseFailures = readDespite(ops, outcomeRefused)
	r.FalseCASFailures = readDespite(ops, outcomeFailed)
	r.StaleReads, r.StaleExamples = staleReads(ops)
	return r, info
}

// explainIllegal names, for each key porcupine could not linearize, the
// operation where its longest partial linearization stops: of the
// operations left out, the one that returned first, which had to take
// effect by then and could not. The visualization shows the whole story.
func explainIllegal(ops []porcupine.Operation, info porcupine.LinearizationInfo) []string {
	var out []string
	partials := info.PartialLinearizations()
	for p, part := range partitionByKey(ops) {
		if p >= len(partials) {
			break
		}
		var longest []int
		for _, l := range partials[p] {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(part) {
			continue
		}
		state := registerModel.Init()
		placed := map[int]bool{}
		for _, id := range longest {
			_, state = registerModel.Step(state, part[id].Input, part[id].Output)
			placed[id] = true
		}
		stuck := -1
		for id, op := range part {
			if !placed[id] && (stuck < 0 || op.Return < part[stuck].Return) {
				stuck = id
			}
		}
		out = append(out, fmt.Sprintf("key %s: %d of %d operations linearize, then the value is %s and this cannot: %s",
			part[0].Input.(regInput).Key, len(longest), len(part), showValue(state.(string)), part[stuck].Metadata))
	}
	return out
}

// doubleApplies finds values read with different ModifyIndexes. A value is
// written by one request only, so two indexes mean that request was
// applied twice (a retried forward, say), which porcupine may not see when
// nothing wrote the key in between.
func doubleApplies(ops []jepsenOp) []string {
	indexes := readIndexes(ops)
	var out []string
	for _, v := range doubleAppliedValues(ops) {
		out = append(out, describeDoubleApply(v, indexes[v]))
	}
	return out
}

// doubleAppliedValues returns the values read at more than one index.
func doubleAppliedValues(ops []jepsenOp) []string {
	var out []string
	for v, idx := range readIndexes(ops) {
		if len(idx) > 1 {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// readIndexes maps each value read to the ModifyIndexes it was read at.
func readIndexes(ops []jepsenOp) map[string]map[uint64]bool {
	indexes := map[string]map[uint64]bool{}
	for _, o := range ops {
		if o.Kind != opRead || !o.checked() || o.Value == "" {
			continue
		}
		if indexes[o.Value] == nil {
			indexes[o.Value] = map[uint64]bool{}
		}
		indexes[o.Value][o.Index] = true
	}
	return indexes
}

func describeDoubleApply(v string, indexes map[uint64]bool) string {
	idx := slices.Sorted(maps.Keys(indexes))
	strs := make([]string, len(idx))
	for i, n := range idx {
		strs[i] = fmt.Sprint(n)
	}
	times := "twice"
	if len(idx) > 2 {
		times = fmt.Sprintf("%d times", len(idx))
	}
	return fmt.Sprintf("value %s applied %s: indexes %s and %s",
		v, times, strings.Join(strs[:len(strs)-1], ", "), strs[len(strs)-1])
}

// readDespite finds writes with the given outcome, one that says the write
// was not applied, whose value a read returned anyway: a client that
// trusted the answer lost track of the key.
func readDespite(ops []jepsenOp, notApplied outcome) []string {
	firstRead := map[string]jepsenOp{}
	for _, o := range ops {
		if o.Kind != opRead || !o.checked() || o.Value == "" {
			continue
		}
		if prev, ok := firstRead[o.Value]; !ok || o.Call < prev.Call {
			firstRead[o.Value] = o
		}
	}
	var out []string
	for _, o := range ops {
		if o.Outcome != notApplied || o.Kind == opRead {
			continue
		}
		if rd, ok := firstRead[o.Value]; ok {
			out = append(out, fmt.Sprintf("%s; then read: %s", o, rd))
		}
	}
	return out
}

// maxStaleExamples bounds the stale reads a report spells out.
const maxStaleExamples = 10

// staleReads finds reads that returned a value which an acknowledged write
// had replaced before the read began, the plainest kind of violation, and
// counts them by read mode and phase, which tells which reads are stale.
// The replaced value must come from an acknowledged write seen at one index
// only: an unknown write may take effect late, and a write applied twice
// comes back, so reading either later proves nothing by itself.
func staleReads(ops []jepsenOp) (map[string]int, []string) {
	type interval struct{ call, ret int64 }
	writer := map[string]jepsenOp{}
	acked := map[string][]interval{} // per key, sorted by call below
	for _, o := range ops {
		if o.Kind == opRead {
			continue
		}
		writer[o.Value] = o
		if o.Outcome == outcomeOK {
			acked[o.Key] = append(acked[o.Key], interval{o.Call, o.Return})
		}
	}
	// minRet[k][i] is the earliest return of the writes of k from the
	// i-th by call on.
	minRet := map[string][]int64{}
	for k, ws := range acked {
		slices.SortFunc(ws, func(a, b interval) int { return cmp.Compare(a.call, b.call) })
		m := make([]int64, len(ws)+1)
		m[len(ws)] = math.MaxInt64
		for i := len(ws) - 1; i >= 0; i-- {
			m[i] = min(ws[i].ret, m[i+1])
		}
		minRet[k] = m
	}
	twice := map[string]bool{}
	for _, d := range doubleAppliedValues(ops) {
		twice[d] = true
	}
	counts := map[string]int{}
	var examples []string
	for _, o := range ops {
		if o.Kind != opRead || !o.checked() || twice[o.Value] {
			continue
		}
		since := int64(-1) // the initial absence holds from the start
		if o.Value != "" {
			w, ok := writer[o.Value]
			if !ok || w.Outcome != outcomeOK {
				continue
			}
			since = w.Return
		}
		ws := acked[o.Key]
		i, _ := slices.BinarySearchFunc(ws, since+1, func(w interval, t int64) int { return cmp.Compare(w.call, t) })
		if m := minRet[o.Key]; m == nil || m[i] >= o.Call {
			continue // no acknowledged write of the key replaced the value before the read
		}
		phase := o.Phase
		if phase == "" {
			phase = "workload " + o.Mode
		}
		counts[phase]++
		if len(examples) < maxStaleExamples {
			examples = append(examples, o.String())
		}
	}
	if len(counts) == 0 {
		return nil, nil
	}
	return counts, examples
}

// isNoLeader tells a 5xx that promises the write was not applied from one
// that may hide an applied write: only "No cluster leader" makes that
// promise (a leader that lost its leadership mid-commit does not know).
func isNoLeader(status int, body string) bool {
	return status >= 500 && strings.Contains(body, "No cluster leader")
}
