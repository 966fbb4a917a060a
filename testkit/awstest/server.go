// Package awstest is a local stand-in for the AWS services substate talks to:
// an HTTP server that speaks the AWS JSON protocol of Step Functions
// (awsJson1_0, X-Amz-Target: AWSStepFunctions.<Op>) and EventBridge
// (awsJson1_1, X-Amz-Target: AWSEvents.<Op>) with in-memory state.
//
// Tests drive it with the real AWS SDK v2 clients, built from Config, so the
// SDK's serializers, error decoding and retryer are part of every test. The
// server keeps the rules the adapters rely on (execution name idempotency,
// history paging, PutEvents partial failure, the EventBridge resource
// life cycle) and has hooks to change execution state, inject errors (the
// next n calls, or every call of an API for a window of its clock), and
// count and log calls.
//
// It is deliberately small: it does not run state machines, check
// signatures or enforce IAM. DeleteStateMachine removes the state machine at
// once (real Step Functions marks it DELETING first).
package awstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults of every Server: the region and account its ARNs use.
const (
	Region    = "us-east-1"
	AccountID = "123456789012"
)

// Target prefixes of the two protocols.
const (
	sfnPrefix    = "AWSStepFunctions."
	eventsPrefix = "AWSEvents."
)

// Server is an in-memory Step Functions and EventBridge endpoint. It is safe
// for concurrent use.
type Server struct {
	// URL is the base endpoint to give the SDK clients.
	URL string
	// Now returns the current time; tests may replace it before use.
	Now func() time.Time

	srv *httptest.Server

	mu       sync.Mutex
	calls    map[string]int
	log      []Call
	failures []*injected
	windows  []window
	quotas   map[string]*bucket // by operation
	// redriveTokens are the client tokens redrives succeeded with, by
	// execution ARN, oldest first.
	redriveTokens map[string][]redriveToken
	nextID        int

	machines   map[string]*stateMachine // by ARN
	executions map[string]*Execution    // by ARN

	putEvents   []PutEventsEntry
	failEntry   func(PutEventsEntry) (code, message string)
	connections map[string]*Connection
	apiDests    map[string]*apiDestination
	rules       map[string]*rule // by bus + "/" + name
}

// New starts a Server and stops it when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{
		Now:         func() time.Time { return time.Now().UTC() },
		calls:       make(map[string]int),
		machines:    make(map[string]*stateMachine),
		executions:  make(map[string]*Execution),
		connections: make(map[string]*Connection),
		apiDests:    make(map[string]*apiDestination),
		rules:       make(map[string]*rule),
	}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	tb.Cleanup(s.srv.Close)
	return s
}

// Calls returns how many requests of the operation (its short name, such as
// "DescribeExecution" or "PutEvents") the server received, including those
// answered with an injected error.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// TotalCalls returns how many requests the server received in all.
func (s *Server) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += c
	}
	return n
}

// ResetCalls sets every call counter back to zero and empties the log.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.calls)
	s.log = nil
}

// apiError is an AWS error response.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, code, fmt.Sprintf(format, args...)}
}

// handler runs one operation on a decoded request body and returns the
// response to encode, or an *apiError.
type handler func(s *Server, body []byte) (any, error)

var handlers = map[string]handler{}

func register(target string, h handler) { handlers[target] = h }

// ServeHTTP implements http.Handler: it routes on X-Amz-Target.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	json10 := strings.HasPrefix(target, sfnPrefix)
	op := target[strings.LastIndexByte(target, '.')+1:]
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, json10, &apiError{http.StatusBadRequest, "SerializationException", err.Error()})
		return
	}
	h, ok := handlers[target]
	if r.Method != http.MethodPost || !ok {
		writeError(w, json10, errorf("UnknownOperationException", "unknown operation %q", target))
		return
	}
	if want := contentType(json10); r.Header.Get("Content-Type") != want {
		writeError(w, json10, errorf("SerializationException", "want Content-Type %s", want))
		return
	}
	if e := s.begin(op, body); e != nil {
		writeError(w, json10, e)
		return
	}
	out, err := h(s, body)
	if err != nil {
		e, ok := err.(*apiError)
		if !ok {
			e = &apiError{http.StatusInternalServerError, "InternalFailure", err.Error()}
		}
		writeError(w, json10, e)
		return
	}
	writeJSON(w, json10, http.StatusOK, out)
}

func contentType(json10 bool) string {
	if json10 {
		return "application/x-amz-json-1.0"
	}
	return "application/x-amz-json-1.1"
}

func writeJSON(w http.ResponseWriter, json10 bool, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"__type":"InternalFailure"}`)
	}
	w.Header().Set("Content-Type", contentType(json10))
	w.Header().Set("X-Amzn-RequestId", "00000000-0000-4000-8000-"+strconv.FormatInt(time.Now().UnixNano()%1e12, 10))
	w.WriteHeader(status)
	w.Write(b)
}

// writeError writes an AWS JSON error body. Step Functions qualifies the
// error type with its model namespace, EventBridge does not.
func writeError(w http.ResponseWriter, json10 bool, e *apiError) {
	typ := e.code
	if json10 {
		typ = "com.amazonaws.swf.service.v2.model#" + e.code
	}
	writeJSON(w, json10, e.status, map[string]string{"__type": typ, "message": e.message})
}

// decode unmarshals a request body, answering malformed JSON as AWS does.
func decode(body []byte, v any) error {
	if len(body) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errorf("SerializationException", "decode request: %v", err)
	}
	return nil
}

// epoch is an AWS JSON timestamp: epoch seconds with a millisecond fraction.
// The zero time is left out of responses with the omitzero option.
type epoch struct{ time.Time }

// MarshalJSON implements json.Marshaler.
func (t epoch) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(t.UnixMilli())/1000, 'f', 3, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *epoch) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	t.Time = time.UnixMilli(int64(f * 1000)).UTC()
	return nil
}

// arn builds an ARN of this server's region and account.
func arn(service, resource string) string {
	return "arn:aws:" + service + ":" + Region + ":" + AccountID + ":" + resource
}

// newID returns a short unique id for generated names and tokens.
func (s *Server) newID() string {
	s.nextID++
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", s.nextID, s.nextID)
}
