package termtext

import (
	"encoding/json"
	"fmt"
	"io"
)

// Format is how a command prints what it reads: its -o flag.
type Format string

// The formats every command that prints records offers.
const (
	FormatTable Format = "table" // aligned columns, for people
	FormatWide  Format = "wide"  // the table with more columns
	FormatJSON  Format = "json"  // indented JSON; a stream prints one compact object a line
	FormatYAML  Format = "yaml"  // YAML with JSON's field names; a stream prints one document a record
)

// Formats are the values of -o, in the order help lists them.
var Formats = []Format{FormatTable, FormatWide, FormatJSON, FormatYAML}

// ParseFormat reads an -o value.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("output format %q: want table, wide, json or yaml", s)
}

// Printer prints a command's records in one format. A command hands it
// the value JSON and YAML print (the same field names as the HTTP API's)
// and how to show that value as text, so every command prints its
// records the same four ways.
type Printer struct {
	W      io.Writer
	Format Format
}

// Text reports whether the format is for people: table or wide.
func (p *Printer) Text() bool {
	return p.Format == FormatTable || p.Format == FormatWide || p.Format == ""
}

// Wide reports whether the wide table is wanted.
func (p *Printer) Wide() bool { return p.Format == FormatWide }

// Print prints one result, a record or a page of records, as one
// document: indented JSON, YAML, or what text writes (told whether the
// wide table is wanted).
func (p *Printer) Print(v any, text func(w io.Writer, wide bool) error) error {
	switch p.Format {
	case FormatJSON:
		return WriteJSON(p.W, v)
	case FormatYAML:
		return WriteYAML(p.W, v)
	}
	return text(p.W, p.Wide())
}

// PrintTable is Print for a result shown as a table.
func (p *Printer) PrintTable(v any, table func(wide bool) Table) error {
	return p.Print(v, func(w io.Writer, wide bool) error {
		t := table(wide)
		return t.Write(w)
	})
}

// Item prints one record of a stream as it arrives: one compact JSON
// object on a line (JSON lines, with <, > and & as they are), a YAML
// document after "---", or the line text returns.
func (p *Printer) Item(v any, text func(wide bool) string) error {
	switch p.Format {
	case FormatJSON:
		enc := json.NewEncoder(jsonWriter{p.W})
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	case FormatYAML:
		if _, err := io.WriteString(p.W, "---\n"); err != nil {
			return err
		}
		return WriteYAML(p.W, v)
	}
	_, err := fmt.Fprintln(p.W, text(p.Wide()))
	return err
}
