package mapping

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/redact"
)

// Version is the version of the mapping. It is part of every canonical event
// id, so re-normalizing the raw stream with a changed mapping publishes new
// events instead of being deduplicated against the old ones. Bump it whenever
// the mapping of an existing payload changes. Version 2 adds the step to
// engine events and Step Functions polls, and maps Restate rows as a real
// server sends them (revision, retry count, error text). Version 3 adds
// the error fingerprint, counts a failed Restate invocation's retries from
// its journal, words a stop's cause as every provider does
// (substate.StopMessage: "Stopped: <cause>"), and redacts secrets in the
// error text (redact.Text) before the fingerprint is taken. Version 4
// counts a Task state entered again after its failure was caught as a
// retry (Step Functions polls) and gives an error without a message its
// type as the message. Version 5 adds the next retry time of a
// backing-off event (the engine's NextRetryAt, a Restate row's
// next_retry_at).
const Version = 5

// EventID returns the deterministic id of the index-th canonical event mapped
// from raw: the hex SHA-256 of the raw kind, the raw id, the index and Version.
func EventID(raw substate.RawEvent, index int) string { return EventIDOf(raw, index, Version) }

// EventIDOf returns the id the index-th canonical event mapped from raw
// had, or would have had, under mapping version version: the evidence
// check asks it of an event an earlier (or later) version mapped. Events
// from before they carried their version (0) are of version 1.
func EventIDOf(raw substate.RawEvent, index, version int) string {
	version = max(version, 1)
	var in [256]byte // the hashed input, on the stack unless the id is long
	b := append(in[:0], raw.Kind...)
	b = append(b, 0)
	b = append(b, raw.ID...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(version), 10)
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:]) // the one allocation: the id
}

// Config configures a Mapper.
type Config struct {
	// Tenants are the tenant resolution rules, tried in order. Empty means
	// DefaultTenantRules.
	Tenants TenantRules
	// Logger receives the warning about an unknown provider state, which
	// names the state. Nil discards logs.
	Logger *slog.Logger
	// OnUnknown, when set, is called for every unknown provider state with
	// the provider, one of substate.Providers, to count it in a metric. It
	// is not given the state: that comes from provider input, and a metric
	// label taken from it would let one client create any number of
	// series. The state goes to the log.
	OnUnknown func(provider string)
}

// Mapper maps raw provider payloads to canonical events. It is safe for
// concurrent use.
type Mapper struct {
	tenants   TenantRules
	logger    *slog.Logger
	onUnknown func(provider string)
	unknown   [3]atomic.Uint64 // by provider, in substate.Providers order
}

var _ substate.Mapper = (*Mapper)(nil)

// New returns a Mapper with the given configuration.
func New(c Config) *Mapper {
	m := &Mapper{tenants: c.Tenants, logger: c.Logger, onUnknown: c.OnUnknown}
	if len(m.tenants) == 0 {
		m.tenants = DefaultTenantRules()
	}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}
	return m
}

// Map decodes raw and maps it to canonical events, dispatching on its kind,
// each stamped with the mapping Version and given its error fingerprint.
// Undecodable payloads are EINVALID errors, unresolvable tenants ENOTENANT.
//
// The providers' error text (a Step Functions cause, a Restate
// last_failure, an engine task's error) is redacted here, the one place
// every canonical event passes, with redact.Text, before the fingerprint
// is taken: a value its words name as a secret ("password hunter2") is
// "[redacted]" in the event, and so in the view, the change feed, the
// logs, the fingerprint and everything derived from the message. The raw
// message keeps it, as evidence for read:raw and admin.
func (m *Mapper) Map(raw substate.RawEvent) ([]substate.EventData, error) {
	events, err := m.mapKind(raw)
	for i := range events {
		ev := &events[i]
		ev.MappingVersion = Version
		typeAsMessage(ev)
		ev.ErrorMessage = redact.Text(ev.ErrorMessage)
		ev.ErrorFingerprint = Fingerprint(ev.Provider, ev.ErrorType, ev.ErrorMessage)
	}
	return events, err
}

// typeAsMessage gives a failing event with an error type and no message
// (a Fail state with only its error, a task error without text) its type
// as the message, so the view shows that it has an error.
func typeAsMessage(ev *substate.EventData) {
	switch ev.SubState {
	case substate.StateFailed, substate.StateError, substate.StateBackingOff:
		if ev.ErrorMessage == "" && ev.ErrorType != "" {
			ev.ErrorMessage = firstLine(ev.ErrorType)
		}
	}
}

func (m *Mapper) mapKind(raw substate.RawEvent) ([]substate.EventData, error) {
	switch raw.Kind {
	case substate.RawEventBridge:
		ev, err := m.MapEventBridge(raw.Body)
		if err != nil {
			return nil, err
		}
		return []substate.EventData{ev}, nil
	case substate.RawStepFunctionsPoll:
		ev, err := m.MapPoll(raw.Body)
		if err != nil {
			return nil, err
		}
		return []substate.EventData{ev}, nil
	case substate.RawRestate:
		return m.mapRestate(raw.Body, raw.Header[substate.HeaderStopCause])
	case substate.RawEngine:
		ev, err := m.mapEngineRaw(raw)
		if err != nil {
			return nil, err
		}
		return []substate.EventData{ev}, nil
	}
	return nil, substate.Errorf(substate.EINVALID, "unknown raw kind %q", raw.Kind)
}

// Unknown returns how many unknown native states of provider p were mapped
// to running since the Mapper was created.
func (m *Mapper) Unknown(p substate.Provider) uint64 {
	if i := providerIndex(p); i >= 0 {
		return m.unknown[i].Load()
	}
	return 0
}

func providerIndex(p substate.Provider) int {
	switch p {
	case substate.ProviderStepFunctions:
		return 0
	case substate.ProviderRestate:
		return 1
	case substate.ProviderEngine:
		return 2
	}
	return -1
}

// resolve returns the table row of a native state under a condition. An
// unknown state maps to running, with a warning and a count.
func (m *Mapper) resolve(p substate.Provider, state string, c Condition) Row {
	if r, ok := lookup(p, state, c); ok {
		return *r
	}
	if i := providerIndex(p); i >= 0 {
		m.unknown[i].Add(1)
	}
	m.logger.Warn("unknown provider state, mapped to running", "provider", string(p), "state", state)
	if m.onUnknown != nil {
		m.onUnknown(string(p))
	}
	return unknownRow(p, state)
}

func unknownRow(p substate.Provider, state string) Row {
	return row(p, state, CondNone, substate.StateRunning, "")
}

// apply copies a row's sub-state, verb and status into ev and normalizes it.
func apply(ev *substate.EventData, r Row) {
	ev.SubState, ev.Verb, ev.Status = r.SubState, r.Verb, r.Status
	ev.Normalize()
}
