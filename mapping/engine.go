package mapping

import (
	"github.com/substatehq/substate"
)

// MapEngine maps one status event of the built-in engine (a
// substate.EngineEvent in JSON) to its canonical event.
func (m *Mapper) MapEngine(body []byte) (substate.EventData, error) {
	var ev substate.EngineEvent
	if err := decode(body, &ev); err != nil {
		return substate.EventData{}, substate.WrapError(substate.EINVALID, err, "decode engine event")
	}
	return m.MapEngineEvent(ev)
}

// MapEngineEvent maps a decoded engine status event to its canonical event.
func (m *Mapper) MapEngineEvent(ev substate.EngineEvent) (substate.EventData, error) {
	if ev.ExecutionID == "" || ev.Status == "" {
		return substate.EventData{}, substate.Errorf(substate.EINVALID, "engine event %q has no execution id or status", ev.ID)
	}
	out := substate.EventData{
		Provider:           substate.ProviderEngine,
		ExecutionID:        ev.ExecutionID,
		Workflow:           ev.Workflow,
		ProviderState:      ev.Status,
		RetryCount:         max(ev.RetryCount, 0),
		RetryCountKnown:    true,
		ErrorMessage:       firstLine(ev.Error),
		ErrorType:          ev.ErrorType,
		Step:               ev.State,
		OccurredAt:         ev.Time,
		ExecutionStartedAt: ev.StartedAt,
		Revision:           substate.Revision(min(ev.Seq, 1<<53-1)),
	}
	cond := CondNone
	if ev.Status == substate.EngineFailed && ev.Stopped {
		cond = CondEngineStopped
		if ev.ErrorType == substate.StopErrorType {
			out.ErrorMessage = substate.StopMessage(ev.Error)
		}
	}
	apply(&out, m.resolve(substate.ProviderEngine, ev.Status, cond))
	if out.SubState == substate.StateBackingOff {
		out.NextRetryAt = ev.NextRetryAt
	}
	src := tenantSource{provider: substate.ProviderEngine, execution: ev.ExecutionID, name: ev.ExecutionID, engineTenant: ev.TenantID}
	tenant, err := m.tenants.resolve(&src)
	if err != nil {
		return substate.EventData{}, err
	}
	out.TenantID = tenant
	return out, nil
}
