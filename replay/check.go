package replay

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/substatehq/substate"
)

// Outcomes of checking one canonical event against its evidence.
const (
	// CheckVerified: its raw message re-normalizes to exactly this event.
	CheckVerified = "verified"
	// CheckForged: its raw message exists but does not re-normalize to it
	// (other content, another id), or maps to nothing at all.
	CheckForged = "forged"
	// CheckMissing: the raw message it needs is not in SUBSTATE_RAW, and
	// retention does not explain why.
	CheckMissing = "missing"
	// CheckExpired: its raw message was removed by retention before it.
	CheckExpired = "expired"
	// CheckUnverified: mapped by another mapping version than this
	// binary's, so it cannot be derived again exactly; its id is the one
	// its raw message's event had under that version, and the current
	// mapping of its raw message agrees on what happened (tenant,
	// execution, sub-state; see decisiveDifference). A failure unless the
	// check accepts them (Checker.AcceptUnverified).
	CheckUnverified = "unverified"
	// CheckInvalid: not a canonical event (the projector dead-letters it).
	CheckInvalid = "invalid"
)

// CheckOutcomes lists the outcomes, in the order reports print them.
var CheckOutcomes = []string{CheckVerified, CheckForged, CheckMissing, CheckExpired, CheckUnverified, CheckInvalid}

// DefaultMaxFindings is how many problems a check describes one by one.
const DefaultMaxFindings = 100

// Checker checks that every canonical event of SUBSTATE_EVENTS has its
// evidence in SUBSTATE_RAW: the raw message it names in its headers (for
// an event without that link, one whose event id it has) exists and maps,
// with the current mapping, to exactly this event on exactly this subject.
// An event published by anyone else, even with publish rights on the
// stream, has no such raw message: it is reported forged or missing.
type Checker struct {
	Reader *Reader
	Mapper substate.Mapper
	// EventID is the normalizer's deterministic event id (mapping.EventID).
	EventID func(raw substate.RawEvent, index int) string
	// EventIDOf is the id under another mapping version
	// (mapping.EventIDOf); without it an event of another version is
	// forged.
	EventIDOf func(raw substate.RawEvent, index, version int) string
	// AcceptUnverified makes events of another mapping version that the
	// current mapping agrees with (CheckUnverified) no failure.
	AcceptUnverified bool
	// MappingVersion is the current mapping's version (mapping.Version).
	MappingVersion int
	// ClockSlack is how long after SUBSTATE_RAW's oldest message an event
	// whose raw message is gone may have been stored and still count as
	// expired (the normalizer lagged); 0 means DefaultClockSlack.
	ClockSlack time.Duration
	// Lookback bounds the search for unlinked events (see Evidence).
	Lookback time.Duration
	// MaxFindings is how many problems are kept in the result; 0 means
	// DefaultMaxFindings.
	MaxFindings int
	// Metrics, when set, counts every event checked by outcome and the
	// time the check worked.
	Metrics *CheckMetrics
	// Budget is the share of one core's time the check may work, between
	// 0 and 1: after each batch it waits long enough that its working time
	// stays within it (so a check over a backlog does not take the cores
	// the pipeline needs). 0 or 1 means no wait.
	Budget float64
}

// Finding is one event whose evidence does not hold.
type Finding struct {
	Seq      uint64          `json:"seq"` // in SUBSTATE_EVENTS
	EventID  string          `json:"eventId,omitempty"`
	TenantID string          `json:"tenantId,omitempty"`
	Outcome  string          `json:"outcome"`
	Reason   string          `json:"reason"`
	Raw      substate.RawRef `json:"raw"`
}

// CheckResult is what a check found.
type CheckResult struct {
	FirstSeq, LastSeq uint64         // the event sequences read
	Counts            map[string]int // events by outcome
	Findings          []Finding      // forged, missing, unverified and invalid events, up to MaxFindings
	// AcceptUnverified is the Checker's: unverified events are no failure.
	AcceptUnverified bool
	// Busy is how long the check worked, not counting the waits of its
	// budget.
	Busy time.Duration `json:"-"`
}

