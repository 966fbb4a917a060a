package mapping

import (
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/substatehq/substate"
)

// decodeOptions decode provider payloads: a member given twice takes its
// last value, as in encoding/json, since real payloads may need it; member
// names match exactly, as every provider writes them. Invalid UTF-8 and
// unpaired surrogate escapes are refused, not replaced by U+FFFD: Step
// Functions (through EventBridge) and Restate send only valid UTF-8 JSON,
// so such bytes were damaged or forged, and replacing them would merge
// distinct ids ("bad\xff" and "bad\xfe" into one tenant).
var decodeOptions = jsontext.AllowDuplicateNames(true)

// decode decodes a provider payload into v. It uses JSON v2 (the module of
// encoding/json/v2, stable in the standard library from Go 1.27): mapping
// runs once for every event, and v2 decodes a Step Functions status change
// in a fraction of the time and allocations of encoding/json.
func decode(body []byte, v any) error {
	if err := validUTF8(body); err != nil {
		return err
	}
	return json.Unmarshal(body, v, decodeOptions)
}

// validUTF8 returns an EINVALID error naming the first byte of body that
// is not UTF-8.
func validUTF8(body []byte) error {
	if utf8.Valid(body) {
		return nil
	}
	for i := 0; i < len(body); {
		r, size := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && size == 1 {
			return substate.Errorf(substate.EINVALID,
				"payload is not valid UTF-8 (byte 0x%02X at offset %d); providers send only UTF-8 JSON, so it was damaged or forged", body[i], i)
		}
		i += size
	}
	return nil
}
