package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/workertest"
)

// hostile is a tenant id and an error message that try to take over the
// terminal: clear the screen, retitle the window with OSC … BEL, a link
// (OSC 8), color, a carriage return that overwrites the line, a
// right-to-left override, DEL and a C1 CSI (which encoding/json leaves
// as they are).
const (
	hostileTenant = "evil\x1b[2J\x1b]0;pwned\x07\rOK"
	hostileError  = "boom\x1b[31m red\x1b]8;;http://x\x07link\x1b]8;;\x07\rfake \u202eeulav \x7f\u009b2J"
)

// controls finds what a terminal would act on: C0 controls but line feed,
// DEL, C1 controls, bidirectional controls.
var controls = regexp.MustCompile("[\x00-\x09\x0b-\x1f\x7f\u0080-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")

// TestTerminalOutputEscaped runs every command that prints provider text
// on a tenant and an error built to take over a terminal: what they print
// holds no control character and says what was there, escaped.
func TestTerminalOutputEscaped(t *testing.T) {
	w := startWorkerProcess(t, t.TempDir())
	// Mapping refuses a tenant id with control characters, so one reaches
	// the events stream only published there directly, by whoever holds
	// publish rights: the projector dead-letters it, the commands that
	// read the stream show it.
	forged := substate.EventData{TenantID: hostileTenant, Provider: substate.ProviderEngine, ExecutionID: "run\x1b[8m",
		SubState: substate.StateError, ErrorMessage: hostileError, Revision: 1,
		OccurredAt: time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC), ExecutionStartedAt: time.Date(2024, 6, 19, 10, 0, 0, 0, time.UTC)}
	forged.Normalize()
	if err := publishers.NewJetStream(w.bus(t).JetStream).PublishEvents(context.Background(), []substate.Event{substate.NewEvent("forged-1", forged)}); err != nil {
		t.Fatal(err)
	}
	natsArgs := []string{"--nats-url", w.nats, "--nats-nkey", w.nkey}
	dlqHolds := func(n int) func() string {
		return func() string {
			if code, out, errOut := runCLI(t, append([]string{"events", "dlq"}, natsArgs...)...); code != 0 || strings.Count(out, "\n") != n {
				return fmt.Sprintf("events dlq: %d %s %s", code, out, errOut)
			}
			return ""
		}
	}
	workertest.Eventually(t, dlqHolds(1)) // the stream's order is the golden file's
	example := workertest.Example(t, "stepfunctions-failed.json")
	var ev map[string]any
	if err := json.Unmarshal(example, &ev); err != nil {
		t.Fatal(err)
	}
	d := ev["detail"].(map[string]any)
	in, _ := json.Marshal(map[string]string{"tenantId": "acme"})
	d["input"] = string(in)
	cause, _ := json.Marshal(map[string]string{"errorMessage": hostileError, "errorType": "Evil\x1b[5m"})
	d["cause"] = string(cause)
	body, _ := json.Marshal(ev)
	if code := workertest.Post(t, w.httpURL+"/v1/ingest/eventbridge", body, nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	// A dead letter whose reason names an execution with controls in it.
	ev["id"], d["input"] = "no-tenant", `{}`
	d["executionArn"] = "arn:aws:states:us-east-1:123456789012:execution:orders:\x1b]0;dlq\x07\r"
	body, _ = json.Marshal(ev)
	if code := workertest.Post(t, w.httpURL+"/v1/ingest/eventbridge", body, nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	workertest.Eventually(t, dlqHolds(2))
	workertest.Eventually(t, func() string {
		if code, out, errOut := runCLI(t, "tenants", "get", "acme", "--server", w.httpURL); code != 0 {
			return fmt.Sprintf("tenants get: %d %s %s", code, out, errOut)
		}
		return ""
	})

	commands := [][]string{
		{"tenants", "list", "--server", w.httpURL},
		{"tenants", "get", "acme", "--server", w.httpURL},
		{"tenants", "get", "acme", "--server", w.httpURL, "--json"},
		append([]string{"events", "tail", "--from-start", "--count", "2"}, natsArgs...),
		append([]string{"events", "tail", "--from-start", "--count", "2", "--json"}, natsArgs...),
		append([]string{"audit", "--tenant", hostileTenant, "--raw"}, natsArgs...),
		append([]string{"audit", "--tenant", hostileTenant, "--json"}, natsArgs...),
		append([]string{"events", "dlq"}, natsArgs...),
		append([]string{"events", "dlq", "--json"}, natsArgs...),
	}
	var all strings.Builder
	for _, args := range commands {
		code, out, errOut := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", args[:2], code, errOut)
		}
		if loc := controls.FindStringIndex(out + errOut); loc != nil {
			t.Errorf("%s prints a control character at %d:\n%q", args[:2], loc[0], out+errOut)
		}
		if !strings.Contains(out, `\x1b`) && !strings.Contains(out, `\u001b`) {
			t.Errorf("%s does not show the escape it found:\n%s", args[:2], out)
		}
		if slices.Contains(args, "--json") {
			for dec := json.NewDecoder(strings.NewReader(out)); dec.More(); {
				var v any
				if err := dec.Decode(&v); err != nil {
					t.Errorf("%s --json prints what is not JSON: %v\n%s", args[:2], err, out)
					break
				}
			}
		}
		fmt.Fprintf(&all, "$ substate %s\n%s", strings.Join(args[:2], " "), normalizeVolatile(out))
	}
	golden(t, "terminal.txt", all.String())
}

// normalizeVolatile replaces what changes from run to run: ages, stored
// times, ports and sequence-dependent ids.
func normalizeVolatile(s string) string {
	for _, r := range []struct{ re, with string }{
		{`\d+(\.\d+)?(ms|s|m)( ago)`, "AGE$3"},
		{`"(time|storedAt|updatedAt)": ?"[^"]+"`, `"$1":"TIME"`},
		{`"Substate-Received-At":\["[^"]+"\]`, `"Substate-Received-At":["TIME"]`},
		{`\b20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z  `, "TIME  "},
		{`http://127\.0\.0\.1:\d+/`, "http://WORKER/"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	return s
}

// TestErrorOutputEscaped: an error answer whose message carries controls
// (from a worker, or whatever answers at --server) is printed escaped.
func TestErrorOutputEscaped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		msg, _ := json.Marshal(map[string]any{"error": map[string]string{"code": "not_found", "message": "tenant " + hostileTenant + " " + hostileError}})
		w.Write(msg)
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, "tenants", "get", "x", "--server", srv.URL)
	if code != 1 || controls.MatchString(out+errOut) {
		t.Fatalf("exit %d, output %q", code, out+errOut)
	}
	golden(t, "terminal-error.txt", errOut)
}
