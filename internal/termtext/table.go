package termtext

import (
	"io"
	"strings"
)

// Table aligns rows in columns, under a header unless Header is nil (a
// table of fields and values). Cells are printed as they are: escape
// what came from outside with Text, Clip or Shorten first.
type Table struct {
	Header []string
	Rows   [][]string
	// Extra, when it has an entry for a row that is not empty, is a line
	// printed unaligned below that row.
	Extra []string
	// Empty, when set, is printed instead of the header when there is no
	// row: "no tenants match" says more than a header alone.
	Empty string
	// Footer lines follow the rows: a summary, where the next page is.
	Footer []string
}

// Write prints the header and the rows, each column as wide as its widest
// cell plus two spaces, then the footer.
func (t *Table) Write(w io.Writer) error {
	var b strings.Builder
	if len(t.Rows) == 0 && t.Empty != "" {
		b.WriteString(t.Empty + "\n")
	} else {
		t.rows(&b)
	}
	for _, l := range t.Footer {
		b.WriteString(l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (t *Table) rows(b *strings.Builder) {
	var width []int
	for _, r := range append([][]string{t.Header}, t.Rows...) {
		for i, cell := range r {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len([]rune(cell)))
		}
	}
	line := func(r []string) {
		for i, cell := range r {
			b.WriteString(cell)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len([]rune(cell))+2))
			}
		}
		b.WriteByte('\n')
	}
	if t.Header != nil {
		line(t.Header)
	}
	for i, r := range t.Rows {
		line(r)
		if i < len(t.Extra) && t.Extra[i] != "" {
			b.WriteString(t.Extra[i] + "\n")
		}
	}
}
