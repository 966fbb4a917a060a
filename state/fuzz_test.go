package state_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/state"
)

// sampleRecords returns records in every shape the store writes.
func sampleRecords() []state.Record {
	var out []state.Record
	var rec state.Record
	for _, e := range []substate.EventData{
		ev("t", "a", running, 1),
		ev("t", "a", running, 2, step("Charge card")),
		ev("t", "a", backingOff, 3, retries(3), failure("card declined: état inconnu")),
		ev("t", "a", backingOff, 4, retries(4), fault("boom", "Boom", "engine/boom/boom"), workflow("billing")),
		ev("t", "a", backingOff, 5, retries(5), failure("boom"), nextRetry(t0.Add(time.Minute))),
		ev("t", "a", succeeded, 6),
		ev("t", "b", failed, 1, started(t0.Add(time.Hour)), failure("x"), verb(substate.VerbCancelled)),
	} {
		rec, _ = state.ApplyEvent(rec, e, t0)
		out = append(out, rec)
	}
	rec.Seq = 4711
	out = append(out, rec)
	rec.View.Deadline, rec.View.DeadlineSLO = t0.Add(time.Hour), substate.SLOBackingOff
	out = append(out, rec)
	rec.View.Stuck, rec.View.StuckSince = true, rec.View.Deadline
	return append(out, rec)
}

// FuzzDecodeRecord feeds arbitrary stored bytes to the record decoder: it
// must never panic, and what it accepts must survive another round trip.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(state.EncodeRecord(r))
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := state.DecodeRecord("t", b)
		if err != nil {
			return
		}
		again, err := state.DecodeRecord("t", state.EncodeRecord(rec))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if again != rec {
			t.Fatalf("round trip changed the record:\n %+v\n %+v", rec, again)
		}
	})
}

// FuzzRecordRoundTrip builds records from arbitrary field values: every
// record the rules can produce must decode to itself.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("a", "b", "boom", "RUNNING", "Charge", "wf|Boom|engine/boom/boom", 3, int64(1700000000), int64(5), uint64(7), uint8(2), uint16(2))
	f.Add("", "", "", "", "", "", 0, int64(0), int64(0), uint64(0), uint8(0), uint16(0))
	f.Fuzz(func(t *testing.T, exec, own, msg, native, step, kinds string, retry int, sec, nsec int64, rev uint64, s uint8, mapping uint16) {
		const lo, hi = -62167219200, 253402300799 // years 0 and 9999, what JSON holds
		sec = lo + int64(uint64(sec)%uint64(hi-lo+1))
		at := time.Unix(sec, int64(uint64(nsec)%1e9)).UTC()
		if at.Add(time.Second).Unix() > hi {
			at = at.Add(-time.Second)
		}
		rec := state.Record{ExecutionID: own, StartedAt: at, Revision: substate.Revision(rev), Mapping: int(mapping)}
		rec.View = substate.TenantView{
			TenantID:             "t",
			WorkflowSubState:     substate.SubStates[int(s)%len(substate.SubStates)],
			WorkflowVerb:         substate.VerbCompleted,
			WorkflowStatus:       substate.StatusRunning,
			WorkflowExecutionID:  exec,
			WorkflowRetryCount:   max(retry, 0) % (1 << 31),
			WorkflowErrorMessage: msg,
			WorkflowStep:         step,
			Provider:             substate.ProviderRestate,
			ProviderState:        native,
			UpdatedAt:            at,
			LastEventAt:          at.Add(time.Second),
		}
		parts := strings.SplitN(kinds, "|", 3)
		for len(parts) < 3 {
			parts = append(parts, "")
		}
		rec.View.WorkflowType, rec.View.WorkflowErrorType, rec.View.WorkflowErrorFingerprint = parts[0], parts[1], parts[2]
		if s%2 == 0 {
			rec.View.WorkflowSubStateSince = at
		}
		if s%3 == 0 {
			rec.Seq = rev
		}
		if s%3 == 1 {
			rec.View.Deadline, rec.View.DeadlineSLO = at, substate.SLONames[int(mapping)%len(substate.SLONames)]
			if s%4 == 1 {
				rec.View.Stuck, rec.View.StuckSince = true, at
			}
		}
		if s%5 == 0 {
			rec.View.WorkflowNextRetryAt = at
		}
		got, err := state.DecodeRecord("t", state.EncodeRecord(rec))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if got != rec {
			t.Fatalf("round trip:\n got  %+v\n want %+v", got, rec)
		}
	})
}

// FuzzPageToken lists tenants with arbitrary page tokens: the answer is a
// page or an EINVALID error, never a panic or another error. A token the
// store encodes decodes to what it was made of.
func FuzzPageToken(f *testing.F) {
	db := openDB(f)
	population(f, db, 40)
	ctx := context.Background()
	for _, filter := range filters {
		filter.f.Limit = 3
		page, err := db.Tenants(ctx, filter.f)
		if err != nil {
			f.Fatal(err)
		}
		if page.NextPageToken != "" {
			f.Add(page.NextPageToken, filter.f.SubState == "", filter.f.SortRetryDesc)
		}
	}
	f.Add("", true, false)
	f.Add("AQEAAAAAAA", false, true)
	f.Fuzz(func(t *testing.T, token string, all, desc bool) {
		filter := substate.TenantFilter{PageToken: token, SortRetryDesc: desc, Limit: 5}
		if !all {
			filter.SubState = running
		}
		if _, err := db.Tenants(ctx, filter); err != nil && substate.ErrorCode(err) != substate.EINVALID {
			t.Fatalf("token %q: %v", token, err)
		}
		kind, query, key, err := state.DecodeToken(token)
		if err != nil {
			return
		}
		if again := state.EncodeToken(kind, query, key); again != token {
			k2, q2, key2, err := state.DecodeToken(again)
			if err != nil || k2 != kind || q2 != query || !bytes.Equal(key2, key) {
				t.Fatalf("token %q re-encodes to %q, which decodes differently", token, again)
			}
		}
	})
}
