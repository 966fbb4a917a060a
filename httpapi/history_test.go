package httpapi_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/redact"
)

func TestParseHistoryQuery(t *testing.T) {
	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	t.Run("OK", func(t *testing.T) {
		q, err := httpapi.ParseHistoryQuery(url.Values{
			"since": {"24h"}, "until": {"2025-03-04T11:00:00Z"}, "raw": {"true"}, "limit": {"50"}, "afterSeq": {"7"},
		}, now)
		if err != nil {
			t.Fatal(err)
		}
		want := substate.HistoryQuery{Since: now.Add(-24 * time.Hour), Until: now.Add(-time.Hour), Raw: true, Limit: 50, AfterSeq: 7}
		if q != want {
			t.Fatalf("got %+v, want %+v", q, want)
		}
	})
	t.Run("Defaults", func(t *testing.T) {
		q, err := httpapi.ParseHistoryQuery(url.Values{"since": {"2025-03-01"}}, now)
		if err != nil {
			t.Fatal(err)
		}
		if q.Limit != httpapi.DefaultHistoryLimit || !q.Since.Equal(time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)) || !q.Until.IsZero() {
			t.Fatalf("got %+v", q)
		}
		q, _ = httpapi.ParseHistoryQuery(url.Values{"limit": {"999999"}}, now)
		if q.Limit != httpapi.MaxHistoryLimit {
			t.Fatalf("limit %d, want the maximum", q.Limit)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, v := range []url.Values{
			{"since": {"last tuesday"}}, {"until": {"soon"}}, {"raw": {"maybe"}}, {"limit": {"-1"}}, {"afterSeq": {"x"}},
		} {
			if _, err := httpapi.ParseHistoryQuery(v, now); substate.ErrorCode(err) != substate.EINVALID {
				t.Errorf("%v: %v, want EINVALID", v, err)
			}
		}
	})
}

// storyReader answers every history query with one transition whose raw
// evidence carries secrets in its input and output.
type storyReader struct{}

const secretEvidence = `{"detail":{"status":"SUCCEEDED","input":"{\"tenantId\":\"acme-1\",\"dbPassword\":\"hunter2\"}","output":"{\"stripeKey\":\"sk_live_1\",\"token\":\"t0k\"}"}}`

func (storyReader) History(_ context.Context, q substate.HistoryQuery) (substate.HistoryPage, error) {
	tr := substate.Transition{Seq: 1}
	if q.Raw {
		tr.Raw = &substate.Evidence{Seq: 7, Body: json.RawMessage(secretEvidence)}
	}
	return substate.HistoryPage{TenantID: q.TenantID, Transitions: []substate.Transition{tr}}, nil
}

func TestHistoryRedaction(t *testing.T) {
	policy, err := redact.New(nil, []string{"$.tenantId"})
	if err != nil {
		t.Fatal(err)
	}
	keys := keyFile(t,
		keyLine("ops", "admin", "*", "key-ops"),
		keyLine("dash", "read", "*", "key-dash"),
		keyLine("portal", "read:raw", "acme-", "key-portal"))
	a, err := httpapi.NewAuthorizer("0.0.0.0:0", keys)
	if err != nil {
		t.Fatal(err)
	}
	s := &httpapi.Server{Addr: "127.0.0.1:0", History: storyReader{}, Redaction: policy, Auth: a}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := func(path, key string) (int, string) {
		var page substate.HistoryPage
		status, code := getAs(t, s.URL()+path, key, &page)
		if status != 200 {
			return status, code
		}
		return status, string(page.Transitions[0].Raw.Body)
	}
	redacted := `{"detail":{"status":"SUCCEEDED","input":"{\"dbPassword\":\"[redacted]\",\"tenantId\":\"acme-1\"}","output":"[redacted]"}}`
	for _, tc := range []struct {
		name, path, key string
		status          int
		want            string
	}{
		{"Admin", "/v1/tenants/acme-1/history?raw=true", "key-ops", 200, secretEvidence},
		{"ReadRaw", "/v1/tenants/acme-1/history?raw=true", "key-portal", 200, redacted},
		{"ReadRawOutsidePrefix", "/v1/tenants/beta/history?raw=true", "key-portal", 403, substate.EFORBIDDEN},
		{"ReadAsksRaw", "/v1/tenants/acme-1/history?raw=true", "key-dash", 403, substate.EFORBIDDEN},
		{"NoKey", "/v1/tenants/acme-1/history?raw=true", "", 401, substate.EUNAUTHORIZED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, got := body(tc.path, tc.key)
			if status != tc.status || got != tc.want {
				t.Fatalf("%d %s\nwant %d %s", status, got, tc.status, tc.want)
			}
		})
	}
	t.Run("ServerWithoutKeys", func(t *testing.T) {
		open := &httpapi.Server{Addr: "127.0.0.1:0", History: storyReader{}} // and no policy
		if err := open.Open(); err != nil {
			t.Fatal(err)
		}
		defer open.Close()
		var page substate.HistoryPage
		status, _ := getAs(t, open.URL()+"/v1/tenants/acme-1/history?raw=true", "", &page)
		want := `{"detail":{"status":"SUCCEEDED","input":"[redacted]","output":"[redacted]"}}`
		if status != 200 || string(page.Transitions[0].Raw.Body) != want {
			t.Fatalf("%d %+v\nwant 200 %s", status, page, want)
		}
	})
	t.Run("ReadWithoutRaw", func(t *testing.T) {
		var page substate.HistoryPage
		if status, _ := getAs(t, s.URL()+"/v1/tenants/acme-1/history", "key-dash", &page); status != 200 || page.Transitions[0].Raw != nil {
			t.Fatalf("%d %+v", status, page)
		}
	})
}
