package console

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
)

// publish sends ch to every stream as the console receives it from the
// change feed.
func (h *hub) publish(ch substate.Change) { h.add(live(ch), false) }

// live is ch as the console reads it from the change feed: encoded as the
// projector encodes it, then decoded.
func live(ch substate.Change) liveChange {
	body, err := substate.MarshalChangeEvent(ch, "")
	if err != nil {
		panic(err)
	}
	lc, err := decodeChange(body)
	if err != nil {
		panic(err)
	}
	return lc
}

// A change's SSE frame carries what the page reads, exactly as a frame
// encoded from the decoded change does: the sequence, the tenant, the old
// sub-state and the whole new view, for text a browser or an HTML context
// must not misread, and for a change older than its tenantId.
func TestFrameIsTheChange(t *testing.T) {
	at := time.Date(2026, 3, 4, 9, 0, 0, 123456789, time.UTC)
	full := substate.TenantView{TenantID: "acme-<eu>&co", WorkflowType: "provision", WorkflowSubState: substate.StateBackingOff,
		WorkflowVerb: "retrying", WorkflowStatus: "RUNNING", WorkflowExecutionID: "arn:aws:states:eu-west-1:1:execution:p:r\u2028",
		WorkflowRetryCount: 3, WorkflowNextRetryAt: at, WorkflowErrorMessage: "line 1\nline 2 \"quoted\" \u00e9 \U0001F600 </script>",
		WorkflowErrorType: "States.TaskFailed", WorkflowStep: "Create", UpdatedAt: at, Provider: substate.ProviderStepFunctions}
	for _, tc := range []struct {
		name string
		ch   substate.Change
	}{
		{"Full", substate.Change{Seq: 42, TenantID: full.TenantID, Old: substate.TenantView{TenantID: full.TenantID, WorkflowSubState: substate.StateRunning}, New: full}},
		{"First", substate.Change{Seq: 1, TenantID: "t", New: substate.TenantView{TenantID: "t", WorkflowSubState: substate.StateRunning}}},
		{"NoTenantID", substate.Change{Seq: 7, New: full}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := substate.MarshalChangeEvent(tc.ch, "")
			if err != nil {
				t.Fatal(err)
			}
			lc, err := decodeChange(body)
			if err != nil {
				t.Fatal(err)
			}
			frame := string(lc.frame())
			head := "id: " + itoa(tc.ch.Seq) + "\nevent: change\ndata: "
			data, ok := strings.CutPrefix(frame, head)
			if !ok || !strings.HasSuffix(data, "\n\n") || strings.Count(data, "\n") != 2 {
				t.Fatalf("frame %q is not one SSE event with one data line", frame)
			}
			e, err := substate.UnmarshalChangeEvent(body)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(struct {
				Seq         uint64              `json:"seq"`
				TenantID    string              `json:"tenantId"`
				OldSubState substate.SubState   `json:"oldSubState"`
				New         substate.TenantView `json:"new"`
			}{e.Data.Seq, tc.ch.New.TenantID, e.Data.Old.WorkflowSubState, e.Data.New})
			if err != nil {
				t.Fatal(err)
			}
			var got, exp any
			if err := json.Unmarshal([]byte(data), &got); err != nil {
				t.Fatalf("frame data %q: %v", data, err)
			}
			if err := json.Unmarshal(want, &exp); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("frame data\n%s\nwant\n%s", data, want)
			}
			if lc.tenantID != tc.ch.New.TenantID {
				t.Fatalf("tenant %q, want %q", lc.tenantID, tc.ch.New.TenantID)
			}
		})
	}
}

// A message that is not a change, or not JSON, is refused, not streamed.
func TestDecodeChangeRefuses(t *testing.T) {
	ev, err := substate.MarshalChangeEvent(change(1, "t"), "")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"NotJSON":     []byte(`{"data":`),
		"OtherSource": bytes.Replace(ev, []byte(substate.ChangeSource), []byte("/someone/else"), 1),
		"BadNew":      []byte(`{"specversion":"1.0","source":"` + substate.ChangeSource + `","data":{"seq":1,"new":{"tenantId":}}}`),
	} {
		if _, err := decodeChange(body); substate.ErrorCode(err) != substate.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }
