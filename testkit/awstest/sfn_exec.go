package awstest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Execution is one Step Functions execution as the server keeps it. Tests
// read it with (*Server).Execution and change it with the hooks.
type Execution struct {
	ARN             string
	StateMachineARN string
	Name            string
	Status          string // RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED, PENDING_REDRIVE
	Input           string
	Output          string
	Error           string
	Cause           string
	StartDate       time.Time
	StopDate        time.Time
	RedriveDate     time.Time
	RedriveCount    int
	// TraceHeader is the X-Ray trace header the execution was started
	// with, which DescribeExecution returns.
	TraceHeader string
	// History holds the history events, oldest first, exactly as
	// GetExecutionHistory returns them.
	History []json.RawMessage
}

func (e *Execution) clone() Execution {
	c := *e
	c.History = slices.Clone(e.History)
	return c
}

// appendEvent adds a history event of the given type with one details member.
func (e *Execution) appendEvent(at time.Time, typ, detailsKey string, details any) {
	n := len(e.History)
	ev := map[string]any{"timestamp": epoch{at}, "type": typ, "id": n + 1, "previousEventId": n}
	if detailsKey != "" {
		ev[detailsKey] = details
	}
	b, _ := json.Marshal(ev)
	e.History = append(e.History, b)
}

func init() {
	register(sfnPrefix+"StartExecution", (*Server).startExecution)
	register(sfnPrefix+"DescribeExecution", (*Server).describeExecution)
	register(sfnPrefix+"StopExecution", (*Server).stopExecution)
	register(sfnPrefix+"GetExecutionHistory", (*Server).getExecutionHistory)
}

// ExecutionARN returns the ARN of the execution name of the state machine
// whose ARN is machineARN.
func ExecutionARN(machineARN, name string) string {
	return strings.Replace(machineARN, ":stateMachine:", ":execution:", 1) + ":" + name
}

