package mapping

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/substatehq/substate"
)

// The EventBridge envelope values of a Step Functions status change.
const (
	EventBridgeSource     = "aws.states"
	EventBridgeDetailType = "Step Functions Execution Status Change"
)

// eventBridgeEvent is an EventBridge event carrying a Step Functions
// execution status change. Only the fields mapping reads are declared.
type eventBridgeEvent struct {
	ID         string         `json:"id"`
	DetailType string         `json:"detail-type"`
	Source     string         `json:"source"`
	Time       time.Time      `json:"time"`
	ReplayName string         `json:"replay-name"` // set on events replayed from an archive
	Detail     sfnStatusEvent `json:"detail"`      // zero when absent or null
}

// sfnStatusEvent is the detail of a status change; every field after output
// is optional.
type sfnStatusEvent struct {
	ExecutionARN    string      `json:"executionArn"`
	StateMachineARN string      `json:"stateMachineArn"`
	Name            string      `json:"name"`
	Status          string      `json:"status"`
	StartDate       epochMillis `json:"startDate"`
	StopDate        epochMillis `json:"stopDate"`
	Input           string      `json:"input"`
	InputDetails    dataDetails `json:"inputDetails"`
	RedriveCount    int         `json:"redriveCount"`
	RedriveDate     epochMillis `json:"redriveDate"`
	Error           string      `json:"error"`
	Cause           string      `json:"cause"`
}

// dataDetails says whether input or output was included in an event.
// The decoded types are values, not pointers: each pointer was an
// allocation per event, and absent, null and zero read the same.
type dataDetails struct {
	Included included `json:"included"`
}

// included is a payload's "included" flag: unknown when the event does
// not say (absent or null).
type included uint8

const (
	includedUnknown included = iota
	includedTrue
	includedFalse
)

// UnmarshalJSON implements json.Unmarshaler: true, false or null, and
// anything else is refused as it is for a *bool.
func (v *included) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*v = includedTrue
	case "false":
		*v = includedFalse
	case "null":
		*v = includedUnknown
	default:
		return substate.Errorf(substate.EINVALID, "included: want a JSON boolean, got %.20s", b)
	}
	return nil
}

// eventBridgeEvents are the decoded events MapEventBridge reuses: one
// decoded into through an interface escapes, an allocation per event.
// What the mapping keeps of one is its strings, which the decoder made.
var eventBridgeEvents = sync.Pool{New: func() any { return new(eventBridgeEvent) }}

// MapEventBridge maps an EventBridge "Step Functions Execution Status
// Change" event to its canonical event.
func (m *Mapper) MapEventBridge(body []byte) (substate.EventData, error) {
	ev := eventBridgeEvents.Get().(*eventBridgeEvent)
	defer func() {
		*ev = eventBridgeEvent{} // the decoder merges into what it is given
		eventBridgeEvents.Put(ev)
	}()
	if err := decode(body, ev); err != nil {
		return substate.EventData{}, substate.WrapError(substate.EINVALID, err, "decode eventbridge event")
	}
	if ev.Source != EventBridgeSource || ev.DetailType != EventBridgeDetailType {
		return substate.EventData{}, substate.Errorf(substate.EINVALID,
			"eventbridge event %q is not a step functions status change (source %q, detail-type %q)",
			ev.ID, ev.Source, ev.DetailType)
	}
	d := &ev.Detail
	if d.ExecutionARN == "" || d.Status == "" {
		return substate.EventData{}, substate.Errorf(substate.EINVALID,
			"eventbridge event %q: detail has no executionArn or status", ev.ID)
	}
	out := substate.EventData{
		Provider:           substate.ProviderStepFunctions,
		ExecutionID:        d.ExecutionARN,
		Workflow:           stateMachineName(d.StateMachineARN, d.ExecutionARN),
		ProviderState:      d.Status,
		ErrorType:          d.Error,
		ErrorMessage:       sfnErrorMessage(d.Error, d.Cause),
		ExecutionStartedAt: d.StartDate.Time,
	}
	r := m.resolve(substate.ProviderStepFunctions, d.Status, CondNone)
	apply(&out, r)
	out.OccurredAt = sfnOccurredAt(out.Terminal, d.StopDate.Time, d.RedriveDate.Time, d.StartDate.Time, ev.Time)
	out.Revision = StepFunctionsRevision(d.RedriveCount, sfnRank(d.Status, out.Terminal), 0)
	src := tenantSource{provider: substate.ProviderStepFunctions, execution: d.ExecutionARN, name: d.Name, input: sfnInput(d.Input, d.InputDetails)}
	if src.name == "" {
		src.name = executionName(d.ExecutionARN)
	}
	tenant, err := m.tenants.resolve(&src)
	if err != nil {
		return substate.EventData{}, err
	}
	out.TenantID = tenant
	return out, nil
}

