package substate

import "time"

// MaxFingerprintBytes is the length of the longest error fingerprint.
const MaxFingerprintBytes = 200

// MaxStepBytes and MaxWorkflowTypeBytes are the longest step and workflow
// type the view keeps (a provider's longer one is cut), so the longest a
// filter can usefully name.
const (
	MaxStepBytes         = 256
	MaxWorkflowTypeBytes = 256
)

// GroupBy names the view field that GET /v1/groups groups tenants by.
type GroupBy string

// The fields tenants can be grouped by.
const (
	GroupByFingerprint  GroupBy = "fingerprint"  // workflowErrorFingerprint
	GroupBySubState     GroupBy = "subState"     // workflowSubState
	GroupByProvider     GroupBy = "provider"     // provider
	GroupByStep         GroupBy = "step"         // workflowStep
	GroupByWorkflowType GroupBy = "workflowType" // workflowType
)

// GroupBys are the fields tenants can be grouped by, in the order the API
// documents them.
var GroupBys = []GroupBy{GroupByFingerprint, GroupBySubState, GroupByProvider, GroupByStep, GroupByWorkflowType}

// ParseGroupBy returns the GroupBy named s, or an EINVALID error naming
// the valid ones.
func ParseGroupBy(s string) (GroupBy, error) {
	for _, g := range GroupBys {
		if string(g) == s {
			return g, nil
		}
	}
	return "", Errorf(EINVALID, "by %s: want fingerprint, subState, provider, step or workflowType", QuotePrefix(s, QuoteLimit))
}

// Value returns the value of the field g of a view.
func (g GroupBy) Value(v *TenantView) string {
	switch g {
	case GroupByFingerprint:
		return v.WorkflowErrorFingerprint
	case GroupBySubState:
		return string(v.WorkflowSubState)
	case GroupByProvider:
		return string(v.Provider)
	case GroupByStep:
		return v.WorkflowStep
	case GroupByWorkflowType:
		return v.WorkflowType
	}
	return ""
}

// GroupQuery asks for the tenants matching Filter, grouped by the values
// of one field. Filter's Limit, PageToken and sort fields must be unset.
type GroupQuery struct {
	By     GroupBy
	Filter TenantFilter
	// Limit is how many groups to return, the largest first; 0 means the
	// store's default.
	Limit int
}

// Group is the tenants that share one value of the grouped field.
type Group struct {
	Value string `json:"value"`
	Count int64  `json:"count"`
	// SampleTenantID is one tenant of the group: the one that entered its
	// sub-state last.
	SampleTenantID string `json:"sampleTenantId"`
	// FirstSeen and LastSeen are the earliest and the latest
	// workflowSubStateSince of the group's tenants: when the
	// longest-standing one entered its sub-state, and when the newest did.
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
}

// GroupPage answers a GroupQuery: its groups, the largest first (equal
// counts by value), and what they were counted from.
type GroupPage struct {
	By     GroupBy `json:"by"`
	Groups []Group `json:"groups"`
	// Total is how many tenants match the filter.
	Total int64 `json:"total"`
	// Ungrouped is how many of them have no value of the field (no error,
	// no step, no workflow type) and so are in no group.
	Ungrouped int64 `json:"ungrouped"`
	// GroupCount is how many groups there are; Groups holds the largest
	// Limit of them.
	GroupCount int `json:"groupCount"`
	// Scanned is how many tenants were read to answer: 0 when counters
	// the view keeps answered.
	Scanned int64 `json:"scanned"`
}

// TenantCount is how many tenants of one provider are in one sub-state.
type TenantCount struct {
	SubState SubState `json:"subState"`
	Provider Provider `json:"provider"`
	Count    int64    `json:"count"`
}

// StuckCount is how many stuck tenants share a sub-state, a provider and
// a workflow type.
type StuckCount struct {
	SubState     SubState `json:"subState"`
	Provider     Provider `json:"provider"`
	WorkflowType string   `json:"workflowType"`
	Count        int64    `json:"count"`
}
