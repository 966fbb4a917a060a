package substate_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/substatehq/substate"
)

func TestChangeSubject(t *testing.T) {
	for _, tt := range []struct {
		name, tenant string
		sub          substate.SubState
		provider     substate.Provider
		want         string
	}{
		{"OK", "acme", substate.StateFailed, substate.ProviderRestate, "substate.changes.failed.restate.acme"},
		{"Dots", "acme.corp *>", substate.StateBackingOff, substate.ProviderStepFunctions, "substate.changes.backing-off.stepfunctions.acme~2Ecorp~20~2A~3E"},
		{"NoProvider", "t", substate.StateSucceeded, "", "substate.changes.succeeded.~.t"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := substate.Change{TenantID: tt.tenant, New: substate.TenantView{WorkflowSubState: tt.sub, Provider: tt.provider}}
			got := substate.ChangeSubject(&c)
			if got != tt.want {
				t.Fatalf("ChangeSubject = %q, want %q", got, tt.want)
			}
			toks := strings.Split(strings.TrimPrefix(got, substate.SubjectChangesPrefix), ".")
			if len(toks) != 3 {
				t.Fatalf("%q has %d tokens after the prefix, want 3", got, len(toks))
			}
			if id, err := substate.DecodeToken(toks[2]); err != nil || id != tt.tenant {
				t.Fatalf("tenant token decodes to %q, %v; want %q", id, err, tt.tenant)
			}
		})
	}
}

