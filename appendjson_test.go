package substate_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/substatehq/substate"
)

// fullChange is a change with every field of both views set.
func fullChange() substate.Change {
	at := time.Date(2026, 12, 1, 10, 4, 5, 123456789, time.UTC)
	old := substate.TenantView{
		TenantID: "tenant-1", WorkflowType: "provision-tenant", WorkflowSubState: substate.StateBackingOff,
		WorkflowSubStateSince: at, WorkflowVerb: "backing off", WorkflowStatus: "running",
		WorkflowExecutionID: "arn:aws:states:us-east-1:123456789012:execution:provision-tenant:e1", WorkflowRetryCount: 3,
		WorkflowNextRetryAt: at.Add(2 * time.Second), WorkflowErrorMessage: `quota "exceeded" for <tenant> & co\n`,
		WorkflowErrorType: "QuotaExceeded", WorkflowErrorFingerprint: "a1b2c3", WorkflowStep: "CreateAccount",
		Provider: substate.ProviderStepFunctions, ProviderState: "RUNNING", UpdatedAt: at, LastEventAt: at.Add(-time.Second),
		Deadline: at.Add(time.Hour), DeadlineSLO: "backing-off", Stuck: true, StuckSince: at.Add(time.Minute),
	}
	next := old
	next.WorkflowSubState, next.Stuck, next.StuckSince, next.WorkflowRetryCount = substate.StateSucceeded, false, time.Time{}, 0
	return substate.Change{Seq: 18446744073709551615, TenantID: "tenant-1", Old: old, New: next, TraceParent: "not data", Kind: substate.ChangeStuck}
}

func TestEncodeChangeIsWhatMarshalWrites(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*substate.Change)
	}{
		{"every field", func(*substate.Change) {}},
		{"zero views", func(c *substate.Change) { c.Old, c.New = substate.TenantView{}, substate.TenantView{} }},
		{"escapes", func(c *substate.Change) {
			c.TenantID = "a\"b\\c\x00\x1f\u2028\u2029<>&é😀"
			c.New.WorkflowErrorMessage = "line\nbreak\ttab\r\x7f"
		}},
		{"zone", func(c *substate.Change) {
			c.New.UpdatedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("IST", 5*3600+1800))
			c.Old.Deadline = time.Date(1, 1, 1, 0, 0, 0, 1, time.FixedZone("", -12*3600))
		}},
		{"negative retries", func(c *substate.Change) { c.New.WorkflowRetryCount = -4 }},
		{"year 10000", func(c *substate.Change) { c.New.UpdatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"year before 0", func(c *substate.Change) { c.Old.LastEventAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"zone of 24 hours", func(c *substate.Change) {
			c.New.StuckSince = time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))
		}},
		{"zone with seconds", func(c *substate.Change) {
			c.New.StuckSince = time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 3601))
		}},
		{"not utf-8", func(c *substate.Change) { c.New.ProviderState = "bad \xff byte" }},
		{"not utf-8 in the id", func(c *substate.Change) { c.TenantID = "\xc3" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := fullChange()
			c.change(&ch)
			sameAsMarshal(t, &ch)
		})
	}
}

// sameAsMarshal fails unless EncodeChange writes what json.Marshal does,
// or fails where it does.
func sameAsMarshal(t *testing.T, c *substate.Change) {
	t.Helper()
	want, wantErr := json.Marshal(c)
	got, err := substate.EncodeChange(c)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("error %v, json.Marshal's %v", err, wantErr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%s\njson.Marshal\n%s", got, want)
	}
	if err != nil {
		return
	}
	// Its CloudEvent, the envelope written by hand around those bytes.
	e := substate.NewChangeEvent(*c, "https://substate.example")
	e.Data.Encoded = nil
	want, wantErr = json.Marshal(&e)
	e.Data.Encoded = got
	got, err = substate.EncodeChangeEvent(&e)
	if (err != nil) != (wantErr != nil) || err == nil && !bytes.Equal(got, want) {
		t.Fatalf("change event\n%s (%v)\njson.Marshal\n%s (%v)", got, err, want, wantErr)
	}
	sameAppended(t, want, wantErr, func(b []byte) ([]byte, error) { return substate.AppendChangeEvent(b, &e) })
	e.Data.Encoded = nil
	sameAppended(t, want, wantErr, func(b []byte) ([]byte, error) { return substate.AppendChangeEvent(b, &e) })
}

// sameAppended fails unless appendTo, given a buffer that holds a prefix
// and stale bytes past it (as a publisher's buffer holds its last
// message), appends exactly want after the prefix, or fails where wantErr
// says encoding fails.
func sameAppended(t *testing.T, want []byte, wantErr error, appendTo func([]byte) ([]byte, error)) {
	t.Helper()
	buf := append(make([]byte, 0, 64), "prefix"...)
	copy(buf[len(buf):cap(buf)], bytes.Repeat([]byte{'x'}, cap(buf)))
	got, err := appendTo(buf)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("appending: error %v, json.Marshal's %v", err, wantErr)
	}
	if err == nil && (!bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want)) {
		t.Fatalf("appended\n%s\nwant prefix and\n%s", got, want)
	}
}

