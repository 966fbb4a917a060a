package publishers_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/contract"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/bustest"
)

func TestUnresolved(t *testing.T) {
	b := bustest.Open(t)
	topo := bus.DefaultTopology()
	if err := topo.EnsureUnresolvedStream(t.Context(), b.JetStream); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 23, 22, 55, 19, 0, time.UTC)
	u := &publishers.Unresolved{JS: b.JetStream, Now: func() time.Time { return at }}
	long := "arn:aws:states:us-east-1:123456789012:execution:provision:" + strings.Repeat("x.y ", 300)
	ids := []struct {
		p  substate.Provider
		id string
	}{{substate.ProviderRestate, "inv_1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, {substate.ProviderStepFunctions, long}}
	for _, x := range ids {
		if ok, err := u.Reported(t.Context(), x.p, x.id); err != nil || ok {
			t.Fatalf("%s %.20s reported before it was remembered: %v, %v", x.p, x.id, ok, err)
		}
		for range 2 {
			if err := u.Remember(t.Context(), x.p, x.id); err != nil {
				t.Fatal(err)
			}
		}
	}
	again := &publishers.Unresolved{JS: b.JetStream} // another worker, or this one after a restart
	for _, x := range ids {
		if ok, err := again.Reported(t.Context(), x.p, x.id); err != nil || !ok {
			t.Errorf("%s %.20s not reported after it was remembered: %v, %v", x.p, x.id, ok, err)
		}
	}
	if ok, _ := again.Reported(t.Context(), substate.ProviderEngine, ids[0].id); ok {
		t.Error("the same id of another provider is reported")
	}
	msgs := bustest.Msgs(t, b.JetStream, substate.StreamUnresolved)
	if got, want := len(msgs), len(ids); got != want {
		t.Fatalf("%s holds %d messages, want one per execution (%d)", substate.StreamUnresolved, got, want)
	}
	var rec struct {
		Provider    string    `json:"provider"`
		ExecutionID string    `json:"executionId"`
		At          time.Time `json:"deadLetteredAt"`
	}
	if err := json.Unmarshal(msgs[0].Data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Provider != "restate" || rec.ExecutionID != ids[0].id || !rec.At.Equal(at) {
		t.Errorf("record %+v", rec)
	}
	schema := unresolvedSchema(t)
	for _, m := range msgs {
		if len(m.Subject) > 100 || len(m.Data) > 1024 {
			t.Errorf("message on %q of %d bytes: not bounded", m.Subject, len(m.Data))
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(m.Data)))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(v); err != nil {
			t.Errorf("message %s does not match asyncapi.json: %v", m.Data, err)
		}
	}
	cfg := topo.UnresolvedStreamConfig()
	if cfg.MaxAge != bus.UnresolvedTTL || cfg.MaxMsgs != bus.UnresolvedMax || cfg.MaxMsgsPerSubject != 1 {
		t.Errorf("SUBSTATE_UNRESOLVED keeps %v, %d messages, %d per subject", cfg.MaxAge, cfg.MaxMsgs, cfg.MaxMsgsPerSubject)
	}
}

// unresolvedSchema compiles the payload asyncapi.json gives the messages
// of SUBSTATE_UNRESOLVED, whose properties are closed.
func unresolvedSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := contract.Document(contract.AsyncAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Components struct {
			Messages map[string]struct {
				Payload json.RawMessage `json:"payload"`
			} `json:"messages"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(d.Components.Messages["unresolved"].Payload)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("unresolved.json", v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("unresolved.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
