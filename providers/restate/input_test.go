package restate

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestInputOf reads the input out of a sys_journal Input entry as a real
// 1.7.12 server writes it (the payload's bytes as a JSON array of
// numbers), and attaches only UTF-8 JSON of a bounded size.
func TestInputOf(t *testing.T) {
	entry := func(payload []byte) json.RawMessage {
		nums := make([]string, len(payload))
		for i, b := range payload {
			nums[i] = strconv.Itoa(int(b))
		}
		cmd := `{"Command":{"Input":{"headers":[{"name":"authorization","value":"Bearer s3cret"}],"payload":[` + strings.Join(nums, ",") + `],"name":""}}}`
		b, _ := json.Marshal(map[string]any{"id": "inv_1x", "entry_json": cmd})
		return b
	}
	tests := []struct {
		name  string
		entry json.RawMessage
		want  string
	}{
		{"Object", entry([]byte(`{"tenantId":"acme","x":1}`)), `{"tenantId":"acme","x":1}`},
		{"Spaces", entry([]byte(" \n[1,2]\n")), `[1,2]`},
		{"NotJSON", entry([]byte("hello")), ""},
		{"NotUTF8", entry([]byte("\"\xff\"")), ""},
		{"Empty", entry(nil), ""},
		{"TooLarge", entry([]byte(`"` + strings.Repeat("x", maxInputBytes) + `"`)), ""},
		{"NoInputCommand", json.RawMessage(`{"id":"inv_1x","entry_json":"{\"Command\":{\"Run\":{}}}"}`), ""},
		{"EntryNotJSON", json.RawMessage(`{"id":"inv_1x","entry_json":"{"}`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, got := inputOf(tt.entry)
			if id != "inv_1x" || string(got) != tt.want {
				t.Errorf("got %q %s, want inv_1x %s", id, got, tt.want)
			}
		})
	}
	if id, _ := inputOf(json.RawMessage(`{"entry_json":"{}"}`)); id != "" {
		t.Errorf("an entry without id gives %q", id)
	}
}

// TestWithInput attaches the input to the rows of keyless invocations
// only.
func TestWithInput(t *testing.T) {
	p := &Poller{inputs: map[string]json.RawMessage{"inv_1k": json.RawMessage(`{"tenantId":"acme"}`), "inv_1n": nil}}
	tests := []struct {
		row, want string
	}{
		{`{"id":"inv_1k","status":"running"}`, `{"id":"inv_1k","status":"running","input":{"tenantId":"acme"}}`},
		{`{"id":"inv_1k","target_service_key":"k","status":"running"}`, `{"id":"inv_1k","target_service_key":"k","status":"running"}`},
		{`{"id":"inv_1n","status":"running"}`, `{"id":"inv_1n","status":"running"}`},
		{`{"id":"inv_1u","status":"running"}`, `{"id":"inv_1u","status":"running"}`},
	}
	for _, tt := range tests {
		f, err := factsOf(json.RawMessage(tt.row))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(p.withInput(f, json.RawMessage(tt.row))); got != tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
	}
}