// Failed reports whether an event was forged, lost its evidence, or
// cannot be derived again from it (unverified, unless accepted).
func (r CheckResult) Failed() bool {
	n := r.Counts[CheckForged] + r.Counts[CheckMissing]
	if !r.AcceptUnverified {
		n += r.Counts[CheckUnverified]
	}
	return n > 0
}

// rawBounds is where SUBSTATE_RAW starts.
type rawBounds struct {
	first   uint64
	firstAt time.Time
}

// Run checks the events of rg. It reads them, and the raw messages they
// name, each stream with one scan (Reader.Scan: a consumer of its own,
// deleted when the check ends), not with a request per event. Linked
// events are checked in batches of linkedBatch: the normalizer maps the
// raw stream in order, so a batch's raw messages lie close together, and
// the raw scan reads on from where the last batch's ended.
func (c *Checker) Run(ctx context.Context, rg Range) (CheckResult, error) {
	res := CheckResult{Counts: map[string]int{}, AcceptUnverified: c.AcceptUnverified}
	bounds, err := c.rawBounds(ctx)
	if err != nil {
		return res, err
	}
	raw := &rawScan{r: c.Reader}
	defer raw.close()
	var linked, unlinked []Event
	for e, err := range c.Reader.ScanEvents(ctx, rg) {
		if err != nil {
			return res, err
		}
		if res.FirstSeq == 0 {
			res.FirstSeq = e.Seq
		}
		res.LastSeq = e.Seq
		if e.Err == nil && e.RawRef().Seq == 0 {
			unlinked = append(unlinked, e)
			continue
		}
		if linked = append(linked, e); len(linked) == linkedBatch {
			if err := c.checkBatch(ctx, raw, linked, bounds, &res); err != nil {
				return res, err
			}
			linked = linked[:0]
		}
	}
	if err := c.checkBatch(ctx, raw, linked, bounds, &res); err != nil {
		return res, err
	}
	return res, c.checkUnlinked(ctx, unlinked, bounds, &res)
}

// checkBatch checks a batch of linked events, reading their raw messages
// first.
func (c *Checker) checkBatch(ctx context.Context, raw *rawScan, events []Event, b rawBounds, res *CheckResult) error {
	start := time.Now()
	defer func() { res.Busy += c.pace(ctx, time.Since(start)) }()
	raws, err := raw.readRaw(ctx, events)
	if err != nil {
		return err
	}
	for _, e := range events {
		f, err := c.checkLinked(ctx, e, b, raws)
		if err != nil {
			return err
		}
		c.record(res, f)
	}
	return nil
}

// rawBounds reads the first sequence of SUBSTATE_RAW and when it was
// stored.
func (c *Checker) rawBounds(ctx context.Context) (rawBounds, error) {
	first, _, msgs, err := c.Reader.Bounds(ctx, substate.StreamRaw)
	if err != nil || msgs == 0 {
		return rawBounds{first: first}, err
	}
	m, err := c.Reader.Get(ctx, substate.StreamRaw, first)
	if substate.ErrorCode(err) == substate.ENOTFOUND {
		return rawBounds{first: first}, nil // removed meanwhile: any time is older
	} else if err != nil {
		return rawBounds{}, err
	}
	return rawBounds{first: first, firstAt: m.Stored}, nil
}

// checkLinked checks an event against the raw message its headers name,
// found in raws or, when the batched read did not return it, asked for
// alone (the stream's leader says whether it is gone).
func (c *Checker) checkLinked(ctx context.Context, e Event, b rawBounds, raws map[uint64]Message) (Finding, error) {
	f := Finding{Seq: e.Seq, EventID: e.Event.ID, TenantID: e.Event.Data.TenantID, Raw: e.RawRef()}
	if e.Err != nil {
		return f.is(CheckInvalid, e.Err.Error()), nil
	}
	m, ok := raws[f.Raw.Seq]
	if !ok {
		var err error
		m, err = c.Reader.Get(ctx, substate.StreamRaw, f.Raw.Seq)
		if substate.ErrorCode(err) == substate.ENOTFOUND {
			return c.gone(f, e, b), nil
		} else if err != nil {
			return f, err
		}
		raws[f.Raw.Seq] = m
	}
	raw := RawEventOf(m)
	if f.Raw.ID != "" && raw.ID != f.Raw.ID {
		return f.is(CheckForged, fmt.Sprintf("names %s sequence %d, which holds raw message %q, not %q", substate.StreamRaw, f.Raw.Seq, raw.ID, f.Raw.ID)), nil
	}
	return c.compare(f, e, raw), nil
}