func FuzzEncodeChange(f *testing.F) {
	f.Add("tenant-1", "quota \"exceeded\"", int64(1764583445123456789), 3600, -1, true)
	f.Add("\xff", "", int64(0), 0, 0, false)
	f.Add("a", "b", int64(-62135596800000000000/1000), 86400, 7, false)
	f.Fuzz(func(t *testing.T, id, msg string, nanos int64, offset, retries int, stuck bool) {
		c := fullChange()
		c.TenantID, c.New.TenantID, c.New.WorkflowErrorMessage = id, id, msg
		c.New.UpdatedAt = time.Unix(0, nanos).In(time.FixedZone("", offset%(200*3600)))
		c.Old.Deadline = time.Unix(nanos/7, nanos%1000).UTC()
		c.New.WorkflowRetryCount, c.New.Stuck = retries, stuck
		sameAsMarshal(t, &c)
	})
}

// BenchmarkEncodeChange compares the change's encoder with json.Marshal,
// which it replaces on the projector's path.
func BenchmarkEncodeChange(b *testing.B) {
	c := fullChange()
	b.Run("EncodeChange", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := substate.EncodeChange(&c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fullEvent is a canonical event with every field set.
func fullEvent() substate.Event {
	at := time.Date(2026, 12, 1, 10, 4, 5, 123456789, time.UTC)
	d := substate.EventData{
		TenantID: "tenant-1", Provider: substate.ProviderStepFunctions, ExecutionID: "arn:aws:states:us-east-1:1:execution:p:e1",
		Workflow: "provision-tenant", SubState: substate.StateBackingOff, RetryCount: 2, RetryCountKnown: true,
		NextRetryAt: at.Add(time.Second), ErrorMessage: "quota \"exceeded\" <&>", ErrorType: "QuotaExceeded",
		ErrorFingerprint: "stepfunctions/QuotaExceeded/quota", ProviderState: "RUNNING", Step: "CreateAccount",
		OccurredAt: at, ExecutionStartedAt: at.Add(-time.Minute), Revision: 1<<63 + 5, MappingVersion: 5,
	}
	d.Normalize()
	e := substate.NewEvent("0123456789abcdef", d)
	e.DataSchema, e.TraceParent = "https://substate.example/schemas/event.json", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	e.Raw, e.Hop = substate.RawRef{Seq: 9, ID: "raw"}, "not data"
	return e
}

func TestMarshalEventIsWhatMarshalWrites(t *testing.T) {
	for _, c := range []struct {
		name  string
		event func(*substate.Event)
	}{
		{"every field", func(*substate.Event) {}},
		{"optional fields unset", func(e *substate.Event) {
			e.DataSchema, e.TraceParent = "", ""
			e.Data.NextRetryAt, e.Data.ErrorFingerprint, e.Data.Step, e.Data.MappingVersion = time.Time{}, "", "", 0
		}},
		{"zero event", func(e *substate.Event) { *e = substate.Event{} }},
		{"escapes", func(e *substate.Event) { e.Data.ErrorMessage, e.Subject = "a\"b\\c\x00\x1f\u2028<>&😀\n", "t\tx" }},
		{"zones", func(e *substate.Event) {
			e.Time = substate.Timestamp{Time: time.Date(2026, 1, 2, 3, 4, 5, 999999999, time.FixedZone("", -7*3600))}
			e.Data.OccurredAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", 5*3600+1800))
		}},
		{"negative numbers", func(e *substate.Event) { e.Data.RetryCount, e.Data.MappingVersion = -1, -2 }},
		{"year 10000", func(e *substate.Event) { e.Data.ExecutionStartedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"envelope year 10000", func(e *substate.Event) {
			e.Time = substate.Timestamp{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
		}},
		{"not utf-8", func(e *substate.Event) { e.Data.ErrorMessage = "\xff" }},
		{"not utf-8 in the envelope", func(e *substate.Event) { e.ID = "\xc3(" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := fullEvent()
			c.event(&e)
			sameEventAsMarshal(t, e)
		})
	}
}

// sameEventAsMarshal fails unless MarshalEvent writes what json.Marshal
// does, or fails where it does.
func sameEventAsMarshal(t *testing.T, e substate.Event) {
	t.Helper()
	want, wantErr := json.Marshal(&e)
	got, err := substate.MarshalEvent(e)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("error %v, json.Marshal's %v", err, wantErr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%s\njson.Marshal\n%s", got, want)
	}
	sameAppended(t, want, wantErr, func(b []byte) ([]byte, error) { return substate.AppendEvent(b, &e) })
}

func FuzzMarshalEvent(f *testing.F) {
	f.Add("tenant-1", "quota \"exceeded\"", "", int64(1764583445123456789), 3600, -1, 0)
	f.Add("\xff", "", "step", int64(0), 0, 0, 5)
	f.Fuzz(func(t *testing.T, id, msg, step string, nanos int64, offset, retries, version int) {
		e := fullEvent()
		e.ID, e.Subject, e.Data.TenantID, e.Data.ErrorMessage, e.Data.Step = id, id, id, msg, step
		e.Time = substate.Timestamp{Time: time.Unix(0, nanos)}
		e.Data.OccurredAt = time.Unix(0, nanos).In(time.FixedZone("", offset%(200*3600)))
		if nanos%3 == 0 {
			e.Data.NextRetryAt = time.Time{}
		}
		e.Data.RetryCount, e.Data.MappingVersion = retries, version
		sameEventAsMarshal(t, e)
	})
}