func (s *Server) startExecution(body []byte) (any, error) {
	var in struct {
		StateMachineARN string `json:"stateMachineArn"`
		Name            string `json:"name"`
		Input           string `json:"input"`
		TraceHeader     string `json:"traceHeader"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.Input == "" {
		in.Input = "{}"
	}
	if !json.Valid([]byte(in.Input)) {
		return nil, errorf("InvalidExecutionInput", "Invalid execution input: not valid JSON")
	}
	if err := checkARN(in.StateMachineARN, "stateMachine", 7); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.Name == "" {
		in.Name = s.newID()
	}
	if err := checkName(in.Name); err != nil {
		return nil, err
	}
	if _, ok := s.machines[in.StateMachineARN]; !ok {
		return nil, errorf("StateMachineDoesNotExist", "State Machine Does Not Exist: '%s'", in.StateMachineARN)
	}
	a := ExecutionARN(in.StateMachineARN, in.Name)
	// Step Functions: the same name and input while the execution runs
	// returns it again; a closed execution or another input is a conflict.
	if e, ok := s.executions[a]; ok {
		if e.Status != "RUNNING" || e.Input != in.Input {
			return nil, errorf("ExecutionAlreadyExists", "Execution Already Exists: '%s'", a)
		}
		return map[string]any{"executionArn": a, "startDate": epoch{e.StartDate}}, nil
	}
	e := &Execution{ARN: a, StateMachineARN: in.StateMachineARN, Name: in.Name, Status: "RUNNING", Input: in.Input, StartDate: s.Now(), TraceHeader: in.TraceHeader}
	e.appendEvent(e.StartDate, "ExecutionStarted", "executionStartedEventDetails",
		map[string]any{"input": e.Input, "inputDetails": map[string]bool{"truncated": false}})
	s.executions[a] = e
	return map[string]any{"executionArn": a, "startDate": epoch{e.StartDate}}, nil
}

// describeOutput is a DescribeExecution response.
type describeOutput struct {
	ExecutionARN    string          `json:"executionArn"`
	StateMachineARN string          `json:"stateMachineArn"`
	Name            string          `json:"name"`
	Status          string          `json:"status"`
	StartDate       epoch           `json:"startDate"`
	StopDate        epoch           `json:"stopDate,omitzero"`
	Input           string          `json:"input"`
	InputDetails    map[string]bool `json:"inputDetails"`
	Output          string          `json:"output,omitempty"`
	Error           string          `json:"error,omitempty"`
	Cause           string          `json:"cause,omitempty"`
	RedriveCount    int             `json:"redriveCount"`
	RedriveDate     epoch           `json:"redriveDate,omitzero"`
	RedriveStatus   string          `json:"redriveStatus"`
	// RedriveStatusReason says why an execution cannot be redriven.
	RedriveStatusReason string `json:"redriveStatusReason,omitempty"`
	TraceHeader         string `json:"traceHeader,omitempty"`
}

func (s *Server) describeExecution(body []byte) (any, error) {
	e, err := s.lookupExecution(body)
	if err != nil {
		return nil, err
	}
	out := describeOutput{
		ExecutionARN: e.ARN, StateMachineARN: e.StateMachineARN, Name: e.Name, Status: e.Status,
		StartDate: epoch{e.StartDate}, StopDate: epoch{e.StopDate}, Input: e.Input,
		InputDetails: map[string]bool{"included": true}, Output: e.Output, Error: e.Error, Cause: e.Cause,
		RedriveCount: e.RedriveCount, RedriveDate: epoch{e.RedriveDate}, TraceHeader: e.TraceHeader,
	}
	out.RedriveStatus, out.RedriveStatusReason = redriveStatus(&e, s.Now())
	return out, nil
}

// lookupExecution decodes {"executionArn": …} and returns a copy of the
// execution it names.
func (s *Server) lookupExecution(body []byte) (Execution, error) {
	var in struct {
		ARN string `json:"executionArn"`
	}
	if err := decode(body, &in); err != nil {
		return Execution{}, err
	}
	if err := checkARN(in.ARN, "execution", 8); err != nil {
		return Execution{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.executions[in.ARN]
	if !ok {
		return Execution{}, errorf("ExecutionDoesNotExist", "Execution Does Not Exist: '%s'", in.ARN)
	}
	return e.clone(), nil
}

func (s *Server) stopExecution(body []byte) (any, error) {
	var in struct {
		ARN   string `json:"executionArn"`
		Error string `json:"error"`
		Cause string `json:"cause"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkARN(in.ARN, "execution", 8); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.executions[in.ARN]
	if !ok {
		return nil, errorf("ExecutionDoesNotExist", "Execution Does Not Exist: '%s'", in.ARN)
	}
	// Stopping a closed execution changes nothing.
	if e.Status == "RUNNING" || e.Status == "PENDING_REDRIVE" {
		e.Status, e.Error, e.Cause, e.StopDate = "ABORTED", in.Error, in.Cause, s.Now()
		e.appendEvent(e.StopDate, "ExecutionAborted", "executionAbortedEventDetails",
			map[string]string{"error": in.Error, "cause": in.Cause})
	}
	return map[string]any{"stopDate": epoch{e.StopDate}}, nil
}

func (s *Server) getExecutionHistory(body []byte) (any, error) {
	var in struct {
		MaxResults           int    `json:"maxResults"`
		ReverseOrder         bool   `json:"reverseOrder"`
		NextToken            string `json:"nextToken"`
		IncludeExecutionData *bool  `json:"includeExecutionData"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	e, err := s.lookupExecution(body)
	if err != nil {
		return nil, err
	}
	events := e.History
	if in.ReverseOrder {
		slices.Reverse(events)
	}
	from, to, next, err := page(len(events), in.MaxResults, in.NextToken)
	if err != nil {
		return nil, err
	}
	events = events[from:to]
	if in.IncludeExecutionData != nil && !*in.IncludeExecutionData {
		events = withoutData(events)
	}
	out := map[string]any{"events": events}
	if next != "" {
		out["nextToken"] = next
	}
	return out, nil
}

// withoutData drops the input and output of every event's details, as
// includeExecutionData=false does.
func withoutData(events []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, len(events))
	for i, raw := range events {
		var ev map[string]json.RawMessage
		if json.Unmarshal(raw, &ev) != nil {
			out[i] = raw
			continue
		}
		for k, v := range ev {
			var details map[string]json.RawMessage
			if !strings.HasSuffix(k, "EventDetails") || json.Unmarshal(v, &details) != nil {
				continue
			}
			delete(details, "input")
			delete(details, "output")
			ev[k], _ = json.Marshal(details)
		}
		out[i], _ = json.Marshal(ev)
	}
	return out
}

// errNoExecution is returned by the hooks for an unknown execution ARN.
func errNoExecution(a string) error { return fmt.Errorf("awstest: no execution %s", a) }
