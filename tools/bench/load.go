package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// Bench load shapes: what the events of a scenario do to the view.
const (
	loadChanges    = "changes"      // every event changes its tenant's view
	loadHalfNoop   = "half-noop"    // every change followed by a duplicate delivery or an unchanged event
	loadOutOfOrder = "out-of-order" // each tenant's events arrive with neighbours swapped
	loadRetries    = "retries"      // every execution fails an attempt, backs off and retries
)

// benchEvent is one raw event of a bench load: a Step Functions status
// change of one execution of one tenant, as EventBridge delivers it.
type benchEvent struct {
	tenant int
	exec   int    // the execution's number in the load, unique across tenants
	status string // RUNNING, SUCCEEDED or FAILED; of an engine execution, an Engine* status
	// engine marks an execution of the built-in engine (the retries load):
	// step is its status event's number in retrySteps, from 0.
	engine bool
	step   int
	// redelivery numbers the deliveries of the same status change: 0 is the
	// first. A redelivery with the same id is dropped by JetStream's
	// duplicate window; one with a new id (a second source, a poll)
	// reaches the view, which finds it stale.
	redelivery int
	sameID     bool
}

// key identifies the status change an event carries: the view applies it
// once, so ingest → view latency is measured per key.
func (e benchEvent) key() int {
	if e.engine {
		return len(retrySteps)*e.exec + e.step
	}
	if e.status == "RUNNING" {
		return 2 * e.exec
	}
	return 2*e.exec + 1
}

// id is the EventBridge event id.
func (e benchEvent) id() string {
	if e.sameID || e.redelivery == 0 {
		return "bench-" + strconv.Itoa(e.key())
	}
	return "bench-" + strconv.Itoa(e.key()) + "-r" + strconv.Itoa(e.redelivery)
}

// benchLoad generates the events of a scenario over a number of tenants.
type benchLoad struct {
	shape   string
	tenants int
	start   time.Time // the first execution's start
}

// events returns n events of the load, in the order they are sent. In every
// shape each tenant runs executions one after the other: RUNNING, then
// SUCCEEDED or FAILED (with a real error), then the next execution.
func (l benchLoad) events(n int, rng *rand.Rand) []benchEvent {
	switch l.shape {
	case loadHalfNoop:
		return l.halfNoop(n)
	case loadOutOfOrder:
		return l.outOfOrder(n, rng)
	case loadRetries:
		return l.retries(n)
	}
	return l.changes(n, 0)
}

// changes returns n events, tenants in turn, starting at the tenant's
// first change number from (each tenant's own count of changes).
func (l benchLoad) changes(n, from int) []benchEvent {
	out := make([]benchEvent, n)
	for i := range out {
		t, j := i%l.tenants, from+i/l.tenants
		out[i] = benchEvent{tenant: t, exec: (j/2)*l.tenants + t, status: "RUNNING"}
		if j%2 == 1 {
			out[i].status = terminalStatus(j / 2)
		}
	}
	return out
}

// terminalStatus alternates success and failure over a tenant's executions.
func terminalStatus(run int) string {
	if run%2 == 0 {
		return "SUCCEEDED"
	}
	return "FAILED"
}

// retrySteps are the status events of one execution of the retries load,
// as the engine emits them for a task whose first attempt fails with a
// retryable error: running, error (the provider's message), backing-off
// (the same message, one retry, the next retry's time), running again
// (attempt 2), then succeeded or, every other execution, failed with the
// provider's final error. "" is the terminal step.
var retrySteps = [...]string{substate.EngineRunning, substate.EngineError, substate.EngineBackingOff, substate.EngineRunning, ""}