// gone classifies an event whose raw message is not in SUBSTATE_RAW.
func (c *Checker) gone(f Finding, e Event, b rawBounds) Finding {
	if f.Raw.Seq < b.first && c.expired(e, b) {
		return f.is(CheckExpired, "raw message removed by retention")
	}
	return f.is(CheckMissing, fmt.Sprintf("raw message %s sequence %d is not in the stream", substate.StreamRaw, f.Raw.Seq))
}

// expired reports whether e's raw message may have been removed by
// retention: SUBSTATE_RAW lost its first messages, and e was stored no
// later than ClockSlack after the oldest one left.
func (c *Checker) expired(e Event, b rawBounds) bool {
	if b.first <= 1 {
		return false // nothing was ever removed
	}
	return b.firstAt.IsZero() || !e.Stored.After(b.firstAt.Add(cmp.Or(c.ClockSlack, DefaultClockSlack)))
}

// compare maps raw again and checks that one of its events is e.
func (c *Checker) compare(f Finding, e Event, raw substate.RawEvent) Finding {
	data, err := c.Mapper.Map(raw)
	if err != nil {
		return f.is(CheckForged, "its raw message maps to no event: "+err.Error())
	}
	if e.Event.Data.MappingVersion != c.MappingVersion {
		return c.compareOther(f, e, raw, data)
	}
	for i := range data {
		if c.EventID(raw, i) != e.Event.ID {
			continue
		}
		want := substate.NewEvent(e.Event.ID, data[i])
		unmapped(&want, &e.Event)
		if reason := differs(e, want); reason != "" {
			return f.is(CheckForged, reason)
		}
		return f.is(CheckVerified, "")
	}
	return f.is(CheckForged, fmt.Sprintf("its id is not one of the %d events its raw message maps to", len(data)))
}

// compareOther checks an event that claims another mapping version, which
// this binary cannot map with: its id must be the one its raw message's
// event had under that version, and the current mapping must agree with
// it on what happened. Anything else is forged.
func (c *Checker) compareOther(f Finding, e Event, raw substate.RawEvent, data []substate.EventData) Finding {
	v := e.Event.Data.MappingVersion
	for i := range data {
		if c.EventIDOf == nil || c.EventIDOf(raw, i, v) != e.Event.ID {
			continue
		}
		if subj := substate.EventsSubject(data[i].TenantID); e.Subject != subj {
			return f.is(CheckForged, fmt.Sprintf("stored on %s, not on its tenant's subject %s", e.Subject, subj))
		}
		if d := decisiveDifference(e.Event.Data, data[i]); d != "" {
			return f.is(CheckForged, fmt.Sprintf("claims mapping version %d, and its raw message says otherwise: %s", v, d))
		}
		return f.is(CheckUnverified, fmt.Sprintf("mapped by mapping version %d; this binary maps with version %d and cannot derive it again exactly (tenant, execution and sub-state agree)", v, c.MappingVersion))
	}
	return f.is(CheckForged, fmt.Sprintf("claims mapping version %d, but its id is not one of the %d events its raw message maps to under that version", v, len(data)))
}

