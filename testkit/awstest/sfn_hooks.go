package awstest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// AddStateMachine creates a state machine directly, without a request.
func (s *Server) AddStateMachine(name, definition, roleARN string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := StateMachineARN(name)
	s.machines[a] = &stateMachine{ARN: a, Name: name, Definition: definition, RoleARN: roleARN, Type: "STANDARD", Created: s.Now()}
	return a
}

// AddExecution stores e as it is (its ARN is the key), without a request.
func (s *Server) AddExecution(e Execution) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := e.clone()
	s.executions[e.ARN] = &c
}

// Execution returns a copy of the execution with the given ARN.
func (s *Server) Execution(arn string) (Execution, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.executions[arn]
	if !ok {
		return Execution{}, false
	}
	return e.clone(), true
}

// UpdateExecution calls fn with the stored execution under the server's
// lock, so fn may change any field.
func (s *Server) UpdateExecution(arn string, fn func(*Execution)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.executions[arn]
	if !ok {
		return errNoExecution(arn)
	}
	fn(e)
	return nil
}

// SetHistory replaces the execution's history with events, oldest first.
func (s *Server) SetHistory(arn string, events []json.RawMessage) error {
	return s.UpdateExecution(arn, func(e *Execution) { e.History = slices.Clone(events) })
}

// closingEvents are the history event each terminal status appends, with
// the member holding its details.
var closingEvents = map[string][2]string{
	"SUCCEEDED": {"ExecutionSucceeded", "executionSucceededEventDetails"},
	"FAILED":    {"ExecutionFailed", "executionFailedEventDetails"},
	"TIMED_OUT": {"ExecutionTimedOut", "executionTimedOutEventDetails"},
	"ABORTED":   {"ExecutionAborted", "executionAbortedEventDetails"},
}

// SetStatus moves the execution to status with the given error and cause,
// as the service would when the execution ends: a terminal status sets the
// stop date and appends its Execution* history event.
func (s *Server) SetStatus(arn, status, errName, cause string) error {
	if status != "RUNNING" && status != "PENDING_REDRIVE" && closingEvents[status][0] == "" {
		return fmt.Errorf("awstest: unknown execution status %q", status)
	}
	now := s.Now()
	return s.UpdateExecution(arn, func(e *Execution) {
		e.Status, e.Error, e.Cause = status, errName, cause
		ev, ok := closingEvents[status]
		if !ok {
			return
		}
		e.StopDate = now
		details := map[string]string{"error": errName, "cause": cause}
		if status == "SUCCEEDED" {
			details = map[string]string{"output": e.Output}
		}
		e.appendEvent(now, ev[0], ev[1], details)
	})
}

// Redrive restarts a FAILED, TIMED_OUT or ABORTED execution under the same
// ARN, as RedriveExecution does: RUNNING again, redrive count + 1, redrive
// date set, an ExecutionRedriven history event appended.
func (s *Server) Redrive(arn string) error {
	now := s.Now()
	var err error
	uerr := s.UpdateExecution(arn, func(e *Execution) {
		if _, ok := closingEvents[e.Status]; !ok || e.Status == "SUCCEEDED" {
			err = fmt.Errorf("awstest: execution %s is %s and cannot be redriven", arn, e.Status)
			return
		}
		e.Status, e.Error, e.Cause, e.StopDate = "RUNNING", "", "", time.Time{}
		e.RedriveCount++
		e.RedriveDate = now
		e.appendEvent(now, "ExecutionRedriven", "executionRedrivenEventDetails", map[string]int{"redriveCount": e.RedriveCount})
	})
	if uerr != nil {
		return uerr
	}
	return err
}
