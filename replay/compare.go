package replay

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// FieldDiff is one field of a tenant view that differs between two views.
type FieldDiff struct {
	Field        string // the field's JSON name
	Live, Replay string
}

// TenantDiff is how one tenant differs between the live view and a replay.
// Only is "live" or "replay" when the tenant is in that view alone; then
// Fields is empty.
type TenantDiff struct {
	TenantID string
	Only     string
	Fields   []FieldDiff
}

// viewFields are the compared fields of a tenant view. updatedAt is not
// among them: the live projector stamps it with the wall clock of its
// commit, which no stream records (see Rebuild). Nor are deadline,
// deadlineSlo, stuck and stuckSince: they come from the worker's SLO file
// and its clock.
var viewFields = []struct {
	name string
	get  func(*substate.TenantView) string
}{
	{"workflowType", func(v *substate.TenantView) string { return v.WorkflowType }},
	{"workflowSubState", func(v *substate.TenantView) string { return string(v.WorkflowSubState) }},
	{"workflowSubStateSince", func(v *substate.TenantView) string { return formatTime(v.WorkflowSubStateSince) }},
	{"workflowVerb", func(v *substate.TenantView) string { return string(v.WorkflowVerb) }},
	{"workflowStatus", func(v *substate.TenantView) string { return string(v.WorkflowStatus) }},
	{"workflowExecutionId", func(v *substate.TenantView) string { return v.WorkflowExecutionID }},
	{"workflowRetryCount", func(v *substate.TenantView) string { return strconv.Itoa(v.WorkflowRetryCount) }},
	{"workflowNextRetryAt", func(v *substate.TenantView) string { return formatTime(v.WorkflowNextRetryAt) }},
	{"workflowErrorMessage", func(v *substate.TenantView) string { return v.WorkflowErrorMessage }},
	{"workflowErrorType", func(v *substate.TenantView) string { return v.WorkflowErrorType }},
	{"workflowErrorFingerprint", func(v *substate.TenantView) string { return v.WorkflowErrorFingerprint }},
	{"workflowStep", func(v *substate.TenantView) string { return v.WorkflowStep }},
	{"provider", func(v *substate.TenantView) string { return string(v.Provider) }},
	{"providerState", func(v *substate.TenantView) string { return v.ProviderState }},
	{"lastEventAt", func(v *substate.TenantView) string { return formatTime(v.LastEventAt) }},
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Compare returns the tenants whose views differ between live and replay,
// by tenant id, comparing every field but updatedAt and the deadline's.
func Compare(live, replay []substate.TenantView) []TenantDiff {
	byID := make(map[string]*substate.TenantView, len(replay))
	for i := range replay {
		byID[replay[i].TenantID] = &replay[i]
	}
	var out []TenantDiff
	for i := range live {
		l := &live[i]
		r, ok := byID[l.TenantID]
		if !ok {
			out = append(out, TenantDiff{TenantID: l.TenantID, Only: "live"})
			continue
		}
		delete(byID, l.TenantID)
		if fs := compareFields(l, r); len(fs) > 0 {
			out = append(out, TenantDiff{TenantID: l.TenantID, Fields: fs})
		}
	}
	for id := range byID {
		out = append(out, TenantDiff{TenantID: id, Only: "replay"})
	}
	slices.SortFunc(out, func(a, b TenantDiff) int { return strings.Compare(a.TenantID, b.TenantID) })
	return out
}

func compareFields(live, replay *substate.TenantView) []FieldDiff {
	var out []FieldDiff
	for _, f := range viewFields {
		if l, r := f.get(live), f.get(replay); l != r {
			out = append(out, FieldDiff{Field: f.name, Live: l, Replay: r})
		}
	}
	return out
}
