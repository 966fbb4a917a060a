package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// Limits of the job routes.
const (
	// maxJobBody bounds the body of POST /v1/actions.
	maxJobBody = 64 << 10
	// DefaultJobList and MaxJobList are the page sizes of GET /v1/actions.
	DefaultJobList = 50
	MaxJobList     = 500
	// JobEventsEvery is how often GET /v1/actions/{id}/events looks at
	// the job's progress, and JobEventsKeepAlive how often it sends a
	// comment while nothing changes.
	JobEventsEvery     = 500 * time.Millisecond
	JobEventsKeepAlive = 15 * time.Second
)

// createJob serves POST /v1/actions: a fleet job, or with dryRun its
// preview. The filter is narrowed to the key's tenant prefix (never
// widened); one outside it is 403 and selects nothing.
func (s *Server) createJob(w http.ResponseWriter, r *http.Request) {
	req, err := s.jobRequest(w, r)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	if req.DryRun {
		p, err := s.Jobs.Preview(r.Context(), req)
		if err != nil {
			httpx.Error(w, r, err, s.logger())
			return
		}
		httpx.JSON(w, http.StatusOK, p)
		return
	}
	j, err := s.Jobs.Create(r.Context(), req)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	w.Header().Set("Location", "/v1/actions/"+j.ID)
	httpx.JSON(w, http.StatusCreated, j)
}

// jobRequest reads and checks the body of POST /v1/actions for the
// request's principal.
func (s *Server) jobRequest(w http.ResponseWriter, r *http.Request) (substate.JobRequest, error) {
	var req substate.JobRequest
	if err := decodeStrict(w, r, maxJobBody, &req,
		`the body must be a JSON object {"action":"retry|stop|restart|requeue","filter":{"subState":"failed",…},"reason":"…","dryRun":false}`); err != nil {
		return req, err
	}
	action, err := substate.ParseJobAction(string(req.Action))
	if err != nil {
		return req, err
	}
	req.Action = action
	if req.Filter == nil {
		req.Filter = map[string]string{}
	}
	if req.Tenants, req.DeadLetters, err = ParseJobFilter(action, req.Filter, time.Now()); err != nil {
		return req, err
	}
	p := principal(r)
	req.Who, req.Scope = s.who(p), p.TenantPrefix
	if req.Tenants.TenantPrefix, err = NarrowToKey(req.Tenants.TenantPrefix, p.TenantPrefix); err != nil {
		return req, err
	}
	if action == substate.ActionRequeue {
		req.DeadLetters.TenantPrefix, err = NarrowToKey(req.DeadLetters.TenantPrefix, p.TenantPrefix)
	}
	return req, err
}

// decodeStrict reads a JSON body of at most limit bytes into v, refusing
// unknown fields by name.
func decodeStrict(w http.ResponseWriter, r *http.Request, limit int64, v any, shape string) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return httpx.BodyError(w, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		if err != nil && strings.HasPrefix(err.Error(), "json: unknown field ") {
			return substate.Errorf(substate.EINVALID, "unknown field %s in the body; %s", strings.TrimPrefix(err.Error(), "json: unknown field "), shape)
		}
		return substate.Errorf(substate.EINVALID, "%s", shape)
	}
	return nil
}

// listJobs serves GET /v1/actions?limit=N: the jobs newest first, those
// of the key's tenant scope only.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := CheckParams(q, []string{"limit"}); err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	limit, err := nonNegative("limit", first(q, "limit"))
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	if limit == 0 {
		limit = DefaultJobList
	}
	jobs, err := s.Jobs.Jobs(r.Context(), min(limit, MaxJobList))
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	p, visible := principal(r), []substate.Job{}
	for _, j := range jobs {
		if strings.HasPrefix(j.Scope, p.TenantPrefix) {
			visible = append(visible, j)
		}
	}
	httpx.JSON(w, http.StatusOK, map[string]any{"jobs": visible})
}

// getJob serves GET /v1/actions/{id}: the job, its state and progress.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.visibleJob(r)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	httpx.JSON(w, http.StatusOK, j)
}

