package httpapi

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// GroupParams are the query parameters of GET /v1/groups: by, limit, and
// the conditions of GET /v1/tenants.
var GroupParams = []string{"by", "limit", "subState", "hasError", "minRetryCount", "provider", "tenantPrefix", "fingerprint",
	"step", "workflowType", "verb", "inStateLongerThan", "stuck"}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) {
	q, err := ParseGroupQuery(r.URL.Query())
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	page, err := ViewsFor(r.Context(), s.Views).Groups(r.Context(), q)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	if page.Groups == nil {
		page.Groups = []substate.Group{}
	}
	httpx.JSON(w, http.StatusOK, page)
}

// ParseGroupQuery reads the query parameters of GET /v1/groups: by
// (required), limit, and the conditions GET /v1/tenants takes. Any other
// parameter, or one given twice, is an EINVALID error naming the valid
// ones.
func ParseGroupQuery(q map[string][]string) (substate.GroupQuery, error) {
	if err := CheckParams(q, GroupParams); err != nil {
		return substate.GroupQuery{}, err
	}
	var g substate.GroupQuery
	by := first(q, "by")
	if by == "" {
		return g, substate.Errorf(substate.EINVALID, "by is required: fingerprint, subState, provider, step or workflowType")
	}
	var err error
	if g.By, err = substate.ParseGroupBy(by); err != nil {
		return g, err
	}
	if g.Limit, err = nonNegative("limit", first(q, "limit")); err != nil {
		return g, err
	}
	g.Filter, err = parseConditions(q)
	return g, err
}

// EncodeGroupQuery writes g as the query parameters ParseGroupQuery reads.
func EncodeGroupQuery(g substate.GroupQuery) url.Values {
	q := encodeConditions(g.Filter)
	q.Set("by", string(g.By))
	if g.Limit != 0 {
		q.Set("limit", strconv.Itoa(g.Limit))
	}
	return q
}
