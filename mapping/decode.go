package mapping

import (
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// decodeOptions decode provider payloads as leniently as encoding/json
// does where real payloads may need it: a member given twice takes its
// last value, and invalid UTF-8 is replaced rather than rejected. Member
// names match exactly, as every provider writes them.
var decodeOptions = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// decode decodes a provider payload into v. It uses JSON v2 (the module of
// encoding/json/v2, stable in the standard library from Go 1.27): mapping
// runs once for every event, and v2 decodes a Step Functions status change
// in a fraction of the time and allocations of encoding/json.
func decode(body []byte, v any) error { return json.Unmarshal(body, v, decodeOptions) }