// visibleJob returns the job of the path, ENOTFOUND when the key's
// tenant scope does not cover the job's.
func (s *Server) visibleJob(r *http.Request) (substate.Job, error) {
	id := r.PathValue("id")
	j, err := s.Jobs.Job(r.Context(), id)
	if err == nil && !strings.HasPrefix(j.Scope, principal(r).TenantPrefix) {
		err = substate.Errorf(substate.ENOTFOUND, "no job %s", id)
	}
	return j, err
}

// controlJob serves POST /v1/actions/{id}/{op}: pause, resume or cancel.
func (s *Server) controlJob(w http.ResponseWriter, r *http.Request) {
	op, err := substate.ParseJobOp(r.PathValue("op"))
	if err == nil {
		_, err = s.visibleJob(r)
	}
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	j, err := s.Jobs.Control(r.Context(), r.PathValue("id"), op, s.who(principal(r)))
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	httpx.JSON(w, http.StatusOK, j)
}

// jobReport serves GET /v1/actions/{id}/report?after=N&limit=N&outcome=O:
// the members' outcomes, in member order, as SUBSTATE_AUDIT holds them.
func (s *Server) jobReport(w http.ResponseWriter, r *http.Request) {
	q, err := parseReportQuery(r)
	if err == nil {
		_, err = s.visibleJob(r)
	}
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	rep, err := s.Jobs.Report(r.Context(), r.PathValue("id"), q)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	httpx.JSON(w, http.StatusOK, rep)
}

// parseReportQuery reads the query of a job's report.
func parseReportQuery(r *http.Request) (substate.JobReportQuery, error) {
	v := r.URL.Query()
	var q substate.JobReportQuery
	if err := CheckParams(v, []string{"after", "limit", "outcome"}); err != nil {
		return q, err
	}
	var err error
	if q.After, err = nonNegative("after", first(v, "after")); err != nil {
		return q, err
	}
	if q.Limit, err = nonNegative("limit", first(v, "limit")); err != nil {
		return q, err
	}
	switch q.Outcome = first(v, "outcome"); q.Outcome {
	case "", substate.AuditDone, substate.AuditPending, substate.AuditRefused, substate.AuditUnknown, substate.AuditSkipped:
		return q, nil
	}
	return q, substate.Errorf(substate.EINVALID, "outcome %s: want done, pending, refused, unknown or skipped", substate.QuotePrefix(q.Outcome, substate.QuoteLimit))
}

// jobEvents serves GET /v1/actions/{id}/events: Server-Sent Events of the
// job's progress. An event "progress" (data: the job) is sent at once and
// whenever the job changes, at most every JobEventsEvery; the last is
// "end", once the job is done or cancelled, and the stream closes. A
// browser reads it with fetch, which sends the Authorization header.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request) {
	j, err := s.visibleJob(r)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	es := httpx.NewEventStream(w, eventWriteTimeout)
	defer es.Close()
	tick := time.NewTicker(JobEventsEvery)
	defer tick.Stop()
	last, quiet := []byte(nil), time.Now()
	for {
		data, _ := json.Marshal(j)
		event := "progress"
		if j.State.Final() {
			event = "end"
		}
		switch {
		case !bytes.Equal(data, last) || j.State.Final():
			_, err = io.WriteString(es, "event: "+event+"\ndata: "+string(data)+"\n\n")
			last, quiet = data, time.Now()
		case time.Since(quiet) >= JobEventsKeepAlive:
			_, err = io.WriteString(es, ": keep-alive\n\n")
			quiet = time.Now()
		}
		if err != nil || es.Flush() != nil || j.State.Final() {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		if j, err = s.Jobs.Job(r.Context(), j.ID); err != nil {
			body, _ := json.Marshal(httpx.ErrorBody{Error: httpx.ErrorDetail{Code: substate.ErrorCode(err), Message: substate.ErrorMessage(err)}})
			_, _ = io.WriteString(es, "event: error\ndata: "+string(body)+"\n\n")
			_ = es.Flush()
			return
		}
	}
}
