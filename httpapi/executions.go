package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
	"github.com/substatehq/substate/redact"
)

// maxActionBody bounds the body of an execution action.
const maxActionBody = 64 << 10

// LoopbackOperator is who an action is recorded as when it came without a
// key on a loopback address with no keys configured.
const LoopbackOperator = "loopback"

// describeExecution serves GET /v1/tenants/{id}/execution: the tenant's
// current execution, whichever provider runs it, its input and output
// redacted below admin.
func (s *Server) describeExecution(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p := principal(r)
	if err := p.CheckTenant(id); err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	info, err := s.Executions.Describe(r.Context(), id)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	httpx.JSON(w, http.StatusOK, redactExecution(info, p, s.Redaction))
}

// ActionRequest is the body of POST /v1/tenants/{id}/execution/{action}.
type ActionRequest struct {
	Reason string `json:"reason"` // why: recorded in the audit event
	Kill   bool   `json:"kill"`   // a Restate stop kills instead of cancelling
	DryRun bool   `json:"dryRun"` // check that the provider would accept it, only
	// ExecutionID, when set, is the execution the caller saw (a preview's,
	// describe's): if the tenant's current execution is another one, the
	// action is skipped (outcome skipped, recorded) and nothing reaches
	// the provider, so a confirmation never lands on an execution that
	// started after it was asked for.
	ExecutionID string `json:"executionId,omitempty"`
}

// actOnExecution serves POST /v1/tenants/{id}/execution/{action}: stop,
// retry or restart. The body is optional JSON
// {"reason":…,"kill":…,"dryRun":…,"executionId":…} (dryRun=true in the
// query string also works). The anonymous caller of a
// loopback address without keys is recorded as LoopbackOperator.
func (s *Server) actOnExecution(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	action, err := substate.ParseExecutionAction(r.PathValue("action"))
	if err != nil {
		httpx.Error(w, r, substate.Errorf(substate.ENOTFOUND, "%s", substate.ErrorMessage(err)), s.logger())
		return
	}
	p := principal(r)
	if err := p.CheckTenant(id); err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	body, err := decodeActionBody(w, r)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	res, err := s.Executions.Act(r.Context(), substate.ExecutionRequest{
		TenantID: id, Action: action, Reason: body.Reason, Kill: body.Kill, DryRun: body.DryRun, ExecutionID: body.ExecutionID, Who: s.who(p),
	})
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	res.Execution = redactExecution(res.Execution, p, s.Redaction)
	httpx.JSON(w, http.StatusOK, res)
}

// maxExecutionID bounds an action's executionId: as long as the longest
// id a provider gives (an AWS ARN is at most 2,048 characters).
const maxExecutionID = 2048

// decodeActionBody reads an action's optional JSON body strictly.
func decodeActionBody(w http.ResponseWriter, r *http.Request) (ActionRequest, error) {
	var body ActionRequest
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxActionBody))
	if err != nil {
		return body, httpx.BodyError(w, err)
	}
	if len(bytes.TrimSpace(data)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || dec.More() {
			return body, substate.Errorf(substate.EINVALID, `the body must be a JSON object {"reason":"…","kill":false,"dryRun":false,"executionId":"…"}`)
		}
	}
	if len(body.ExecutionID) > maxExecutionID {
		return body, substate.Errorf(substate.EINVALID, "executionId: longer than %d bytes, which no provider's execution id is", maxExecutionID)
	}
	if q := r.URL.Query().Get("dryRun"); q != "" {
		v, err := strconv.ParseBool(q)
		if err != nil {
			return body, substate.Errorf(substate.EINVALID, "dryRun=%q is not true or false", q)
		}
		body.DryRun = body.DryRun || v
	}
	return body, nil
}

// who is who an action of p is recorded as: the key's name, or
// LoopbackOperator for the anonymous caller of a loopback address without
// keys.
func (s *Server) who(p Principal) string {
	if s.Auth.loopbackAnonymous(p) {
		return LoopbackOperator
	}
	return p.Name
}

// principal returns the principal the route's guard put on the request.
func principal(r *http.Request) Principal {
	if p, ok := PrincipalFrom(r.Context()); ok {
		return p
	}
	return Anonymous // not reached: every route that reads it is guarded
}

// redactExecution returns x with its input and output redacted by policy
// unless p reads unredacted: an action's answer describes the execution
// too, and must not show a loopback caller what describe hides.
func redactExecution(x substate.ExecutionInfo, p Principal, policy *redact.Policy) substate.ExecutionInfo {
	if !p.Unredacted() {
		x.Input, x.Output = redactJSON(x.Input, policy), redactJSON(x.Output, policy)
	}
	return x
}

// redactJSON redacts an execution's input or output by policy.
func redactJSON(v json.RawMessage, policy *redact.Policy) json.RawMessage {
	if len(v) == 0 {
		return v
	}
	var doc any
	if json.Unmarshal(v, &doc) != nil {
		b, _ := json.Marshal(redact.Redacted)
		return b
	}
	b, err := json.Marshal(policy.Value(doc))
	if err != nil {
		b, _ = json.Marshal(redact.Redacted)
	}
	return b
}
