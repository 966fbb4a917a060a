package redact_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/substatehq/substate/internal/fixtures"
	"github.com/substatehq/substate/redact"
)

// canon re-encodes JSON with sorted keys, to compare documents.
func canon(tb testing.TB, s string) string {
	tb.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("not JSON: %v\n%s", err, s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func policy(tb testing.TB, allow, always []string) *redact.Policy {
	tb.Helper()
	p, err := redact.New(allow, always)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

const secrets = `{"tenantId":"acme","dbPassword":"hunter2","stripeKey":"sk_live_1","order":{"id":"ord-1","items":[{"sku":"A","qty":2}],"card":{"number":"4111","cvv":"123"},"apiToken":"t0k"},"customer":{"name":"Ada","email":"ada@example.com"},"note":null,"count":3}`

func TestValue(t *testing.T) {
	for _, tc := range []struct {
		name          string
		allow, always []string
		doc, want     string
	}{
		{"NothingAllowed", nil, nil, secrets, redact.Redacted},
		{"TenantAlways", nil, []string{"$.tenantId"},
			secrets, `{"tenantId":"acme","dbPassword":"[redacted]","stripeKey":"[redacted]","order":"[redacted]","customer":"[redacted]","note":"[redacted]","count":"[redacted]"}`},
		{"AllowedLeaves", []string{"$.order.id", "$.count"}, []string{"$.tenantId"},
			secrets, `{"tenantId":"acme","dbPassword":"[redacted]","stripeKey":"[redacted]","order":{"id":"ord-1","items":"[redacted]","card":"[redacted]","apiToken":"[redacted]"},"customer":"[redacted]","note":"[redacted]","count":3}`},
		{"AllowedSubtreeKeepsSecretsHidden", []string{"$.order"}, nil,
			secrets, `{"tenantId":"[redacted]","dbPassword":"[redacted]","stripeKey":"[redacted]","order":{"id":"ord-1","items":[{"sku":"A","qty":2}],"card":{"number":"4111","cvv":"[redacted]"},"apiToken":"[redacted]"},"customer":"[redacted]","note":"[redacted]","count":"[redacted]"}`},
		{"WholeDocument", []string{"$"}, nil,
			`{"a":1,"password":"x","nested":{"secret":{"deep":1},"ok":[1,{"token":"y"}]}}`,
			`{"a":1,"password":"[redacted]","nested":{"secret":"[redacted]","ok":[1,{"token":"[redacted]"}]}}`},
		{"Wildcard", []string{"$.items[*].sku"}, nil,
			`{"items":[{"sku":"A","price":1},{"sku":"B","price":2}],"other":1}`,
			`{"items":[{"sku":"A","price":"[redacted]"},{"sku":"B","price":"[redacted]"}],"other":"[redacted]"}`},
		{"Filter", []string{"$.items[?@.public]"}, nil,
			`{"items":[{"public":true,"v":1},{"v":2}]}`,
			`{"items":[{"public":true,"v":1},"[redacted]"]}`},
		{"AlwaysUnderASecretName", nil, []string{"$.auth.tenant"},
			`{"auth":{"tenant":"acme","token":"t"}}`, `{"auth":{"tenant":"acme","token":"[redacted]"}}`},
		{"AlwaysASecretName", nil, []string{"$.tenantKey"},
			`{"tenantKey":"acme","key":"k"}`, `{"tenantKey":"acme","key":"[redacted]"}`},
		{"Scalar", []string{"$"}, nil, `42`, `42`},
		{"ScalarHidden", nil, nil, `"a secret"`, redact.Redacted},
		{"NoMatch", []string{"$.nothing"}, nil, `{"a":{"b":1}}`, redact.Redacted},
		{"BigNumberKept", []string{"$.n"}, nil, `{"n":12345678901234567890123}`, `{"n":12345678901234567890123}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := policy(t, tc.allow, tc.always).JSONText(tc.doc)
			if got == redact.Redacted || tc.want == redact.Redacted {
				if got != tc.want {
					t.Fatalf("got  %s\nwant %s", got, tc.want)
				}
				return
			}
			if canon(t, got) != canon(t, tc.want) {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	t.Run("NotJSON", func(t *testing.T) {
		for _, s := range []string{"", "{", "plain text with a password", `{"a":1} {"b":2}`} {
			if got := policy(t, []string{"$"}, nil).JSONText(s); got != redact.Redacted {
				t.Errorf("%q → %q", s, got)
			}
		}
	})
	t.Run("ErrBadPath", func(t *testing.T) {
		if _, err := redact.New([]string{"$.["}, nil); err == nil {
			t.Fatal("a bad path was accepted")
		}
	})
}

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "dbPassword": true, "DB_PASSWORD": true, "passwd": true, "secret": true, "clientSecret": true,
		"token": true, "accessToken": true, "refresh_token": true, "key": true, "apiKey": true, "APIKey": true,
		"x-api-key": true, "stripeKey": true, "privateKey": true, "credentials": true, "Authorization": true,
		"auth": true, "sessionId": true, "Cookie": true, "pin": true, "cvv": true, "webhookSignature": true,
		"tenantId": false, "orderId": false, "monkey": false, "keyboard": false, "turkey": false, "amountCents": false,
		"customer": false, "email": false, "items": false, "passenger": false, "author": false, "": false,
	} {
		if got := redact.SecretName(name); got != want {
			t.Errorf("SecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestPayload(t *testing.T) {
	p := policy(t, []string{"$.orderId"}, []string{"$.tenantId"})
	t.Run("EventBridge", func(t *testing.T) {
		body := fixtures.Provider("sfn-status-failed.json")
		got := p.Payload(body)
		var in, out struct {
			Detail map[string]any `json:"detail"`
			ID     string         `json:"id"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &out); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, got)
		}
		if out.ID != in.ID || out.Detail["executionArn"] != in.Detail["executionArn"] || out.Detail["cause"] != in.Detail["cause"] {
			t.Errorf("the envelope changed:\n%s", got)
		}
		if want := `{"amountCents":"[redacted]","currency":"[redacted]","customerId":"[redacted]","orderId":"ord-2024-000124"}`; out.Detail["input"] != want {
			t.Errorf("input %v, want %s", out.Detail["input"], want)
		}
		if out.Detail["output"] != nil {
			t.Errorf("a null output became %v", out.Detail["output"])
		}
		if i, j := bytes.Index(got, []byte(`"version"`)), bytes.Index(got, []byte(`"detail"`)); i < 0 || j < i {
			t.Errorf("member order changed:\n%s", got)
		}
	})
	for _, tc := range []struct{ name, body, want string }{
		{"StepFunctionsPoll",
			`{"execution":{"executionArn":"arn:x","input":"{\"tenantId\":\"acme\",\"password\":\"p\"}","output":"{\"token\":\"t\",\"orderId\":\"o\"}","status":"SUCCEEDED"},"history":{"events":[{"type":"TaskScheduled","taskScheduledEventDetails":{"parameters":"{\"card\":\"4111\"}"}}]}}`,
			`{"execution":{"executionArn":"arn:x","input":"{\"password\":\"[redacted]\",\"tenantId\":\"acme\"}","output":"{\"orderId\":\"o\",\"token\":\"[redacted]\"}","status":"SUCCEEDED"},"history":{"events":[{"type":"TaskScheduled","taskScheduledEventDetails":{"parameters":"[redacted]"}}]}}`},
		{"RestateRows",
			`{"rows":[{"id":"inv_1","target_service_key":"acme","idempotency_key":"k1","input":{"tenantId":"acme","secret":"s"},"status":"completed"}]}`,
			`{"rows":[{"id":"inv_1","target_service_key":"acme","idempotency_key":"k1","input":{"secret":"[redacted]","tenantId":"acme"},"status":"completed"}]}`},
		{"EngineEvent",
			`{"id":"x/1","tenantId":"acme","status":"succeeded","output":{"orderId":"o","charge":{"token":"t","amount":5}}}`,
			`{"id":"x/1","tenantId":"acme","status":"succeeded","output":{"charge":"[redacted]","orderId":"o"}}`},
		{"EventArray", `[{"detail":{"input":"{\"a\":1}"}},{"detail":{"Output":"not json"}}]`,
			`[{"detail":{"input":"[redacted]"}},{"detail":{"Output":"[redacted]"}}]`},
		{"NoPayloadMembers", `{"a":{"b":[1,2,{"c":"password"}]}}`, `{"a":{"b":[1,2,{"c":"password"}]}}`},
		{"NotJSON", `{"id": "x",`, `"[redacted]"`},
		{"TwoValues", `{"a":1} {"input":"x"}`, `"[redacted]"`},
		{"Empty", ``, `"[redacted]"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(p.Payload([]byte(tc.body))); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
