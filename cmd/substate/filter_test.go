package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// TestParseFilter holds --filter to the rule docs/actions.md states:
// name=value pairs split at commas, a comma kept inside a fingerprint,
// step, workflowType or reason unless a known field follows it, no field
// twice and none empty.
func TestParseFilter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   map[string]string
		err    string // a part of the error; "" for none
	}{
		{"Nothing", nil, map[string]string{}, ""},
		{"EmptyFlag", []string{""}, map[string]string{}, ""},
		{"One", []string{"subState=failed"}, map[string]string{"subState": "failed"}, ""},
		{"Several", []string{"subState=failed,provider=engine,minRetryCount=2"},
			map[string]string{"subState": "failed", "provider": "engine", "minRetryCount": "2"}, ""},
		{"SeveralFlags", []string{"subState=failed", "provider=restate"}, map[string]string{"subState": "failed", "provider": "restate"}, ""},
		{"TrailingComma", []string{"subState=failed,"}, map[string]string{"subState": "failed"}, ""},
		{"DoubleComma", []string{"subState=failed,,provider=engine"}, map[string]string{"subState": "failed", "provider": "engine"}, ""},
		{"LeadingComma", []string{",subState=failed"}, map[string]string{"subState": "failed"}, ""},
		{"FingerprintWithCommas", []string{"fingerprint=engine/x/boom, at <n>, again,subState=failed"},
			map[string]string{"fingerprint": "engine/x/boom, at <n>, again", "subState": "failed"}, ""},
		{"FingerprintWithEquals", []string{"fingerprint=stepfunctions/T/key=<n> a=b"},
			map[string]string{"fingerprint": "stepfunctions/T/key=<n> a=b"}, ""},
		{"FingerprintWithUnknownPair", []string{"fingerprint=restate/500/x,color=red,provider=restate"},
			map[string]string{"fingerprint": "restate/500/x,color=red", "provider": "restate"}, ""},
		{"FingerprintEndsWithComma", []string{"fingerprint=engine/x/y,"}, map[string]string{"fingerprint": "engine/x/y,"}, ""},
		{"StepWithComma", []string{"step=Charge, then ship,workflowType=billing, v2"},
			map[string]string{"step": "Charge, then ship", "workflowType": "billing, v2"}, ""},
		{"ReasonWithComma", []string{"stage=project,reason=decode, bad input"},
			map[string]string{"stage": "project", "reason": "decode, bad input"}, ""},
		{"UnknownKeyPassesToTheServer", []string{"color=red"}, map[string]string{"color": "red"}, ""},
		{"ValueWithEquals", []string{"tenantPrefix=a=b"}, map[string]string{"tenantPrefix": "a=b"}, ""},
		{"NoEquals", []string{"failed"}, nil, "want name=value pairs"},
		{"NoName", []string{"=failed"}, nil, "want name=value pairs"},
		{"NameNotALetter", []string{"1st=failed"}, nil, "want name=value pairs"},
		{"SpaceBeforeName", []string{" subState=failed"}, nil, "want name=value pairs"},
		{"CommaInAPlainValue", []string{"subState=failed,running"}, nil, `"running" after subState=failed is not name=value`},
		{"SpaceAfterComma", []string{"subState=failed, provider=engine"}, nil, `" provider=engine" after subState=failed`},
		{"BareWordInSecondFlag", []string{"fingerprint=a", "b"}, nil, "want name=value pairs"},
		{"Duplicate", []string{"subState=failed,subState=error"}, nil, "subState given twice"},
		{"DuplicateAcrossFlags", []string{"provider=engine", "provider=restate"}, nil, "provider given twice"},
		{"DuplicateAfterFreeText", []string{"fingerprint=a,fingerprint=b"}, nil, "fingerprint given twice"},
		{"EmptyValue", []string{"subState="}, nil, "subState= has no value"},
		{"EmptyFingerprint", []string{"subState=failed,fingerprint="}, nil, "fingerprint= has no value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFilter(tc.values)
			switch {
			case tc.err != "":
				if substate.ErrorCode(err) != substate.EINVALID || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%q: got %v, %v; want EINVALID with %q", tc.values, got, err, tc.err)
				}
			case err != nil:
				t.Fatalf("%q: %v", tc.values, err)
			case !maps.Equal(got, tc.want):
				t.Fatalf("%q: got %q, want %q", tc.values, got, tc.want)
			}
		})
	}
}

// FuzzParseFilter: whatever the flags, ParseFilter answers a filter with
// no empty value or an EINVALID error; and a filter of known fields, as
// the CLI and logs print it (httpapi.EncodeJobFilter), parses back to
// itself.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"subState=failed,fingerprint=engine/x/boom, at <n>", "fingerprint=a=b,,provider=engine,", "step=S, T,workflowType=w",
		"reason=x,stage=project,since=1h", "=", ",", "a=,b=1", "fingerprint=a,color=red", "subState=failed,running"} {
		f.Add(s, "")
	}
	f.Add("fingerprint=a", "provider=engine")
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := ParseFilter([]string{a, b})
		if err != nil {
			if substate.ErrorCode(err) != substate.EINVALID {
				t.Fatalf("%q %q: %v, want EINVALID", a, b, err)
			}
			return
		}
		for k, v := range got {
			if v == "" {
				t.Fatalf("%q %q: %s is empty", a, b, k)
			}
		}
		if slices.ContainsFunc(slices.Collect(maps.Keys(got)), func(k string) bool { return !slices.Contains(fleetFields, k) }) {
			return // an unknown field: the server names it
		}
		back, err := ParseFilter([]string{httpapi.EncodeJobFilter(got)})
		if err != nil || !maps.Equal(back, got) {
			t.Fatalf("%q %q: %q printed as %q parses back as %q, %v", a, b, got, httpapi.EncodeJobFilter(got), back, err)
		}
	})
}
