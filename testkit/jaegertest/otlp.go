package jaegertest

import (
	"encoding/json"
	"strconv"
)

// traces is the OTLP JSON of a set of traces, as the api/v3 routes answer
// (the fields a test reads).
type traces struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []keyValue `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Spans []struct {
				TraceID      string     `json:"traceId"`
				SpanID       string     `json:"spanId"`
				ParentSpanID string     `json:"parentSpanId"`
				Name         string     `json:"name"`
				Kind         int        `json:"kind"`
				Attributes   []keyValue `json:"attributes"`
				Links        []struct {
					TraceID    string     `json:"traceId"`
					SpanID     string     `json:"spanId"`
					Attributes []keyValue `json:"attributes"`
				} `json:"links"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

// keyValue is an OTLP attribute.
type keyValue struct {
	Key   string `json:"key"`
	Value struct {
		String *string          `json:"stringValue"`
		Int    *json.RawMessage `json:"intValue"` // a JSON string or number
		Bool   *bool            `json:"boolValue"`
		Double *float64         `json:"doubleValue"`
	} `json:"value"`
}

// text returns an attribute's value as text.
func (kv keyValue) text() string {
	v := kv.Value
	switch {
	case v.String != nil:
		return *v.String
	case v.Int != nil:
		var s string
		if json.Unmarshal(*v.Int, &s) == nil {
			return s
		}
		return string(*v.Int)
	case v.Bool != nil:
		return strconv.FormatBool(*v.Bool)
	case v.Double != nil:
		return strconv.FormatFloat(*v.Double, 'g', -1, 64)
	}
	return ""
}

func attrMap(kvs []keyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = kv.text()
	}
	return out
}

// spans flattens the traces into their spans.
func (t traces) spans() []Span {
	var out []Span
	for _, rs := range t.ResourceSpans {
		service := attrMap(rs.Resource.Attributes)["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{
					TraceID: s.TraceID, SpanID: s.SpanID, ParentSpanID: s.ParentSpanID, Name: s.Name,
					Kind: Kind(s.Kind), Attributes: attrMap(s.Attributes), Service: service,
				}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, Link{TraceID: l.TraceID, SpanID: l.SpanID, Attributes: attrMap(l.Attributes)})
				}
				out = append(out, sp)
			}
		}
	}
	return out
}
