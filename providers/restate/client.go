package restate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/reconcile"
)

// DefaultTimeout bounds one admin API request of a Client made by
// NewClient: sending it, and reading the whole answer.
const DefaultTimeout = 10 * time.Second

// MaxResponse bounds the body of one admin API answer. A larger answer is
// refused, never cut: a cut page of rows would read as fewer invocations.
const MaxResponse = 32 << 20

// Client calls Restate's admin API: SQL queries, reads of its metadata, and
// the actions on an invocation. The poller and the operator share one, so
// every call has the same limits: the timeout of HTTP, MaxResponse, and one
// reading of the answer's status (see Patch for the statuses an action may
// answer, and restateError for the errors).
type Client struct {
	// URL is the admin API's base URL, such as http://restate:9070.
	URL string
	// Token, when set, is sent as a bearer token.
	Token string
	// HTTP sends the requests; NewClient sets one with DefaultTimeout.
	HTTP *http.Client
	// Metrics counts the calls, by operation; nil disables it.
	Metrics *reconcile.Metrics
}

// NewClient returns a client of the admin API at url.
func NewClient(url string) *Client {
	return &Client{URL: url, HTTP: &http.Client{Timeout: DefaultTimeout}}
}

// Query sends one POST /query (SQL on Restate's system tables) and returns
// the rows of the answer.
func (c *Client) Query(ctx context.Context, sql string) ([]json.RawMessage, error) {
	body, err := json.Marshal(map[string]string{"query": sql})
	if err != nil {
		return nil, substate.WrapError(substate.EINTERNAL, err, "restate admin query: encode request")
	}
	a, err := c.send(ctx, http.MethodPost, "/query", "query", body, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var page struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(a.Body, &page); err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "restate admin query: decode answer")
	}
	return page.Rows, nil
}

// Get sends one GET of path (such as /services/Provision), counted as
// operation, and returns the answer's body, which must be JSON.
func (c *Client) Get(ctx context.Context, path, operation string) (json.RawMessage, error) {
	a, err := c.send(ctx, http.MethodGet, path, operation, nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	if !json.Valid(a.Body) {
		return nil, substate.Errorf(substate.EINVALID, "restate admin api: %s answered with invalid JSON", path)
	}
	return a.Body, nil
}

// Answer is an admin API answer an action was accepted with.
type Answer struct {
	// Status is the HTTP status: 200 when Restate reports the action done,
	// 202 when it accepted it to take it later.
	Status int
	// Body is the answer's body (empty for most actions).
	Body []byte
}

// actionStatuses are the statuses each action answers when Restate takes
// it, as the admin API of Restate 1.7 documents and answers them: a cancel
// is done (200) or accepted and carried out later (202); kill, resume and
// restart-as-new answer 200.
var actionStatuses = map[string][]int{
	"cancel":         {http.StatusOK, http.StatusAccepted},
	"kill":           {http.StatusOK},
	"resume":         {http.StatusOK},
	"restart-as-new": {http.StatusOK},
}

// Patch sends PATCH /invocations/{id}/{action} (cancel, kill, resume,
// restart-as-new) and returns the answer. An id that is not an invocation
// id is EINVALID and never sent; the refusals are errors with Restate's
// message: ENOTFOUND (404), ECONFLICT (409 already completed or still
// running, 410 input no longer kept, 422 not supported, 425 not started
// yet), and the others restateError names.
func (c *Client) Patch(ctx context.Context, id, action string) (Answer, error) {
	want, ok := actionStatuses[action]
	if !ok {
		return Answer{}, substate.Errorf(substate.EINVALID, "restate: %q is not an invocation action", action)
	}
	if !validInvocationID(id) {
		return Answer{}, substate.Errorf(substate.EINVALID, "%q is not a Restate invocation id", id)
	}
	a, err := c.send(ctx, http.MethodPatch, "/invocations/"+url.PathEscape(id)+"/"+action, action, nil, want...)
	if err != nil {
		return Answer{}, actionError(action, id, err)
	}
	return a, nil
}

// actionError says which action on which invocation failed, with
// Restate's message when it answered.
func actionError(action, id string, err error) error {
	var ae restateAnswerError
	switch code := substate.ErrorCode(err); {
	case !errors.As(err, &ae):
		return fmt.Errorf("restate %s of %s: %w", action, id, err)
	case code == substate.ENOTFOUND:
		return substate.WrapError(code, err, "restate %s: invocation %s not found", action, id)
	case code == substate.ECONFLICT:
		return substate.WrapError(code, err, "restate %s of %s refused: %s", action, id, ae.message)
	default:
		return substate.WrapError(code, err, "restate %s of %s: %s", action, id, ae.message)
	}
}

// send sends one request (a JSON body when body is not nil), counted as
// operation, and returns the answer when its status is one of want. An
// answer larger than MaxResponse is refused, not cut.
func (c *Client) send(ctx context.Context, method, path, operation string, body []byte, want ...int) (Answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
	if err != nil {
		return Answer{}, substate.WrapError(substate.EINVALID, err, "restate admin api: bad admin url %q", c.URL)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	c.Metrics.CountCall(substate.ProviderRestate, operation)
	resp, err := c.httpClient().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Answer{}, ctx.Err()
		}
		return Answer{}, substate.WrapError(substate.EUNAVAILABLE, err, "restate admin api unreachable")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return Answer{}, substate.WrapError(substate.EUNAVAILABLE, err, "restate admin api: read answer")
	}
	if len(b) > MaxResponse {
		return Answer{}, substate.Errorf(substate.EINVALID, "restate admin api: %s %s answered with more than %d MiB", method, path, MaxResponse>>20)
	}
	if !slices.Contains(want, resp.StatusCode) {
		return Answer{}, restateError(resp.StatusCode, b)
	}
	return Answer{Status: resp.StatusCode, Body: b}, nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return &http.Client{Timeout: DefaultTimeout}
	}
	return c.HTTP
}

