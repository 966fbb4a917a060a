package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// Traceparents the test sends: one on an HTTP ingress request, one on an
// engine event in binary mode.
const (
	ingressTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	engineTrace  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

// TestCloudEventsSDK drives a worker with Restate rows through the HTTP
// ingress (with a W3C traceparent) and engine events published as
// CloudEvents in binary and in structured mode, then reads every message
// of SUBSTATE_EVENTS and SUBSTATE_CHANGES with the CloudEvents SDK for Go:
// each is a valid CloudEvent in structured mode and again after the SDK
// wrote it in binary mode and read it back; its type is one per kind of
// occurrence and every kind occurs; its subject is the tenant; its time is
// RFC 3339 in UTC with three fractional digits; its dataschema is the
// schema the worker serves, and its data validates against that schema;
// the traceparent of the request that brought it in is on it. The engine
// workflow's SLO lets it wait a second: it is stuck until its last event.
func TestCloudEventsSDK(t *testing.T) {
	slos := writeSLOs(t, "workflows:\n  provision: {waiting: 1s}\n")
	w := workertest.Start(t, func(f *worker.Flags) { f.SLOFile = slos })
	ctx := context.Background()
	for step := range len(workertest.RestateStatuses) - 1 {
		req, _ := http.NewRequest(http.MethodPost, w.HTTP.URL()+"/v1/ingest/restate", bytes.NewReader(workertest.RestateRow("ce-restate", step)))
		req.Header.Set("webhook-id", fmt.Sprintf("ce-restate-%d", step))
		req.Header.Set("traceparent", ingressTrace)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("ingest: %d", resp.StatusCode)
		}
	}
	for i, ev := range engineStory() {
		publishEngineCE(t, w, ev, i%2 == 0)
		if ev.TenantID == "ce-engine" && ev.Status == substate.EngineWaiting {
			// Its deadline passed long ago: stuck once the view has it.
			workertest.Eventually(t, func() string {
				if len(feedOf(t, w, "ce-engine", substate.ChangeStuck)) == 0 {
					return "ce-engine is not stuck"
				}
				return ""
			})
		}
	}
	workertest.Eventually(t, func() string {
		for tenant, want := range map[string]substate.SubState{"ce-restate": substate.StateFailed, "ce-engine": substate.StateSucceeded} {
			var v substate.TenantView
			if workertest.GetJSON(t, w.HTTP.URL()+"/v1/tenants/"+tenant, &v); v.WorkflowSubState != want {
				return fmt.Sprintf("tenant %s is %q, want %q", tenant, v.WorkflowSubState, want)
			}
		}
		var v substate.TenantView
		if workertest.GetJSON(t, w.HTTP.URL()+"/v1/tenants/ce-engine-2", &v); v.WorkflowExecutionID != "x2" {
			return "tenant ce-engine-2 has not moved to execution x2"
		}
		if n, _ := w.View.OutboxLen(); n > 0 {
			return fmt.Sprintf("%d changes wait in the outbox", n)
		}
		return ""
	})
	schemas := loadSchemas(t, w.HTTP.URL())
	seen := map[string]bool{}
	for _, stream := range []string{substate.StreamEvents, substate.StreamChanges} {
		for _, m := range bustest.Msgs(t, w.Bus.JetStream, stream) {
			e := checkCloudEvent(t, m.Data, schemas, w.HTTP.URL())
			seen[e.Type()] = true
			checkBinaryRoundTrip(t, ctx, e)
		}
	}
	for _, typ := range append(substate.EventTypes(), substate.ChangeTypes...) {
		if !seen[typ] {
			t.Errorf("no event of type %s", typ)
		}
	}
}