// retries returns n events of engine executions, tenants in turn, each
// execution going through retrySteps: two of its five changes set an
// error and one counts a retry.
func (l benchLoad) retries(n int) []benchEvent {
	out := make([]benchEvent, n)
	for i := range out {
		t, j := i%l.tenants, i/l.tenants
		run := j / len(retrySteps)
		e := benchEvent{tenant: t, exec: run*l.tenants + t, engine: true, step: j % len(retrySteps)}
		if e.status = retrySteps[e.step]; e.status == "" {
			e.status = substate.EngineSucceeded
			if run%2 == 1 {
				e.status = substate.EngineFailed
			}
		}
		out[i] = e
	}
	return out
}

// halfNoop follows every change with a no-op: in turn a redelivery of the
// same event (same id, dropped at ingest) and the same change under a new
// id (stale at the view).
func (l benchLoad) halfNoop(n int) []benchEvent {
	out := make([]benchEvent, 0, n)
	for i, e := range l.changes((n+1)/2, 0) {
		out = append(out, e)
		dup := e
		dup.redelivery, dup.sameID = 1, i%2 == 0
		out = append(out, dup)
	}
	return out[:n]
}

// outOfOrder sends the changes with, for every tenant, each event swapped
// with the tenant's previous one with probability one half: a terminal
// event before its RUNNING, an execution's last event after the next one's
// first, or an event carried further back by several swaps. The order
// rules make the final view the same as in order.
func (l benchLoad) outOfOrder(n int, rng *rand.Rand) []benchEvent {
	out := l.changes(n, 0)
	for i := l.tenants; i < len(out); i++ {
		if rng.IntN(2) == 0 {
			out[i], out[i-l.tenants] = out[i-l.tenants], out[i]
		}
	}
	return out
}

// Constant parts of a bench event.
const (
	benchAccount = "123456789012"
	benchMachine = "arn:aws:states:us-east-1:" + benchAccount + ":stateMachine:provision-tenant"
	benchExecPfx = "arn:aws:states:us-east-1:" + benchAccount + ":execution:provision-tenant:e"
)

// tenantName is the id of the bench's i-th tenant.
func tenantName(i int) string { return "tenant-" + strconv.Itoa(i) }

// raw returns the event as an EventBridge delivery of about 0.7 KB: the
// fields Step Functions sends, the tenant in the execution input.
func (l benchLoad) raw(e benchEvent, buf []byte) substate.RawEvent { // appends to buf
	if e.engine {
		return l.rawEngine(e, buf)
	}
	started := l.start.Add(time.Duration(e.exec) * time.Millisecond)
	arn := benchExecPfx + strconv.Itoa(e.exec)
	b := append(buf[:0], `{"version":"0","id":"`...)
	b = append(b, e.id()...)
	b = append(b, `","detail-type":"Step Functions Execution Status Change","source":"aws.states","account":"`+benchAccount+`","time":"`...)
	b = started.Add(time.Second).UTC().AppendFormat(b, time.RFC3339)
	b = append(b, `","region":"us-east-1","resources":["`...)
	b = append(b, arn...)
	b = append(b, `"],"detail":{"executionArn":"`...)
	b = append(b, arn...)
	b = append(b, `","stateMachineArn":"`+benchMachine+`","name":"e`...)
	b = strconv.AppendInt(b, int64(e.exec), 10)
	b = append(b, `","status":"`...)
	b = append(b, e.status...)
	b = append(b, `","startDate":`...)
	b = strconv.AppendInt(b, started.UnixMilli(), 10)
	b = append(b, `,"stopDate":`...)
	if e.status == "RUNNING" {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, started.Add(time.Second).UnixMilli(), 10)
	}
	b = append(b, `,"input":"{\"tenantId\":\"`...)
	b = append(b, tenantName(e.tenant)...)
	b = append(b, `\",\"plan\":\"standard\",\"region\":\"eu-west-1\"}","output":null,"inputDetails":{"included":true},"outputDetails":null,"redriveCount":0,"error":`...)
	if e.status == "FAILED" {
		b = append(b, `"States.TaskFailed","cause":"{\"errorMessage\":\"quota exceeded for tenant `...)
		b = append(b, tenantName(e.tenant)...)
		b = append(b, ` in eu-west-1\",\"errorType\":\"QuotaExceeded\"}"}}`...)
	} else {
		b = append(b, `null,"cause":null}}`...)
	}
	return substate.RawEvent{Kind: substate.RawEventBridge, ID: e.id(), Body: b}
}

