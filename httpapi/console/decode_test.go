package console

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/substatehq/substate"
)

// decodeChangeByReflection is decodeChange as json.Unmarshal does it: the
// oracle that the token walk must agree with.
func decodeChangeByReflection(data []byte) (liveChange, bool) {
	var e struct {
		SpecVersion string `json:"specversion"`
		Source      string `json:"source"`
		Data        struct {
			Seq      uint64 `json:"seq"`
			TenantID string `json:"tenantId"`
			Old      struct {
				SubState substate.SubState `json:"workflowSubState"`
			} `json:"old"`
			New jsontext.Value `json:"new"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &e, feedDecoding); err != nil {
		return liveChange{}, false
	}
	if e.SpecVersion != substate.CloudEventsSpecVersion || e.Source != substate.ChangeSource {
		return liveChange{}, false
	}
	d := e.Data
	if bytes.ContainsAny(d.New, "\r\n") {
		if err := d.New.Compact(); err != nil {
			return liveChange{}, false
		}
	}
	ch := liveChange{seq: d.Seq, tenantID: d.TenantID, oldSubState: d.Old.SubState, new: d.New}
	if ch.tenantID == "" {
		var v struct {
			TenantID string `json:"tenantId"`
		}
		_ = json.Unmarshal(d.New, &v)
		ch.tenantID = v.TenantID
	}
	return ch, true
}

// changeSeeds are change-feed messages as the projector writes them, and
// the shapes around them the oracle reads in its own way.
func changeSeeds(tb testing.TB) [][]byte {
	at := time.Date(2026, 3, 4, 9, 0, 0, 123456789, time.UTC)
	full := substate.TenantView{TenantID: "acme-<eu>&co", WorkflowSubState: substate.StateBackingOff, WorkflowRetryCount: 3,
		WorkflowErrorMessage: "line 1\nline 2 \"quoted\" \u00e9 \U0001F600", UpdatedAt: at, Provider: substate.ProviderStepFunctions}
	var seeds [][]byte
	for _, ch := range []substate.Change{
		{Seq: 42, TenantID: full.TenantID, Old: substate.TenantView{TenantID: full.TenantID, WorkflowSubState: substate.StateRunning}, New: full},
		{Seq: 1, TenantID: "t", New: substate.TenantView{TenantID: "t", WorkflowSubState: substate.StateRunning}},
		{Seq: 7, New: full},
	} {
		body, err := substate.MarshalChangeEvent(ch, "")
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, body)
	}
	src := `"source":"` + substate.ChangeSource + `"`
	for _, s := range []string{
		`{"specversion":"1.0",` + src + `,"data":{"seq":3,"tenantId":"a","old":{"workflowSubState":"running"},"new":{"tenantId":"a"}}}`,
		`{"specversion":"1.0",` + src + `,"data":null}`,
		`{"specversion":"1.0",` + src + `,"data":{"seq":null,"old":null,"new":null}}`,
		`{"specversion":"1.0",` + src + `,"data":{"seq":1.5}}`,
		`{"specversion":"1.0",` + src + `,"data":{"seq":-1}}`,
		`{"specversion":"1.0",` + src + `,"data":{"seq":1e3}}`,
		`{"specversion":"1.0",` + src + `,"data":{"seq":18446744073709551616}}`,
		`{"specversion":"1.0",` + src + `,"data":{"seq":"1"}}`,
		`{"specversion":"1.0",` + src + `,"data":{"old":{"workflowSubState":"RUNNING"}}}`,
		`{"specversion":"1.0",` + src + `,"data":{"old":{"workflowSubState":""}}}`,
		`{"specversion":"1.0",` + src + `,"data":{"old":[]}}`,
		`{"specversion":"1.0",` + src + `,"data":[]}`,
		`{"specversion":"1.0",` + src + `,"data":{"seq":1},"data":{"tenantId":"b"}}`,
		`{"specversion":"1.0",` + src + `,"data":{"new":{"a":1},"new":{"b":2}}}`,
		`{"specversion":"1.0",` + src + `,"data":{"new":{"tenantId":"x",` + "\n" + `"y":[1, 2]}}}`,
		`{"SpecVersion":"1.0",` + src + `}`,
		`{"spec\u0076ersion":"1.0",` + src + `,"d\u0061ta":{"tenant\u0049d":"\u0061b"}}`,
		`{"specversion":1,` + src + `}`,
		`{"specversion":"1.0",` + src + `} {}`,
		`{"specversion":"1.0",` + src + `}x`,
		`{"specversion":"1.0",` + src + `,"extra":{"deep":[1,{"x":null}]}}`,
		`{"specversion":"1.0","source":"/someone/else"}`,
		`{"specversion":"2.0",` + src + `}`, // as long as a change's, not one
		`{"specversion":"1.0","source":"` + strings.Repeat("x", len(substate.ChangeSource)) + `"}`,
		`[]`, `null`, `"x"`, `{`, `{"data":`, ``, " \t\n",
		"{\"specversion\":\"1.0\"," + src + ",\"data\":{\"tenantId\":\"\xff\"}}",
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// The token walk accepts exactly what the reflection decoder accepts, and
// reads the same change from it.
func TestDecodeChangeAgreesWithReflection(t *testing.T) {
	for _, body := range changeSeeds(t) {
		agree(t, body)
	}
}

func FuzzDecodeChange(f *testing.F) {
	for _, body := range changeSeeds(f) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) { agree(t, body) })
}

func agree(t *testing.T, body []byte) {
	t.Helper()
	want, ok := decodeChangeByReflection(body)
	got, err := decodeChange(body)
	switch {
	case ok && err != nil:
		t.Fatalf("%q: refused (%v), json.Unmarshal reads %+v", body, err, want)
	case !ok && err == nil:
		t.Fatalf("%q: read %+v, json.Unmarshal refuses it", body, got)
	case !ok && substate.ErrorCode(err) != substate.EINVALID:
		t.Fatalf("%q: %v, want EINVALID", body, err)
	case ok && (got.seq != want.seq || got.tenantID != want.tenantID || got.oldSubState != want.oldSubState || !bytes.Equal(got.new, want.new)):
		t.Fatalf("%q: read %+v, json.Unmarshal reads %+v", body, got, want)
	}
}
