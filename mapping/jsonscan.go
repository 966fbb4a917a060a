package mapping

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/substatehq/substate"
)

// lookupMembers returns the raw JSON value at the member path names of the
// object in data ($.a.b for names a, b) without decoding the rest of the
// document. It reports false when the path does not exist or data is not
// well-formed where it was read; the returned value is only scanned, the
// caller decodes it.
func lookupMembers(data []byte, names []string) (json.RawMessage, bool) {
	v := data
	for _, name := range names {
		var ok bool
		if v, ok = member(v, name); !ok {
			return nil, false
		}
	}
	return v, true
}

// member returns the raw value of the member called name of the JSON object
// in data; the last one wins when a name repeats, as in encoding/json.
func member(data []byte, name string) (json.RawMessage, bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	i = skipSpace(data, i+1)
	var found json.RawMessage
	for i < len(data) && data[i] != '}' {
		keyEnd := skipString(data, i)
		if keyEnd < 0 {
			return nil, false
		}
		key := data[i:keyEnd]
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		end := skipValue(data, i)
		if end < 0 {
			return nil, false
		}
		if keyEquals(key, name) {
			found = data[i:end]
		}
		i = skipSpace(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return found, found != nil
}

// keyEquals compares a quoted JSON key with name, decoding escapes only when
// the key has any.
func keyEquals(quoted []byte, name string) bool {
	raw := quoted[1 : len(quoted)-1]
	for _, c := range raw {
		if c == '\\' {
			var s string
			return json.Unmarshal(quoted, &s) == nil && s == name
		}
	}
	return string(raw) == name
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the JSON string starting at i, or -1.
func skipString(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the JSON value starting at i, or -1.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		return skipNested(data, i)
	}
	start := i
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if i == start {
				return -1
			}
			return i
		}
		i++
	}
	if i == start {
		return -1
	}
	return i
}

// skipNested returns the index after the object or array starting at i, or -1.
func skipNested(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch data[i] {
		case '"':
			if i = skipString(data, i); i < 0 {
				return -1
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return -1
}

// jsonString decodes a raw JSON string value; it reports false for any
// other value and for a string that is not valid UTF-8.
func jsonString(v []byte) (string, bool) {
	s, err := decodeString(v)
	return s, err == nil
}

// decodeString decodes a raw JSON string value strictly, as decode does:
// invalid UTF-8 and unpaired surrogate escapes are errors. Strings without
// escapes are not run through a decoder.
func decodeString(v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", substate.Errorf(substate.EINVALID, "not a JSON string")
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && bytes.IndexByte(inner, '"') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	if err := decode(v, &s); err != nil {
		return "", err
	}
	return s, nil
}