// restateAnswerError is an error answer of the admin API: the server
// answered, so the request (and not the network) may be at fault.
type restateAnswerError struct {
	status  int
	message string
}

func (e restateAnswerError) Error() string { return fmt.Sprintf("HTTP %d", e.status) }

// restateError turns an answer of the admin API with a status the call
// does not take ({"message": …} for an error) into a substate error whose
// code says what it means and whether retrying can help: 404 ENOTFOUND;
// 409, 410, 422 and 425 ECONFLICT (the invocation is not in a state that
// allows it); 429 ETHROTTLED; 401 and 403 EUNAUTHORIZED; any other 2xx or
// a 5xx EUNAVAILABLE (whether the request took effect is not known); any
// other status EINVALID.
func restateError(status int, body []byte) error {
	var e struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	code := substate.EINVALID
	switch status {
	case http.StatusNotFound:
		code = substate.ENOTFOUND
	case http.StatusConflict, http.StatusGone, http.StatusUnprocessableEntity, http.StatusTooEarly:
		code = substate.ECONFLICT
	case http.StatusTooManyRequests:
		code = substate.ETHROTTLED
	case http.StatusUnauthorized, http.StatusForbidden:
		code = substate.EUNAUTHORIZED
	default:
		if status/100 == 2 || status >= 500 {
			code = substate.EUNAVAILABLE
		}
	}
	switch {
	case status/100 == 2:
		msg = fmt.Sprintf("HTTP %d, which this call does not expect: whether it took effect is not known", status)
	case msg == "":
		msg = fmt.Sprintf("HTTP %d", status)
	}
	return substate.WrapError(code, restateAnswerError{status, msg}, "restate admin api: %s", msg)
}

// answered reports an error answer that a narrower query may not get:
// the server answered, and not with a throttling or credential refusal.
func answered(err error) bool {
	var e restateAnswerError
	if !errors.As(err, &e) {
		return false
	}
	return e.status != http.StatusTooManyRequests && e.status != http.StatusUnauthorized && e.status != http.StatusForbidden
}
