package termtext

import (
	"bytes"
	"encoding/json"
	"io"

	"go.yaml.in/yaml/v4"
)

// WriteYAML prints v as YAML in block style, with the field names, the
// order and the values of its JSON (encoding/json's tags are what every
// record of substate is written with), escaped for a terminal as
// WriteJSON is: a string holding what Text escapes is double-quoted, and
// such characters are written as YAML escapes, which are JSON's.
func WriteYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// JSON escapes what YAML would read as a line break (U+0085, U+2028)
	// or fold, so the YAML parser sees the very string.
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(JSON(string(b))), &doc); err != nil {
		return err
	}
	blockStyle(&doc)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err = io.WriteString(w, JSON(out.String()))
	return err
}

// blockStyle turns the flow style JSON decodes as into block style, and
// double-quotes every string a terminal would act on, so that JSON's
// escapes of it (applied to the whole output) stay inside quotes, where
// YAML reads them as the same characters.
func blockStyle(n *yaml.Node) {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str" && needsEscape(n.Value):
		n.Style = yaml.DoubleQuotedStyle
	default:
		n.Style = 0
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}