// The provider's error texts of the retries load, as a provisioning task
// reports them: the first attempt's (retried) and the final one of a
// failed execution. %s is the tenant.
const (
	benchAttemptErrorType = "Provisioner.Unavailable"
	benchAttemptError     = "POST https://provisioner.internal:8443/v1/tenants/%s/accounts: 503 Service Unavailable: upstream connect error or disconnect/reset before headers. reset reason: connection termination"
	benchFinalErrorType   = "QuotaExceeded"
	benchFinalError       = "quota exceeded for tenant %s in eu-west-1: 50 of 50 accounts in use; ask for a higher limit"
)

// rawEngine returns an engine execution's status event as the engine
// publishes it (a substate.EngineEvent in JSON, about 0.5 KB).
func (l benchLoad) rawEngine(e benchEvent, buf []byte) substate.RawEvent {
	started := l.start.Add(time.Duration(e.exec) * time.Millisecond)
	tenant := tenantName(e.tenant)
	ev := substate.EngineEvent{
		ID: e.id(), TenantID: tenant, ExecutionID: benchEngineExec(e.exec), Workflow: "provision-tenant",
		Seq: uint64(e.step) + 1, Status: e.status, State: "CreateAccount", Attempt: 1,
		StartedAt: started, Time: started.Add(time.Duration(e.step) * 100 * time.Millisecond),
	}
	if e.step >= 2 { // the backing-off event counts the retry
		ev.RetryCount = 1
	}
	if e.step >= 3 {
		ev.Attempt = 2
	}
	switch e.status {
	case substate.EngineError, substate.EngineBackingOff:
		ev.ErrorType, ev.Error = benchAttemptErrorType, fmt.Sprintf(benchAttemptError, tenant)
		if e.status == substate.EngineBackingOff {
			ev.NextRetryAt = ev.Time.Add(2 * time.Second)
		}
	case substate.EngineFailed:
		ev.ErrorType, ev.Error = benchFinalErrorType, fmt.Sprintf(benchFinalError, tenant)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err) // a struct of plain fields always marshals
	}
	return substate.RawEvent{Kind: substate.RawEngine, ID: e.id(), Body: append(buf[:0], b...)}
}

// benchEngineExec is the id of the bench's i-th engine execution, as long
// as a name the engine generates (the workflow, "-" and 12 hex digits).
func benchEngineExec(i int) string { return fmt.Sprintf("%s%012x", benchEnginePfx, i) }

// benchEnginePfx begins the id of every engine execution of the bench.
const benchEnginePfx = "provision-tenant-"

// keyOf returns the key of the status change a canonical event of the
// bench carries, or -1 for an event the bench did not send.
func keyOf(ev *substate.EventData) int {
	if ev.Provider == substate.ProviderEngine {
		hex, ok := strings.CutPrefix(ev.ExecutionID, benchEnginePfx)
		exec, err := strconv.ParseInt(hex, 16, 64)
		if !ok || err != nil || ev.Revision < 1 || int(ev.Revision) > len(retrySteps) {
			return -1
		}
		return len(retrySteps)*int(exec) + int(ev.Revision) - 1
	}
	i := strings.LastIndexByte(ev.ExecutionID, ':')
	if i < 0 || i+1 >= len(ev.ExecutionID) || ev.ExecutionID[i+1] != 'e' {
		return -1
	}
	exec, err := strconv.Atoi(ev.ExecutionID[i+2:])
	if err != nil {
		return -1
	}
	if ev.ProviderState == "RUNNING" {
		return 2 * exec
	}
	return 2*exec + 1
}