// checkCloudEvent decodes a structured CloudEvent with the SDK and checks
// it; it returns the event.
func checkCloudEvent(tb testing.TB, body []byte, schemas map[string]*jsonschema.Schema, base string) cloudevents.Event {
	tb.Helper()
	e := cloudevents.NewEvent()
	if err := json.Unmarshal(body, &e); err != nil {
		tb.Fatalf("the SDK cannot read %s: %v", body, err)
	}
	if err := e.Validate(); err != nil {
		tb.Errorf("event %s (%s): %v", e.ID(), e.Type(), err)
	}
	var attrs struct {
		Time string         `json:"time"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &attrs); err != nil {
		tb.Fatal(err)
	}
	if !eventTime.MatchString(attrs.Time) {
		tb.Errorf("event %s: time %q is not RFC 3339 UTC with three fractional digits", e.ID(), attrs.Time)
	}
	if tenant, _ := attrs.Data["tenantId"].(string); e.Subject() != tenant {
		tb.Errorf("event %s: subject %q, tenant %q", e.ID(), e.Subject(), tenant)
	}
	name, ok := strings.CutPrefix(e.DataSchema(), base+substate.SchemaPath)
	if s := schemas[name]; !ok || s == nil {
		tb.Errorf("event %s: dataschema %q is not a schema the worker serves", e.ID(), e.DataSchema())
	} else if err := s.Validate(jsonAny(tb, e.Data())); err != nil {
		tb.Errorf("event %s: data does not validate against %s: %v", e.ID(), name, err)
	}
	tp, _ := e.Extensions()["traceparent"].(string)
	if want := wantTrace(e.Type(), attrs.Data); tp != want {
		tb.Errorf("event %s (%s, tenant %s): traceparent %q, want %q", e.ID(), e.Type(), e.Subject(), tp, want)
	}
	return e
}

// wantTrace is the traceparent an event of this type about this data must
// carry. A stuck event carries none: no event made it.
func wantTrace(typ string, data map[string]any) string {
	if typ == substate.ChangeTypeStuck {
		return ""
	}
	tenant, _ := data["tenantId"].(string)
	switch tenant {
	case "ce-restate":
		return ingressTrace
	case "ce-engine":
		return engineTrace
	}
	return ""
}

var eventTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// checkBinaryRoundTrip writes e in binary mode with the SDK's HTTP binding,
// reads it back and validates it.
func checkBinaryRoundTrip(tb testing.TB, ctx context.Context, e cloudevents.Event) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://consumer.invalid/", nil)
	if err := cehttp.WriteRequest(binding.WithForceBinary(ctx), binding.ToMessage(&e), req); err != nil {
		tb.Fatalf("write %s in binary mode: %v", e.ID(), err)
	}
	if req.Header.Get("ce-id") != e.ID() || !strings.HasPrefix(req.Header.Get("Content-Type"), "application/json") {
		tb.Fatalf("event %s not in binary mode: %v", e.ID(), req.Header)
	}
	got, err := binding.ToEvent(ctx, cehttp.NewMessageFromHttpRequest(req))
	if err != nil {
		tb.Fatalf("read %s in binary mode: %v", e.ID(), err)
	}
	if err := got.Validate(); err != nil {
		tb.Errorf("event %s in binary mode: %v", e.ID(), err)
	}
	if got.Type() != e.Type() || got.Subject() != e.Subject() || !got.Time().Equal(e.Time()) ||
		got.DataSchema() != e.DataSchema() || !bytes.Equal(got.Data(), e.Data()) ||
		fmt.Sprint(got.Extensions()) != fmt.Sprint(e.Extensions()) {
		tb.Errorf("event %s changed through binary mode:\n got %v\nwant %v", e.ID(), got, e)
	}
}

// loadSchemas fetches the schemas the worker serves and compiles them.
func loadSchemas(tb testing.TB, base string) map[string]*jsonschema.Schema {
	tb.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	out := map[string]*jsonschema.Schema{}
	for _, name := range []string{substate.EventSchema, substate.ChangeSchema} {
		url := base + substate.SchemaPath + name
		resp, err := http.Get(url)
		if err != nil {
			tb.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/schema+json" {
			tb.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if err := c.AddResource(url, jsonAny(tb, b)); err != nil {
			tb.Fatal(err)
		}
		s, err := c.Compile(url)
		if err != nil {
			tb.Fatalf("compile %s: %v", name, err)
		}
		out[name] = s
	}
	return out
}

func jsonAny(tb testing.TB, b []byte) any {
	tb.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// engineStory is a sequence of engine events that makes every kind of
// change: sub-state, step, error, retry and execution.
func engineStory() []substate.EngineEvent {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	ev := func(tenant, exec string, seq uint64, status, state string, retries int, msg string) substate.EngineEvent {
		started := t0
		if exec == "x2" {
			started = t0.Add(time.Hour)
		}
		return substate.EngineEvent{ID: substate.EngineEventID(tenant+"/"+exec, seq), TenantID: tenant, ExecutionID: exec, Workflow: "provision",
			Seq: seq, Status: status, State: state, Attempt: 1, RetryCount: retries, Error: msg,
			StartedAt: started, Time: started.Add(time.Duration(seq) * time.Second)}
	}
	return []substate.EngineEvent{
		ev("ce-engine", "x1", 1, substate.EngineRunning, "create", 0, ""),
		ev("ce-engine", "x1", 2, substate.EngineRunning, "configure", 0, ""),          // step
		ev("ce-engine", "x1", 3, substate.EngineError, "configure", 0, "quota"),       // sub-state
		ev("ce-engine", "x1", 4, substate.EngineError, "configure", 0, "quota again"), // error
		ev("ce-engine", "x1", 5, substate.EngineBackingOff, "configure", 1, "quota"),  // sub-state
		ev("ce-engine", "x1", 6, substate.EngineBackingOff, "configure", 2, "quota"),  // retry
		ev("ce-engine", "x1", 7, substate.EngineWaiting, "settle", 2, ""),             // sub-state
		ev("ce-engine", "x1", 8, substate.EngineSucceeded, "done", 2, ""),             // sub-state
		ev("ce-engine-2", "x1", 1, substate.EngineRunning, "create", 0, ""),
		ev("ce-engine-2", "x2", 1, substate.EngineRunning, "create", 0, ""), // execution
	}
}

// publishEngineCE publishes an engine event on substate.raw.engine.status
// as a CloudEvent the SDK wrote: in binary mode (ce-* headers, the event
// as the body; without its id and time, which the headers carry) or in
// structured mode.
func publishEngineCE(tb testing.TB, w *workertest.Worker, ev substate.EngineEvent, binary bool) {
	tb.Helper()
	e := cloudevents.NewEvent()
	e.SetID(ev.ID)
	e.SetSource("/engine/test")
	e.SetType("io.substate.engine.status.v1")
	e.SetSubject(ev.TenantID)
	e.SetTime(ev.Time)
	if ev.TenantID == "ce-engine" {
		e.SetExtension("traceparent", engineTrace)
	}
	data := ev
	if binary {
		data.ID, data.Time = "", time.Time{}
	}
	if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil {
		tb.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://substate.invalid/", nil)
	ctx := binding.WithForceStructured(context.Background())
	if binary {
		ctx = binding.WithForceBinary(context.Background())
	}
	if err := cehttp.WriteRequest(ctx, binding.ToMessage(&e), req); err != nil {
		tb.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	m := nats.NewMsg(substate.RawSubject(substate.RawEngine))
	m.Data = body
	for k, vs := range req.Header {
		m.Header[strings.ToLower(k)] = slices.Clone(vs)
	}
	m.Header.Set(substate.HeaderMsgID, ev.ID)
	if _, err := w.Bus.JetStream.PublishMsg(context.Background(), m); err != nil {
		tb.Fatal(err)
	}
}
