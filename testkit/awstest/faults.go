package awstest

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"
)

// Call is one request the server received, as its call log keeps it.
type Call struct {
	// Op is the operation's short name ("GetExecutionHistory").
	Op string
	// ExecutionARN is the request's executionArn, when it has one.
	ExecutionARN string
	// At is the server's time (Now) when the request arrived.
	At time.Time
	// Failed is the code of the injected error it was answered with
	// ("ThrottlingException"), or "".
	Failed string
}

// injected is an error to answer the next n calls of op ("" = any) with.
type injected struct {
	op  string
	n   int
	err *apiError
}

// window is an error to answer every call of op ("" = any) with while the
// server's time is in [from, until).
type window struct {
	op          string
	arn         string // only the calls about this execution, when set
	from, until time.Time
	err         *apiError
}

// Fail answers the next n calls of op (any operation when op is "") with an
// AWS error of the given HTTP status, code and message.
func (s *Server) Fail(op string, n, status int, code, message string) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, &injected{op: op, n: n, err: &apiError{status, code, message}})
}

// ClearFailures drops every injected error not used yet, windows included.
func (s *Server) ClearFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures, s.windows = nil, nil
}

// Throttle answers the next n calls of op (any when "") with a
// ThrottlingException, as a busy AWS service does.
func (s *Server) Throttle(op string, n int) {
	s.Fail(op, n, http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
}

// ThrottleBetween answers every call of op (any when "") that arrives
// while the server's time (Now) is in [from, until) with a
// ThrottlingException: an API whose account quota is used up for a while.
func (s *Server) ThrottleBetween(op string, from, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, window{op: op, from: from, until: until,
		err: &apiError{http.StatusBadRequest, "ThrottlingException", "Rate exceeded"}})
}

// ThrottleExecutionBetween is ThrottleBetween for the calls of op about
// one execution (their executionArn) only.
func (s *Server) ThrottleExecutionBetween(op, executionARN string, from, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, window{op: op, arn: executionARN, from: from, until: until,
		err: &apiError{http.StatusBadRequest, "ThrottlingException", "Rate exceeded"}})
}

// Log returns the calls received since the server started or the last
// ResetCalls, oldest first.
func (s *Server) Log() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// begin counts and logs a call and returns the injected error it must
// fail with.
func (s *Server) begin(op string, body []byte) *apiError {
	var req struct {
		ExecutionARN string `json:"executionArn"`
	}
	_ = json.Unmarshal(body, &req)
	now := s.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	e := s.injectedFor(op, req.ExecutionARN, now)
	if e == nil {
		e = s.overQuota(op, now)
	}
	c := Call{Op: op, ExecutionARN: req.ExecutionARN, At: now}
	if e != nil {
		c.Failed = e.code
	}
	s.log = append(s.log, c)
	return e
}

// injectedFor returns the injected error a call of op about arn at now
// fails with: a window's, else the first matching counted one's (which it
// uses up).
func (s *Server) injectedFor(op, arn string, now time.Time) *apiError {
	for _, w := range s.windows {
		if (w.op == "" || w.op == op) && (w.arn == "" || w.arn == arn) && !now.Before(w.from) && now.Before(w.until) {
			return w.err
		}
	}
	for i, f := range s.failures {
		if f.op == "" || f.op == op {
			f.n--
			if f.n <= 0 {
				s.failures = append(s.failures[:i], s.failures[i+1:]...)
			}
			return f.err
		}
	}
	return nil
}
