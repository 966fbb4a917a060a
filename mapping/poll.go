package mapping

import (
	"time"

	"github.com/substatehq/substate"
)

// pollPayload is the reconciler's raw Step Functions poll (RawKind
// stepfunctions.poll): a DescribeExecution response with the history
// events the poll read, and the summary of the earlier events it did not
// read again (none when it read the whole history).
type pollPayload struct {
	Execution *describeExecution `json:"execution"`
	History   struct {
		Events []HistoryEvent  `json:"events"`
		Prior  *HistorySummary `json:"prior"`
	} `json:"history"`
	PolledAt time.Time `json:"polledAt"`
}

// describeExecution is a DescribeExecution response (awsJson1_0).
type describeExecution struct {
	ExecutionARN    string       `json:"executionArn"`
	StateMachineARN string       `json:"stateMachineArn"`
	Name            string       `json:"name"`
	Status          string       `json:"status"`
	StartDate       EpochSeconds `json:"startDate"`
	StopDate        EpochSeconds `json:"stopDate"`
	RedriveDate     EpochSeconds `json:"redriveDate"`
	Input           string       `json:"input"`
	InputDetails    dataDetails  `json:"inputDetails"`
	Error           string       `json:"error"`
	Cause           string       `json:"cause"`
	RedriveCount    int          `json:"redriveCount"`
}

// maxPriorRetries bounds the retries a poll's prior summary may claim, so
// that the count folded on from it stays a count (Step Functions keeps at
// most 25,000 events per execution).
const maxPriorRetries = 1 << 31

// MapPoll maps a Step Functions poll payload to one canonical event: the
// described status, refined by the history (backing-off, retry count, the
// latest error).
func (m *Mapper) MapPoll(body []byte) (substate.EventData, error) {
	var p pollPayload
	if err := decode(body, &p); err != nil {
		return substate.EventData{}, substate.WrapError(substate.EINVALID, err, "decode step functions poll")
	}
	x := p.Execution
	if x == nil || x.ExecutionARN == "" || x.Status == "" {
		return substate.EventData{}, substate.Errorf(substate.EINVALID, "step functions poll has no execution arn or status")
	}
	var prior HistorySummary
	if p.History.Prior != nil {
		prior = *p.History.Prior
		prior.Retries = min(max(prior.Retries, 0), maxPriorRetries)
	}
	h := historyOf(prior.Fold(p.History.Events))
	cond := CondNone
	if x.Status == "RUNNING" && h.BackingOff {
		cond = CondTaskFailureTip
	}
	out := substate.EventData{
		Provider:           substate.ProviderStepFunctions,
		ExecutionID:        x.ExecutionARN,
		Workflow:           stateMachineName(x.StateMachineARN, x.ExecutionARN),
		ProviderState:      x.Status,
		ExecutionStartedAt: x.StartDate.Time,
		RetryCount:         h.RetryCount,
		RetryCountKnown:    h.Events > 0,
		Step:               pollStep(body),
	}
	apply(&out, m.resolve(substate.ProviderStepFunctions, x.Status, cond))
	pollError(&out, x, &h)
	out.OccurredAt = pollOccurredAt(&out, x, &h, p.PolledAt)
	out.Revision = StepFunctionsRevision(x.RedriveCount, sfnRank(x.Status, out.Terminal), h.NewestEventID)
	src := tenantSource{provider: substate.ProviderStepFunctions, execution: x.ExecutionARN, name: x.Name, input: sfnInput(x.Input, x.InputDetails)}
	if src.name == "" {
		src.name = executionName(x.ExecutionARN)
	}
	tenant, err := m.tenants.resolve(&src)
	if err != nil {
		return substate.EventData{}, err
	}
	out.TenantID = tenant
	return out, nil
}

// pollError fills the error of a failed or backing-off execution: the
// execution's own error when it has one, else the newest failure in history.
func pollError(out *substate.EventData, x *describeExecution, h *History) {
	if out.SubState != substate.StateFailed && out.SubState != substate.StateBackingOff {
		return
	}
	if out.SubState == substate.StateFailed && (x.Error != "" || x.Cause != "") {
		out.ErrorType, out.ErrorMessage = x.Error, sfnErrorMessage(x.Error, x.Cause)
		return
	}
	out.ErrorType, out.ErrorMessage = h.LastError, h.LastCause
}

// pollOccurredAt is when the polled status happened: the stop date of a
// terminal status, the failure being backed off from, the newest history
// event of a running execution, else the redrive or start date or poll time.
func pollOccurredAt(out *substate.EventData, x *describeExecution, h *History, polledAt time.Time) time.Time {
	switch {
	case out.Terminal:
		return firstSet(x.StopDate.Time, h.NewestAt, polledAt)
	case out.SubState == substate.StateBackingOff:
		return firstSet(h.LastFailureAt, h.NewestAt, polledAt)
	}
	return firstSet(h.NewestAt, x.RedriveDate.Time, x.StartDate.Time, polledAt)
}
