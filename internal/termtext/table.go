package termtext

import (
	"io"
	"strings"
)

// Table aligns rows in columns; an Extra line, when not empty, follows
// its row unaligned. Extra has one entry per row.
type Table struct {
	Header []string
	Rows   [][]string
	Extra  []string
}

// Write prints the header and the rows, each column as wide as its widest
// cell plus two spaces.
func (t *Table) Write(w io.Writer) error {
	width := make([]int, len(t.Header))
	for _, r := range append([][]string{t.Header}, t.Rows...) {
		for i, cell := range r {
			width[i] = max(width[i], len([]rune(cell)))
		}
	}
	var b strings.Builder
	line := func(r []string) {
		for i, cell := range r {
			b.WriteString(cell)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len([]rune(cell))+2))
			}
		}
		b.WriteByte('\n')
	}
	line(t.Header)
	for i, r := range t.Rows {
		line(r)
		if t.Extra[i] != "" {
			b.WriteString(t.Extra[i] + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
