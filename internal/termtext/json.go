package termtext

import (
	"bytes"
	"encoding/json"
	"io"
)

// WriteJSON prints v as indented JSON, with what Text escapes escaped as
// JSON escapes (see JSON).
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(jsonWriter{w})
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteJSONLines prints items as JSON lines, one compact object a line,
// escaped as WriteJSON escapes.
func WriteJSONLines[T any](w io.Writer, items []T) error {
	enc := json.NewEncoder(jsonWriter{w})
	for i := range items {
		if err := enc.Encode(items[i]); err != nil {
			return err
		}
	}
	return nil
}

// JSONLine is a message body printed as one line: compact when it is
// JSON, and escaped for the terminal either way (a body is whatever its
// publisher sent).
func JSONLine(data []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, data) == nil {
		return JSON(b.String())
	}
	return Text(string(data))
}

// jsonWriter writes JSON text through JSON.
type jsonWriter struct{ w io.Writer }

func (s jsonWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, JSON(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
