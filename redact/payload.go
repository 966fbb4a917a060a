package redact

import (
	"bytes"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/substatehq/substate/internal/jsonx"
)

// PayloadMembers are the member names whose values Payload redacts
// wherever they are in a raw payload: the execution input and output, and
// a Step Functions task's parameters (its input).
var PayloadMembers = []string{"input", "output", "parameters"}

// redactedPayload replaces a raw payload that is not JSON.
var redactedPayload = []byte(`"` + Redacted + `"`)

// Payload returns a copy of a raw provider payload whose execution input
// and output are redacted: the value of every member named input, output
// or parameters (any case), at any depth, whether JSON text (EventBridge
// detail.input, a Step Functions poll's execution.input) or JSON (a
// Restate row's or an engine event's input). A null stays null. The rest
// of the payload is kept as it is, in its order. A payload that is not
// JSON is replaced by the JSON string "[redacted]": nothing in it can be
// vouched for.
func (p *Policy) Payload(body []byte) []byte {
	opts := []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}
	dec := jsontext.NewDecoder(bytes.NewReader(body), opts...)
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out, opts...)
	if err := p.copyValue(dec, enc); err != nil {
		return redactedPayload
	}
	if _, err := dec.ReadToken(); err == nil { // more than one value
		return redactedPayload
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

// copyValue copies one value from dec to enc, redacting the payload
// members of the objects in it.
func (p *Policy) copyValue(dec *jsontext.Decoder, enc *jsontext.Encoder) error {
	switch dec.PeekKind() {
	case '{':
		return p.copyObject(dec, enc)
	case '[':
		if err := copyToken(dec, enc); err != nil {
			return err
		}
		for dec.PeekKind() != ']' {
			if err := p.copyValue(dec, enc); err != nil {
				return err
			}
		}
		return copyToken(dec, enc)
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	return enc.WriteValue(v)
}

func (p *Policy) copyObject(dec *jsontext.Decoder, enc *jsontext.Encoder) error {
	if err := copyToken(dec, enc); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if err := enc.WriteToken(name); err != nil {
			return err
		}
		if !payloadMember(name.String()) {
			if err := p.copyValue(dec, enc); err != nil {
				return err
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if err := enc.WriteValue(p.member(v)); err != nil {
			return err
		}
	}
	return copyToken(dec, enc)
}

// member redacts the value of a payload member.
func (p *Policy) member(v jsontext.Value) jsontext.Value {
	switch v.Kind() {
	case 'n':
		return v
	case '"':
		s, err := jsontext.AppendUnquote(nil, v)
		if err != nil {
			return jsontext.Value(redactedPayload)
		}
		q, err := jsontext.AppendQuote(nil, p.JSONText(string(s)))
		if err != nil {
			return jsontext.Value(redactedPayload)
		}
		return q
	}
	doc, err := jsonx.Decode(v)
	if err != nil {
		return jsontext.Value(redactedPayload)
	}
	return encode(p.Value(doc))
}

func copyToken(dec *jsontext.Decoder, enc *jsontext.Encoder) error {
	t, err := dec.ReadToken()
	if err != nil {
		return err
	}
	return enc.WriteToken(t)
}

func payloadMember(name string) bool {
	for _, m := range PayloadMembers {
		if strings.EqualFold(name, m) {
			return true
		}
	}
	return false
}