func TestChangeType(t *testing.T) {
	base := substate.TenantView{TenantID: "t", WorkflowSubState: substate.StateRunning, WorkflowVerb: substate.StateRunning.Verb(),
		WorkflowExecutionID: "e1", WorkflowRetryCount: 1, WorkflowErrorMessage: "boom", WorkflowStep: "a"}
	for _, tt := range []struct {
		name string
		edit func(v *substate.TenantView)
		want string
	}{
		{"SubState", func(v *substate.TenantView) { v.WorkflowSubState, v.WorkflowRetryCount = substate.StateBackingOff, 2 }, substate.ChangeTypeSubState},
		{"Execution", func(v *substate.TenantView) { v.WorkflowExecutionID, v.WorkflowRetryCount = "e2", 0 }, substate.ChangeTypeExecution},
		{"Retry", func(v *substate.TenantView) { v.WorkflowRetryCount, v.WorkflowErrorMessage = 2, "again" }, substate.ChangeTypeRetry},
		{"Error", func(v *substate.TenantView) { v.WorkflowErrorMessage = "other" }, substate.ChangeTypeError},
		{"Step", func(v *substate.TenantView) { v.WorkflowStep = "b" }, substate.ChangeTypeStep},
		{"Fingerprint", func(v *substate.TenantView) { v.WorkflowErrorFingerprint = "engine/x/other" }, substate.ChangeTypeError},
		{"ErrorType", func(v *substate.TenantView) { v.WorkflowErrorType = "Other" }, substate.ChangeTypeError},
		{"WorkflowType", func(v *substate.TenantView) { v.WorkflowType = "billing" }, substate.ChangeTypeExecution},
		{"Internal", func(*substate.TenantView) {}, substate.ChangeTypeExecution},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := substate.Change{Old: base, New: base}
			tt.edit(&c.New)
			if got := substate.ChangeType(&c); got != tt.want {
				t.Fatalf("ChangeType = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestChangeEventRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.FixedZone("x", 3600))
	c := substate.Change{Seq: 42, TenantID: "acme corp",
		Old: substate.TenantView{TenantID: "acme corp"},
		New: substate.TenantView{TenantID: "acme corp", WorkflowSubState: substate.StateFailed, UpdatedAt: at}}
	b, err := substate.MarshalChangeEvent(c, "http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	e, err := substate.UnmarshalChangeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"time":"2026-11-01T09:00:00.000Z"`) {
		t.Errorf("time not in UTC with three fractional digits: %s", b)
	}
	if got, want := e.DataSchema, "http://127.0.0.1:8080/v1/schemas/change.json"; got != want {
		t.Errorf("dataschema = %q, want %q", got, want)
	}
	if e.ID != "42" || e.Subject != "acme corp" || e.Type != substate.ChangeTypeSubState || e.Data.Seq != 42 {
		t.Errorf("event %+v", e)
	}
	if _, err := substate.UnmarshalChangeEvent([]byte(`{"specversion":"0.3"}`)); substate.ErrorCode(err) != substate.EINVALID {
		t.Errorf("UnmarshalChangeEvent(other) = %v, want EINVALID", err)
	}
}

func TestValidTraceParent(t *testing.T) {
	for tp, want := range map[string]bool{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":       true,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra": true, // a later version may append
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra": false,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01":       false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01":       false,
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01":       false,
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":       false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7":          false,
		"": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" + strings.Repeat("-0", 300): false,
	} {
		if got := substate.ValidTraceParent(tp); got != want {
			t.Errorf("ValidTraceParent(%q) = %v, want %v", tp, got, want)
		}
	}
}

func TestEventTimeFixedPrecision(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 1, 10, 0, 0, 123456789, time.FixedZone("x", -3600)),
		{},
	} {
		d := substate.EventData{TenantID: "t", Provider: substate.ProviderEngine, ExecutionID: "e", SubState: substate.StateRunning, OccurredAt: at}
		b, err := substate.MarshalEvent(substate.NewEvent("id", d))
		if err != nil {
			t.Fatal(err)
		}
		want := `"time":"` + at.UTC().Format("2006-01-02T15:04:05.000") + `Z"`
		if !strings.Contains(string(b), want) {
			t.Errorf("%v: %s lacks %s", at, b, want)
		}
		e, err := substate.UnmarshalEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		if !e.Time.Equal(at.Truncate(time.Millisecond)) || e.Type != substate.EventTypeFor(substate.StateRunning) {
			t.Errorf("%v: decoded time %v, type %s", at, e.Time, e.Type)
		}
	}
	// Events written before the precision was fixed, with the single type.
	old := `{"specversion":"1.0","type":"` + substate.EventType + `","time":"2026-11-01T10:00:00.5Z","data":{"tenantId":"t","executionId":"x","subState":"running","provider":"engine"}}`
	if _, err := substate.UnmarshalEvent([]byte(old)); err != nil {
		t.Errorf("legacy event: %v", err)
	}
	mismatch := `{"specversion":"1.0","type":"` + substate.EventTypeFor(substate.StateFailed) + `","data":{"tenantId":"t","executionId":"x","subState":"running","provider":"engine"}}`
	if _, err := substate.UnmarshalEvent([]byte(mismatch)); substate.ErrorCode(err) != substate.EINVALID {
		t.Errorf("type of another sub-state: %v, want EINVALID", err)
	}
}

// Stuck and unstuck messages have their own type and an id of their own:
// the change they follow keeps the bare sequence.
func TestStuckChangeIDs(t *testing.T) {
	for _, c := range []struct {
		kind    substate.ChangeKind
		typ, id string
	}{
		{substate.ChangeFromEvent, substate.ChangeTypeSubState, "42"},
		{substate.ChangeStuck, substate.ChangeTypeStuck, "42.stuck.acme~2Eeu"},
		{substate.ChangeUnstuck, substate.ChangeTypeUnstuck, "42.unstuck.acme~2Eeu"},
	} {
		ch := substate.Change{Seq: 42, TenantID: "acme.eu", Kind: c.kind, New: substate.TenantView{WorkflowSubState: substate.StateRunning}}
		if got := substate.ChangeType(&ch); got != c.typ {
			t.Errorf("kind %d: type %s, want %s", c.kind, got, c.typ)
		}
		if got := substate.ChangeMsgID(&ch); got != c.id {
			t.Errorf("kind %d: id %s, want %s", c.kind, got, c.id)
		}
		if e := substate.NewChangeEvent(ch, ""); e.ID != c.id || e.Type != c.typ {
			t.Errorf("kind %d: event id %s type %s", c.kind, e.ID, e.Type)
		}
	}
}

// A change whose data the outbox encoded already is published with those
// bytes: the message must be the one encoding the change would give, byte
// for byte, whatever its text holds.
func TestEncodeChangeEventWithEncodedData(t *testing.T) {
	at := time.Date(2026, 11, 1, 10, 0, 0, 123456789, time.UTC)
	for _, tt := range []struct{ name, tenant, msg string }{
		{"Plain", "acme", "States.TaskFailed"},
		{"HTML and quotes", "a<b>&\"c\"", `<script>alert("x")</script> & 'y'`},
		{"Unicode", "ünïcode-租户", "fehlgeschlagen: Zeitüberschreitung ✗ \u2028\u2029"},
		{"Control", "t\tab", "line1\nline2\r\x01"},
		{"Empty", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := substate.Change{Seq: 7, TenantID: tt.tenant, TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
				Old: substate.TenantView{TenantID: tt.tenant, WorkflowSubState: substate.StateRunning},
				New: substate.TenantView{TenantID: tt.tenant, WorkflowSubState: substate.StateFailed, WorkflowErrorMessage: tt.msg, UpdatedAt: at}}
			want, err := substate.MarshalChangeEvent(c, "https://substate.example")
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(&c)
			if err != nil {
				t.Fatal(err)
			}
			c.Encoded = data
			got, err := substate.MarshalChangeEvent(c, "https://substate.example")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("with the data encoded beforehand:\n%s\nwant\n%s", got, want)
			}
			if bytes.Contains(data, []byte("Encoded")) {
				t.Fatalf("the encoded data holds the bytes themselves: %s", data)
			}
		})
	}
}
