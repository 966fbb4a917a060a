package substate

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
)

// oracleEvent is the decode decodeEvent replaces: json.Unmarshal into an
// Event, by reflection.
func oracleEvent(b []byte) (Event, error) {
	var e Event
	err := json.Unmarshal(b, &e)
	return e, err
}

// sameEvent tells whether two decoded events hold the same fields: times
// as the same instant in the same zone, the rest equal.
func sameEvent(a, b Event) bool {
	times := func(e *Event) []*time.Time {
		return []*time.Time{&e.Time.Time, &e.Data.NextRetryAt, &e.Data.OccurredAt, &e.Data.ExecutionStartedAt}
	}
	ta, tb := times(&a), times(&b)
	for i := range ta {
		_, oa := ta[i].Zone()
		_, ob := tb[i].Zone()
		if !ta[i].Equal(*tb[i]) || oa != ob || ta[i].Location().String() != tb[i].Location().String() {
			return false
		}
		*ta[i], *tb[i] = time.Time{}, time.Time{}
	}
	return reflect.DeepEqual(a, b)
}

// decodeSeeds are events as the normalizer writes them, and the inputs
// where a hand decoder parts most easily from json.Unmarshal.
func decodeSeeds(t testing.TB) []string {
	t.Helper()
	var seeds []string
	for i, s := range SubStates {
		d := EventData{
			TenantID: fmt.Sprintf("tenant-%d", i), Provider: knownProvidersFor(i), ExecutionID: fmt.Sprintf("exec-%d", i),
			Workflow: "provision", SubState: s, RetryCount: i, RetryCountKnown: i%2 == 0,
			ErrorMessage: "quota \"exceeded\" in eu-west-1 \u00e9\n", ErrorType: "States.TaskFailed",
			ErrorFingerprint: "stepfunctions/States.TaskFailed/quota <*>", ProviderState: "FAILED", Step: "Create",
			OccurredAt: time.Date(2026, 1, 1, 0, 0, i, 123456789, time.UTC), ExecutionStartedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			Revision: Revision(uint64(i) << 32), MappingVersion: i,
		}
		if s == StateBackingOff {
			d.NextRetryAt = time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
		}
		d.Normalize()
		e := NewEvent(fmt.Sprintf("%032x", i), d)
		e.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		b, err := MarshalEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	base := seeds[0]
	seeds = append(seeds,
		strings.Replace(base, `"tenantId"`, `"tenant\u0049d"`, 1),
		strings.Replace(base, `"tenantId"`, `"TenantId"`, 1),
		strings.Replace(base, `"verb":"executing"`, `"verb":"executing","verb":"x"`, 1),
		strings.Replace(base, `"subState":"running"`, `"subState":"RUNNING"`, 1),
		strings.Replace(base, `"subState":"running"`, `"subState":"paused"`, 1),
		strings.Replace(base, `"subState":"running"`, `"subState":null`, 1),
		strings.Replace(base, `"retryCount":0`, `"retryCount":-9223372036854775808`, 1),
		strings.Replace(base, `"retryCount":0`, `"retryCount":9223372036854775808`, 1),
		strings.Replace(base, `"retryCount":0`, `"retryCount":1.0`, 1),
		strings.Replace(base, `"retryCount":0`, `"retryCount":"1"`, 1),
		strings.Replace(base, `"retryCount":0`, `"retryCount":-0`, 1),
		strings.Replace(base, `"revision":0`, `"revision":18446744073709551615`, 1),
		strings.Replace(base, `"revision":0`, `"revision":18446744073709551616`, 1),
		strings.Replace(base, `"revision":0`, `"revision":-1`, 1),
		strings.Replace(base, `"terminal":false`, `"terminal":null`, 1),
		strings.Replace(base, `"terminal":false`, `"terminal":0`, 1),
		strings.Replace(base, `"errorMessage":"`, `"errorMessage":null,"x":"`, 1),
		strings.Replace(base, `"errorType":"States.TaskFailed"`, `"errorType":7`, 1),
		strings.Replace(base, `"occurredAt":"2026-01-01T00:00:00.123456789Z"`, `"occurredAt":"2026-01-01T00:00:00+01:00"`, 1),
		strings.Replace(base, `"occurredAt":"2026-01-01T00:00:00.123456789Z"`, `"occurredAt":"2026-01-01T00:00:00,5Z"`, 1),
		strings.Replace(base, `"occurredAt":"2026-01-01T00:00:00.123456789Z"`, `"occurredAt":"2026-01-01T24:00:00Z"`, 1),
		strings.Replace(base, `"occurredAt":"2026-01-01T00:00:00.123456789Z"`, `"occurredAt":"2026-01-01T00:00:00+24:00"`, 1),
		strings.Replace(base, `"occurredAt":"2026-01-01T00:00:00.123456789Z"`, `"occurredAt":null`, 1),
		strings.Replace(base, `"occurredAt":"2026-01-01T00:00:00.123456789Z"`, `"occurredAt":0`, 1),
		strings.Replace(base, `"time":"2026-01-01T00:00:00.123Z"`, `"time":"2026-01-01T00:00:00.5+05:30"`, 1),
		strings.Replace(base, `"time":"2026-01-01T00:00:00.123Z"`, `"time":"2026-01-01t00:00:00z"`, 1),
		strings.Replace(base, `"time":"2026-01-01T00:00:00.123Z"`, `"time":null`, 1),
		strings.Replace(base, `"data":{`, `"extra":{"a":[1,{"b":null}]},"data":{"extra":[true],`, 1),
		strings.Replace(base, `"data":{`, `"data":null,"x":{`, 1),
		strings.Replace(base, `"data":{`, `"data":[],"x":{`, 1),
		strings.Replace(base, `"specversion":"1.0"`, `"specversion":"1.\u0030"`, 1),
		strings.Replace(base, `tenant-0`, "tenant-\xff", 1),
		base+" ", base+" {}", base+"x", "null", "[]", "{}", `{"data":{}}`, "", `{"id":"a"`,
	)
	return seeds
}

func knownProvidersFor(i int) Provider { return Provider(knownProviders[i%len(knownProviders)]) }

// The hand decoder answers every seed as json.Unmarshal does: the same
// event, or an error when it errs.
func TestDecodeEventAgreesWithUnmarshal(t *testing.T) {
	for i, in := range decodeSeeds(t) {
		checkDecodeAgrees(t, fmt.Sprintf("seed %d", i), []byte(in))
	}
}

func checkDecodeAgrees(t *testing.T, name string, in []byte) {
	t.Helper()
	got, err := decodeEvent(in)
	want, wantErr := oracleEvent(in)
	switch {
	case (err != nil) != (wantErr != nil):
		t.Errorf("%s: decodeEvent error %v, json.Unmarshal error %v\n%s", name, err, wantErr, in)
	case err == nil && !sameEvent(got, want):
		t.Errorf("%s: decodeEvent\n%+v\njson.Unmarshal\n%+v\n%s", name, got, want, in)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkDecodeAgrees(t, "input", in)
	})
}

