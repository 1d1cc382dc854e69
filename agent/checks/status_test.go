package checks

import (
	"fmt"
	"slices"
	"testing"
)

func TestStatusHandlerThresholds(t *testing.T) {
	const (
		P = "passing"
		W = "warning"
		C = "critical"
		x = "" // nothing forwarded
	)
	tests := []struct {
		name                        string
		success, failWarn, failCrit int
		in                          []string
		want                        []string // forwarded status per input, x when none
	}{
		{"no thresholds forwards everything", 0, 0, 0,
			[]string{P, C, W, C, P}, []string{P, C, W, C, P}},
		{"first result always forwarded", 3, 3, 3,
			[]string{C, P}, []string{C, x}},
		{"first passing forwarded too", 3, 3, 3,
			[]string{P, C, C, C}, []string{P, x, x, C}},
		{"success before passing", 2, 0, 0,
			[]string{C, P, P, P, C, P, P}, []string{C, x, P, P, C, x, P}},
		{"warning counts as success", 2, 0, 0,
			[]string{C, W, P}, []string{C, x, P}},
		{"failures before critical", 0, 3, 3,
			[]string{P, C, C, C, C, P, C}, []string{P, x, x, C, C, P, x}},
		{"a success resets the failure count", 0, 2, 2,
			[]string{P, C, P, C, C}, []string{P, x, P, x, C}},
		{"warning band below critical", 0, 1, 3,
			[]string{P, C, C, C}, []string{P, W, W, C}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			h := NewStatusHandler(rec, nil, tc.success, tc.failWarn, tc.failCrit)
			var got []string
			for i, st := range tc.in {
				before := len(rec.all("c"))
				h.UpdateCheck("c", st, fmt.Sprintf("out %d", i))
				after := rec.all("c")
				switch len(after) - before {
				case 0:
					got = append(got, x)
				case 1:
					u := after[len(after)-1]
					if u.output != fmt.Sprintf("out %d", i) {
						t.Fatalf("step %d: output %q not passed through", i, u.output)
					}
					got = append(got, u.status)
				default:
					t.Fatalf("step %d: %d updates for one result", i, len(after)-before)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("forwarded %q, want %q", got, tc.want)
			}
		})
	}
}