// sfnRank orders a status inside one redrive epoch: PENDING_REDRIVE, then
// RUNNING (and what history derives from it), then the terminal statuses.
func sfnRank(status string, terminal bool) int {
	switch {
	case terminal:
		return RankTerminal
	case status == "PENDING_REDRIVE":
		return RankPending
	}
	return RankActive
}

// sfnOccurredAt is when a status happened: the stop date of a terminal
// status, else the redrive or start date, else the fallback (envelope time).
func sfnOccurredAt(terminal bool, stop, redrive, start, fallback time.Time) time.Time {
	if terminal {
		return firstSet(stop, fallback, redrive, start)
	}
	return firstSet(redrive, start, fallback)
}

// sfnInput returns the execution input JSON text, or nil when it was
// excluded or absent.
func sfnInput(input string, details dataDetails) []byte {
	if input == "" || details.Included == includedFalse {
		return nil
	}
	return []byte(input)
}

// stateMachineName returns the state machine's name from its ARN
// (arn:aws:states:region:account:stateMachine:name[:version]) or, failing
// that, from the execution ARN (…:execution:machine:name).
func stateMachineName(machineARN, executionARN string) string {
	if n := arnField(machineARN, 6); n != "" {
		return n
	}
	return arnField(executionARN, 6)
}

// executionName returns the execution name from an execution ARN.
func executionName(executionARN string) string { return arnField(executionARN, 7) }

// arnField returns the i-th colon-separated field of an ARN, or "".
func arnField(arn string, i int) string {
	for range i {
		_, rest, ok := strings.Cut(arn, ":")
		if !ok {
			return ""
		}
		arn = rest
	}
	field, _, _ := strings.Cut(arn, ":")
	return field
}

// sfnErrorMessage is the human message of a Step Functions error: a
// stop's cause as every provider words it (substate.StopMessage), the
// errorMessage inside cause when cause is JSON, else "error: cause", or
// whichever of the two is set.
func sfnErrorMessage(errName, cause string) string {
	if errName == substate.StopErrorType {
		return substate.StopMessage(cause)
	}
	if msg := firstLine(causeMessage(cause)); msg != "" {
		return msg
	}
	cause = firstLine(cause)
	switch {
	case errName != "" && cause != "":
		return errName + ": " + cause
	case cause != "":
		return cause
	}
	return firstLine(errName)
}

// causeMessage returns the human message inside a JSON cause
// ({"errorMessage": …} from Lambda, {"message": …} from other services),
// or "" when cause is not such JSON.
func causeMessage(cause string) string {
	s := strings.TrimSpace(cause)
	if len(s) < 2 || s[0] != '{' || !json.Valid([]byte(s)) {
		return ""
	}
	for _, key := range [...]string{"errorMessage", "message", "Message"} {
		if v, ok := member([]byte(s), key); ok {
			if msg, ok := jsonString(v); ok && msg != "" {
				return msg
			}
		}
	}
	return ""
}
