package mapping_test

import (
	"testing"
	"time"

	"github.com/substatehq/substate"
)

// TestMapEngineCloudEvent: an engine event arrives as a plain EngineEvent,
// as a CloudEvent in binary mode (ce-* headers, the event as the body) or
// in structured mode (the event as its data); the CloudEvent's subject and
// time fill what the event leaves out.
func TestMapEngineCloudEvent(t *testing.T) {
	m := newMapper(t)
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	bare := `{"executionId":"acme-1","workflow":"provision","seq":3,"status":"error","error":"quota"}`
	for _, tt := range []struct {
		name   string
		header map[string]string
		body   string
	}{
		{"Plain", nil, `{"tenantId":"acme","time":"2026-11-01T10:00:00Z",` + bare[1:]},
		{"Binary", map[string]string{"ce-specversion": "1.0", "ce-id": "acme-1/3", "ce-subject": "acme", "ce-time": "2026-11-01T10:00:00.000Z"}, bare},
		{"Structured", nil, `{"specversion":"1.0","id":"acme-1/3","type":"t","source":"/e","subject":"acme","time":"2026-11-01T10:00:00Z","data":` + bare + `}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := m.Map(substate.RawEvent{Kind: substate.RawEngine, ID: "x", Body: []byte(tt.body), Header: tt.header})
			if err != nil {
				t.Fatal(err)
			}
			got := evs[0]
			if got.TenantID != "acme" || got.SubState != substate.StateError || got.ErrorMessage != "quota" || !got.OccurredAt.Equal(at) {
				t.Fatalf("mapped %+v", got)
			}
		})
	}
	for _, tt := range []struct {
		name   string
		header map[string]string
		body   string
	}{
		{"BinaryOtherVersion", map[string]string{"ce-specversion": "0.3", "ce-subject": "acme"}, bare},
		{"BinaryBadTime", map[string]string{"ce-specversion": "1.0", "ce-subject": "acme", "ce-time": "yesterday"}, bare},
		{"StructuredNoData", nil, `{"specversion":"1.0","subject":"acme"}`},
		{"StructuredDataNotObject", nil, `{"specversion":"1.0","subject":"acme","data":"x"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Map(substate.RawEvent{Kind: substate.RawEngine, ID: "x", Body: []byte(tt.body), Header: tt.header})
			wantCode(t, err, substate.EINVALID)
		})
	}
}
