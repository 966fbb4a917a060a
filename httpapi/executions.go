package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
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

// Executions returns the routes that describe and act on a tenant's
// current execution, whichever provider runs it:
//
//	GET  /v1/tenants/{id}/execution               describe (read:raw; input and output redacted below admin)
//	POST /v1/tenants/{id}/execution/{action}      stop, retry or restart (admin)
//
// An action's body is optional JSON {"reason":…,"kill":…,"dryRun":…}
// (dryRun=true in the query string also works). Without keys on a loopback
// address every request is let in (the zero-configuration default) and
// actions are recorded as taken by "loopback". policy says what of the
// input and output a reader below admin sees (nil: none of it).
func Executions(svc substate.ExecutionService, auth *Authorizer, policy *redact.Policy, log *slog.Logger) map[string]http.Handler {
	return map[string]http.Handler{
		"GET /v1/tenants/{id}/execution":           describeExecution(svc, auth, policy, log),
		"POST /v1/tenants/{id}/execution/{action}": RequireJSON(actOnExecution(svc, auth, policy, log)),
	}
}

func describeExecution(svc substate.ExecutionService, auth *Authorizer, policy *redact.Policy, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		p, err := executionPrincipal(auth, r, ScopeReadRaw, id)
		if err != nil {
			writeAuthError(w, r, err, log)
			return
		}
		info, err := svc.Describe(r.Context(), id)
		if err != nil {
			httpx.Error(w, r, err, log)
			return
		}
		httpx.JSON(w, http.StatusOK, redactExecution(info, p, policy))
	})
}

// ActionRequest is the body of POST /v1/tenants/{id}/execution/{action}.
type ActionRequest struct {
	Reason string `json:"reason"` // why: recorded in the audit event
	Kill   bool   `json:"kill"`   // a Restate stop kills instead of cancelling
	DryRun bool   `json:"dryRun"` // check that the provider would accept it, only
}

func actOnExecution(svc substate.ExecutionService, auth *Authorizer, policy *redact.Policy, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		action, err := substate.ParseExecutionAction(r.PathValue("action"))
		if err != nil {
			httpx.Error(w, r, substate.Errorf(substate.ENOTFOUND, "%s", substate.ErrorMessage(err)), log)
			return
		}
		p, err := executionPrincipal(auth, r, ScopeAdmin, id)
		if err != nil {
			writeAuthError(w, r, err, log)
			return
		}
		body, err := decodeActionBody(w, r)
		if err != nil {
			httpx.Error(w, r, err, log)
			return
		}
		who := p.Name
		if loopbackAnonymous(auth, p) {
			who = LoopbackOperator
		}
		res, err := svc.Act(r.Context(), substate.ExecutionRequest{
			TenantID: id, Action: action, Reason: body.Reason, Kill: body.Kill, DryRun: body.DryRun, Who: who,
		})
		if err != nil {
			httpx.Error(w, r, err, log)
			return
		}
		res.Execution = redactExecution(res.Execution, p, policy)
		httpx.JSON(w, http.StatusOK, res)
	})
}

// decodeActionBody reads an action's optional JSON body strictly.
func decodeActionBody(w http.ResponseWriter, r *http.Request) (ActionRequest, error) {
	var body ActionRequest
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxActionBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return body, substate.Errorf(substate.ETOOLARGE, "the body is larger than %d bytes", maxActionBody)
	} else if err != nil {
		return body, substate.WrapError(substate.EINVALID, err, "read body")
	}
	if len(bytes.TrimSpace(data)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || dec.More() {
			return body, substate.Errorf(substate.EINVALID, `the body must be a JSON object {"reason":"…","kill":false,"dryRun":false}`)
		}
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

// executionPrincipal authenticates a request to the execution routes: the
// key's scope must include scope, except for the anonymous principal of a
// loopback address without keys, and the tenant must be within its prefix.
// A nil auth lets everything in as the loopback operator.
func executionPrincipal(auth *Authorizer, r *http.Request, scope Scope, tenant string) (Principal, error) {
	if auth == nil {
		return Principal{Name: LoopbackOperator, Scope: ScopeAdmin}, nil
	}
	p, err := auth.Authenticate(r)
	if err != nil {
		return p, err
	}
	if !p.Can(scope) && !loopbackAnonymous(auth, p) {
		return p, substate.Errorf(substate.EFORBIDDEN, "key %q has scope %s; %s %s needs %s", p.Name, p.Scope, r.Method, r.URL.Path, scope)
	}
	return p, p.CheckTenant(tenant)
}

// loopbackAnonymous reports whether p came in without a key where none is
// needed.
func loopbackAnonymous(auth *Authorizer, p Principal) bool {
	return auth == nil || (auth.AllowAnonymous && p == Anonymous)
}

func writeAuthError(w http.ResponseWriter, r *http.Request, err error, log *slog.Logger) {
	if substate.ErrorCode(err) == substate.EUNAUTHORIZED {
		w.Header().Set("WWW-Authenticate", `Bearer realm="substate"`)
	}
	httpx.Error(w, r, err, log)
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
