package awstest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// RedriveWindow is how long after it stopped Step Functions lets an
// execution be redriven.
const RedriveWindow = 14 * 24 * time.Hour

func init() {
	register(sfnPrefix+"RedriveExecution", (*Server).redriveExecution)
	register(sfnPrefix+"UpdateStateMachine", (*Server).updateStateMachine)
}

// Versions returns the versions published of the state machine with the
// given ARN, oldest first: each one's definition.
func (s *Server) Versions(machineARN string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.machines[machineARN]; ok {
		return append([]string(nil), m.Versions...)
	}
	return nil
}

// Deny answers the next n calls of op with the AccessDeniedException Step
// Functions sends when the caller's IAM policy lacks states:<op>.
func (s *Server) Deny(op string, n int) {
	s.Fail(op, n, http.StatusBadRequest, "AccessDeniedException", fmt.Sprintf(
		"User: arn:aws:sts::%s:assumed-role/substate/worker is not authorized to perform: states:%s because no identity-based policy allows the states:%s action",
		AccountID, op, op))
}

// redriveStatus is a DescribeExecution's redriveStatus and its reason, in
// the words Step Functions' API reference gives for each.
func redriveStatus(e *Execution, now time.Time) (status, reason string) {
	switch e.Status {
	case "FAILED", "TIMED_OUT", "ABORTED":
	case "SUCCEEDED":
		return "NOT_REDRIVABLE", "Execution is SUCCEEDED and cannot be redriven"
	default:
		return "NOT_REDRIVABLE", "Execution is " + e.Status + " and cannot be redriven"
	}
	if now.Sub(e.StopDate) > RedriveWindow {
		return "NOT_REDRIVABLE", "Execution redrivable period exceeded."
	}
	return "REDRIVABLE", ""
}

// Step Functions answers a redrive's client token again with the same
// answer instead of redriving again: for RedriveTokenTime after the token
// is first used, and only the last RedriveTokens tokens that redrove an
// execution.
const (
	RedriveTokenTime = 15 * time.Minute
	RedriveTokens    = 10
)

// redriveToken is a client token a redrive of an execution succeeded with.
type redriveToken struct {
	token string
	at    time.Time // when it was first used
	date  time.Time // the redrive date it answered
}

func (s *Server) redriveExecution(body []byte) (any, error) {
	var in struct {
		ClientToken string `json:"clientToken"`
	}
	_ = decode(body, &in)
	e, err := s.lookupExecution(body)
	if err != nil {
		return nil, err
	}
	if date, ok := s.redrivenWith(e.ARN, in.ClientToken); ok {
		return map[string]any{"redriveDate": epoch{date}}, nil
	}
	if st, reason := redriveStatus(&e, s.Now()); st != "REDRIVABLE" {
		return nil, errorf("ExecutionNotRedrivable", "Execution not redrivable: '%s': %s", e.ARN, reason)
	}
	if err := s.Redrive(e.ARN); err != nil {
		return nil, err
	}
	e, _ = s.Execution(e.ARN)
	s.rememberRedrive(e.ARN, in.ClientToken, e.RedriveDate)
	return map[string]any{"redriveDate": epoch{e.RedriveDate}}, nil
}

// redrivenWith returns the redrive date a client token already redrove
// the execution with, when Step Functions still answers it.
func (s *Server) redrivenWith(arn, token string) (time.Time, bool) {
	if token == "" {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.redriveTokens[arn] {
		if t.token == token && s.Now().Sub(t.at) <= RedriveTokenTime {
			return t.date, true
		}
	}
	return time.Time{}, false
}

// rememberRedrive keeps the client token a redrive succeeded with, among
// the execution's last RedriveTokens.
func (s *Server) rememberRedrive(arn, token string, date time.Time) {
	if token == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.redriveTokens == nil {
		s.redriveTokens = map[string][]redriveToken{}
	}
	kept := append(s.redriveTokens[arn], redriveToken{token: token, at: s.Now(), date: date})
	s.redriveTokens[arn] = kept[max(0, len(kept)-RedriveTokens):]
}

func (s *Server) updateStateMachine(body []byte) (any, error) {
	var in struct {
		ARN                string `json:"stateMachineArn"`
		Definition         string `json:"definition"`
		RoleARN            string `json:"roleArn"`
		Publish            bool   `json:"publish"`
		VersionDescription string `json:"versionDescription"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkARN(in.ARN, "stateMachine", 7); err != nil {
		return nil, err
	}
	if in.Definition != "" {
		if err := checkDefinition(in.Definition); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.machines[in.ARN]
	if !ok {
		return nil, errorf("StateMachineDoesNotExist", "State Machine Does Not Exist: '%s'", in.ARN)
	}
	if in.Definition != "" {
		m.Definition = in.Definition
	}
	if in.RoleARN != "" {
		m.RoleARN = in.RoleARN
	}
	m.Revision++
	now := s.Now()
	out := map[string]any{"updateDate": epoch{now}, "revisionId": strconv.Itoa(m.Revision)}
	if in.Publish {
		m.Versions = append(m.Versions, m.Definition)
		out["stateMachineVersionArn"] = m.ARN + ":" + strconv.Itoa(len(m.Versions))
	}
	return out, nil
}