// decisiveDifference names the first field that says what happened in
// which got and want differ: the tenant, provider, execution, workflow and
// sub-state (with its verb, legacy status and terminality). A newer
// mapping may change the others (retry count, error text, step, revision,
// times read from a provider's history) for the same payload; "" when none
// differs.
func decisiveDifference(got, want substate.EventData) string {
	for _, f := range []struct{ name, got, want string }{
		{"tenantId", got.TenantID, want.TenantID},
		{"provider", string(got.Provider), string(want.Provider)},
		{"executionId", got.ExecutionID, want.ExecutionID},
		{"workflow", got.Workflow, want.Workflow},
		{"subState", string(got.SubState), string(want.SubState)},
		{"verb", string(got.Verb), string(want.Verb)},
		{"status", string(got.Status), string(want.Status)},
		{"terminal", fmt.Sprint(got.Terminal), fmt.Sprint(want.Terminal)},
	} {
		if f.got != f.want {
			return fmt.Sprintf("%s %q, raw says %q", f.name, f.got, f.want)
		}
	}
	return ""
}

// unmapped copies to want what the mapping of the raw message does not
// decide: where the worker served the data's schema, the traceparent of
// the request, and the single type events had before each sub-state got
// its own.
func unmapped(want, stored *substate.Event) {
	want.DataSchema, want.TraceParent = stored.DataSchema, stored.TraceParent
	if stored.Type == substate.EventType {
		want.Type = substate.EventType
	}
}

// differs says how a stored event differs from the event its raw message
// maps to, "" when it does not.
func differs(e Event, want substate.Event) string {
	if subj := substate.EventsSubject(want.Data.TenantID); e.Subject != subj {
		return fmt.Sprintf("stored on %s, not on its tenant's subject %s", e.Subject, subj)
	}
	stored := e.Event
	stored.Raw, stored.Hop = want.Raw, want.Hop // carried in headers, not compared here
	if reflect.DeepEqual(stored, want) {
		return "" // decoded to what the mapping builds: it encodes to the same bytes
	}
	exp, err := substate.MarshalEvent(want)
	if err == nil && bytes.Equal(e.Data, exp) {
		return "" // stored as the normalizer writes it: no need to encode it again
	}
	got, err1 := substate.MarshalEvent(e.Event)
	if err1 != nil || err != nil || !bytes.Equal(got, exp) {
		return fmt.Sprintf("differs from what its raw message maps to (%s)", firstDifference(e.Event.Data, want.Data))
	}
	return ""
}

// firstDifference names the first data field that differs.
func firstDifference(got, want substate.EventData) string {
	if got.TenantID != want.TenantID {
		return fmt.Sprintf("tenantId %q, raw says %q", got.TenantID, want.TenantID)
	}
	for _, d := range Compare([]substate.TenantView{viewOf(got)}, []substate.TenantView{viewOf(want)}) {
		for _, fd := range d.Fields {
			return fmt.Sprintf("%s %q, raw says %q", fd.Field, fd.Live, fd.Replay)
		}
	}
	return "envelope or revision"
}

// viewOf puts the fields a reader cares about into a TenantView, to reuse
// Compare's field by field description.
func viewOf(d substate.EventData) substate.TenantView {
	return substate.TenantView{TenantID: d.TenantID, WorkflowType: d.Workflow, WorkflowSubState: d.SubState, WorkflowVerb: d.Verb,
		WorkflowStatus: d.Status, WorkflowExecutionID: d.ExecutionID, WorkflowRetryCount: d.RetryCount, WorkflowNextRetryAt: d.NextRetryAt, WorkflowErrorMessage: d.ErrorMessage,
		WorkflowErrorType: d.ErrorType, WorkflowErrorFingerprint: d.ErrorFingerprint, WorkflowStep: d.Step,
		Provider: d.Provider, ProviderState: d.ProviderState}
}

func (f Finding) is(outcome, reason string) Finding {
	f.Outcome, f.Reason = outcome, reason
	return f
}

// record counts a finding and keeps it when it is a problem.
func (c *Checker) record(res *CheckResult, f Finding) {
	res.Counts[f.Outcome]++
	c.Metrics.count(f.Outcome)
	if f.Outcome != CheckVerified && f.Outcome != CheckExpired && len(res.Findings) < cmp.Or(c.MaxFindings, DefaultMaxFindings) {
		res.Findings = append(res.Findings, f)
	}
}
