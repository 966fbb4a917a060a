package httpapi_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
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
