package cli

import (
	"strings"
	"unicode/utf8"
)

// columnSep separates the cells of a row passed to columnize, as in
// Consul's CLI (which uses ryanuber/columnize with this delimiter).
const columnSep = "\x1f"

// columnize formats rows of columnSep-separated cells into aligned columns
// exactly as ryanuber/columnize's defaults do for Consul: cells trimmed,
// every column but a row's last padded to the column's width, two spaces
// between columns, no trailing newline.
func columnize(rows []string) string {
	split := make([][]string, len(rows))
	var widths []int
	for i, r := range rows {
		cells := strings.Split(r, columnSep)
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
			n := utf8.RuneCountInString(cells[j])
			if j >= len(widths) {
				widths = append(widths, n)
			} else if n > widths[j] {
				widths[j] = n
			}
		}
		split[i] = cells
	}
	var b strings.Builder
	for i, cells := range split {
		if i > 0 {
			b.WriteByte('\n')
		}
		for j, c := range cells {
			if j == len(cells)-1 {
				b.WriteString(c)
				continue
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[j]-utf8.RuneCountInString(c)))
			b.WriteString("  ")
		}
	}
	return b.String()
}