// A decoded event holds none of its input's bytes, and the one string of
// its unique texts is what each field says.
func TestDecodeEventCopies(t *testing.T) {
	in := []byte(decodeSeeds(t)[3])
	e, err := decodeEvent(in)
	if err != nil {
		t.Fatal(err)
	}
	want := e
	want.ID, want.Data.TenantID, want.Data.ErrorMessage = strings.Clone(e.ID), strings.Clone(e.Data.TenantID), strings.Clone(e.Data.ErrorMessage)
	for i := range in {
		in[i] = 'x'
	}
	if e.ID != want.ID || e.Data.TenantID != want.Data.TenantID || e.Data.ErrorMessage != want.Data.ErrorMessage || e.Data.TenantID != "tenant-3" {
		t.Errorf("the event changed with its input: %+v", e)
	}
}

// BenchmarkDecodeEvent decodes distinct events (each its own ids, as on a
// stream), by hand and by reflection.
func BenchmarkDecodeEvent(b *testing.B) {
	var in [][]byte
	for i := range 1024 {
		d := EventData{TenantID: fmt.Sprintf("tenant-%d", i), Provider: ProviderStepFunctions, Workflow: "provision-tenant",
			ExecutionID: fmt.Sprintf("arn:aws:states:us-east-1:123456789012:execution:provision-tenant:e%d", i),
			SubState:    StateFailed, ProviderState: "FAILED", ErrorType: "States.TaskFailed",
			ErrorMessage: fmt.Sprintf("quota exceeded for tenant tenant-%d in eu-west-1", i),
			OccurredAt:   time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), ExecutionStartedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			Revision: 2 << 32}
		d.Normalize()
		buf, err := MarshalEvent(NewEvent(fmt.Sprintf("%032x", i*7919), d))
		if err != nil {
			b.Fatal(err)
		}
		in = append(in, buf)
	}
	for _, c := range []struct {
		name   string
		decode func([]byte) (Event, error)
	}{{"hand", decodeEvent}, {"reflection", oracleEvent}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := c.decode(in[i%len(in)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
