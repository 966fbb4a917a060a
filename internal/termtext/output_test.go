package termtext

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"
)

type record struct {
	ID      string            `json:"id"`
	Count   int               `json:"count"`
	Flag    bool              `json:"flag"`
	At      time.Time         `json:"at"`
	Note    string            `json:"note,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Numbers []int             `json:"numbers"`
}

func TestPrinter(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	r := record{ID: "acme", Count: 2, Flag: true, At: at, Note: "true", Labels: map[string]string{"b": "2", "a": "1"}, Numbers: []int{1, 2}}
	text := func(w io.Writer, wide bool) error {
		if wide {
			_, err := io.WriteString(w, "WIDE\n")
			return err
		}
		_, err := io.WriteString(w, "TABLE\n")
		return err
	}
	for _, tc := range []struct {
		format Format
		want   string
	}{
		{FormatTable, "TABLE\n"},
		{FormatWide, "WIDE\n"},
		{FormatJSON, "{\n  \"id\": \"acme\",\n  \"count\": 2,\n  \"flag\": true,\n  \"at\": \"2026-03-01T09:00:00Z\",\n  \"note\": \"true\",\n  \"labels\": {\n    \"a\": \"1\",\n    \"b\": \"2\"\n  },\n  \"numbers\": [\n    1,\n    2\n  ]\n}\n"},
		// JSON's field names and order; a string that reads as another
		// type is quoted.
		{FormatYAML, "id: acme\ncount: 2\nflag: true\nat: \"2026-03-01T09:00:00Z\"\nnote: \"true\"\nlabels:\n  a: \"1\"\n  b: \"2\"\nnumbers:\n  - 1\n  - 2\n"},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			var b bytes.Buffer
			p := Printer{W: &b, Format: tc.format}
			if err := p.Print(r, text); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestPrinterItem(t *testing.T) {
	line := func(wide bool) string {
		if wide {
			return "acme wide"
		}
		return "acme"
	}
	for _, tc := range []struct {
		format Format
		want   string
	}{
		{FormatTable, "acme\nacme\n"},
		{FormatWide, "acme wide\nacme wide\n"},
		{FormatJSON, "{\"e\":\"\\u001b[2J\\u202e\",\"id\":\"acme\"}\n{\"e\":\"\\u001b[2J\\u202e\",\"id\":\"acme\"}\n"},
		{FormatYAML, "---\ne: \"\\e[2J\\u202e\"\nid: acme\n---\ne: \"\\e[2J\\u202e\"\nid: acme\n"},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			var b bytes.Buffer
			p := Printer{W: &b, Format: tc.format}
			for range 2 {
				if err := p.Item(map[string]string{"id": "acme", "e": "\x1b[2J\u202e"}, line); err != nil {
					t.Fatal(err)
				}
			}
			if got := b.String(); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range Formats {
		if got, err := ParseFormat(string(f)); got != f || err != nil {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Error("ParseFormat(xml) is no error")
	}
}

// FuzzTermYAML: YAML through WriteYAML reads back as the same string and
// holds nothing a terminal acts on.
func FuzzTermYAML(f *testing.F) {
	for _, s := range []string{"acme", "true", "1e3", "- x", "a: b", "\x1b]8;;http://x\x07link", "del\x7f c1\u009b", "\u202e\u2066\u2028", "\xff\xfe", "line\nbreak", `back\slash "q"`, "#hash", "  lead"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		if err := WriteYAML(&b, map[string]string{"v": s, "k" + s: "x"}); err != nil {
			t.Fatal(err)
		}
		var back map[string]string
		if err := yaml.Unmarshal(b.Bytes(), &back); err != nil {
			t.Fatalf("%q became %q, not YAML: %v", s, b.String(), err)
		}
		var want string // s as JSON carries it: each byte that is not UTF-8 a U+FFFD
		js, _ := json.Marshal(s)
		_ = json.Unmarshal(js, &want)
		if back["v"] != want || back["k"+want] != "x" {
			t.Fatalf("%q became %q, which reads %q", s, b.String(), back)
		}
		for _, r := range b.String() {
			if r < 0x20 && r != '\n' || r >= 0x7f && r < 0xa0 || unsafeRune(r) {
				t.Fatalf("%q became %q, which keeps %U", s, b.String(), r)
			}
		}
	})
}
