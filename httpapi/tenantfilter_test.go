package httpapi_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

func TestParseTenantFilter(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  substate.TenantFilter
		err   string // a part of the error message; "" for none
	}{
		{query: "", want: substate.TenantFilter{}},
		{query: "sort=updatedAt:desc&provider=Restate&tenantPrefix=acme-",
			want: substate.TenantFilter{SortUpdatedDesc: true, Provider: substate.ProviderRestate, TenantPrefix: "acme-"}},
		{query: "sort=retryCount:desc&subState=error&hasError=true&minRetryCount=2&limit=5&pageToken=x",
			want: substate.TenantFilter{SortRetryDesc: true, SubState: substate.StateError, HasError: true, MinRetryCount: 2, Limit: 5, PageToken: "x"}},
		{query: "sort=updatedAt:asc", want: substate.TenantFilter{SortUpdatedDesc: true, Reverse: true}},
		{query: "sort=retryCount:asc&minRetryCount=1", want: substate.TenantFilter{SortRetryDesc: true, Reverse: true, MinRetryCount: 1}},
		{query: "sort=tenantId:desc&subState=failed", want: substate.TenantFilter{Reverse: true, SubState: substate.StateFailed}},
		{query: "sort=tenantId:asc", err: "want one of tenantId:desc, retryCount:desc, retryCount:asc, updatedAt:desc, updatedAt:asc"},
		{query: "sort=updatedAt", err: "want one of"},
		{query: "provider=temporal", err: "unknown provider"},
		{query: "tenantPrefix=" + strings.Repeat("a", substate.MaxTenantIDBytes+1), err: "tenantPrefix"},
		{query: "fingerprint=engine/x/y&verb=cancelled&inStateLongerThan=1h30m",
			want: substate.TenantFilter{Fingerprint: "engine/x/y", Verb: substate.VerbCancelled, InStateLongerThan: 90 * time.Minute}},
		{query: "step=Charge%20card&workflowType=billing&subState=failed",
			want: substate.TenantFilter{Step: "Charge card", WorkflowType: "billing", SubState: substate.StateFailed}},
		{query: "step=" + strings.Repeat("s", 257), err: "step: longer than 256 bytes"},
		{query: "workflowType=" + strings.Repeat("w", 257), err: "workflowType: longer than 256 bytes"},
		{query: "step=a&step=b", err: "step given 2 times"},
		{query: "substate=failed", err: `unknown query parameter "substate"; the valid ones are subState, hasError`},
		{query: "has_error=true", err: `unknown query parameter "has_error"`},
		{query: "limit=1&limit=2", err: "limit given 2 times"},
		{query: "verb=paused", err: "unknown verb"},
		{query: "inStateLongerThan=-1s", err: "want a duration"},
		{query: "inStateLongerThan=10", err: "want a duration"},
		{query: "stuck=true&subState=backing-off", want: substate.TenantFilter{Stuck: true, SubState: substate.StateBackingOff}},
		{query: "stuck=false", want: substate.TenantFilter{}},
		{query: "stuck=yes", err: "stuck \"yes\": want true or false"},
		{query: "stuck=true&stuck=true", err: "stuck given 2 times"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			got, err := httpapi.ParseTenantFilter(q)
			switch {
			case tc.err != "":
				if err == nil || substate.ErrorCode(err) != substate.EINVALID || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want EINVALID with %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case got != tc.want:
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestEncodeTenantFilter: a filter the client encodes parses back equal.
func TestEncodeTenantFilter(t *testing.T) {
	for _, f := range []substate.TenantFilter{
		{},
		{SubState: substate.StateWaiting, HasError: true, MinRetryCount: 3, SortRetryDesc: true, Limit: 1000, PageToken: "tok"},
		{SortUpdatedDesc: true, Provider: substate.ProviderStepFunctions, TenantPrefix: "acme/ä&=?"},
		{Fingerprint: "stepfunctions/states.timeout/task timed out after <n> seconds", Verb: substate.VerbFailed, InStateLongerThan: time.Second},
		{Stuck: true, Provider: substate.ProviderRestate},
		{Step: "Charge, card=1", WorkflowType: "billing/v2 &x"},
		{Reverse: true, Stuck: true},
		{SortRetryDesc: true, Reverse: true, PageToken: "tok"},
		{SortUpdatedDesc: true, Reverse: true, Fingerprint: "engine/x/y"},
	} {
		got, err := httpapi.ParseTenantFilter(httpapi.EncodeTenantFilter(f))
		if err != nil || got != f {
			t.Errorf("%+v parsed back as %+v, %v", f, got, err)
		}
	}
}
