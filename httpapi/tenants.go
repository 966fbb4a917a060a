package httpapi

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) {
	v, err := ViewsFor(r.Context(), s.Views).Tenant(r.Context(), r.PathValue("id"))
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	httpx.JSON(w, http.StatusOK, v)
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	f, err := ParseTenantFilter(r.URL.Query())
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	page, err := ViewsFor(r.Context(), s.Views).Tenants(r.Context(), f)
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	if page.Tenants == nil {
		page.Tenants = []substate.TenantView{}
	}
	httpx.JSON(w, http.StatusOK, page)
}

// TenantParams are the query parameters of GET /v1/tenants.
var TenantParams = []string{"subState", "hasError", "minRetryCount", "provider", "tenantPrefix", "fingerprint", "step",
	"workflowType", "verb", "inStateLongerThan", "stuck", "sort", "limit", "pageToken"}

// ParseTenantFilter reads the query parameters of GET /v1/tenants: subState,
// hasError, minRetryCount, provider, tenantPrefix, fingerprint, step,
// workflowType, verb, inStateLongerThan (a Go duration), stuck, sort (see
// Sorts), limit and pageToken. Any other parameter, or one given
// twice, is an EINVALID error naming the valid ones: a misspelt filter
// must not answer every tenant.
func ParseTenantFilter(q map[string][]string) (substate.TenantFilter, error) {
	if err := CheckParams(q, TenantParams); err != nil {
		return substate.TenantFilter{}, err
	}
	f, err := parseConditions(q)
	if err != nil {
		return f, err
	}
	if f.Limit, err = nonNegative("limit", first(q, "limit")); err != nil {
		return f, err
	}
	if err := ParseSort(first(q, "sort"), &f); err != nil {
		return f, err
	}
	f.PageToken = first(q, "pageToken")
	return f, nil
}

// Sorts are the values of the sort parameter of GET /v1/tenants, each an
// order and its mirror: retryCount:asc is retryCount:desc read from its
// end, updatedAt:asc is updatedAt:desc from its end, and tenantId:desc is
// the order without sort (tenant id for most filters; see docs/view.md)
// from its end. A mirror is exactly its order reversed, ties included.
var Sorts = []string{"tenantId:desc", "retryCount:desc", "retryCount:asc", "updatedAt:desc", "updatedAt:asc"}

// ParseSort sets the sort fields of f from v, one of Sorts or "" for the
// filter's own order; anything else is an EINVALID error.
func ParseSort(v string, f *substate.TenantFilter) error {
	if v != "" && !slices.Contains(Sorts, v) {
		return substate.Errorf(substate.EINVALID, "sort %s: want one of %s", substate.QuotePrefix(v, substate.QuoteLimit), strings.Join(Sorts, ", "))
	}
	f.SortRetryDesc = strings.HasPrefix(v, "retryCount:")
	f.SortUpdatedDesc = strings.HasPrefix(v, "updatedAt:")
	f.Reverse = v == "tenantId:desc" || strings.HasSuffix(v, ":asc")
	return nil
}

// sortOf is the sort parameter that ParseSort reads as f's sort fields.
func sortOf(f substate.TenantFilter) string {
	var field string
	switch {
	case f.SortRetryDesc:
		field = "retryCount"
	case f.SortUpdatedDesc:
		field = "updatedAt"
	case f.Reverse:
		return "tenantId:desc"
	default:
		return ""
	}
	if f.Reverse {
		return field + ":asc"
	}
	return field + ":desc"
}

// parseConditions reads the parameters that select tenants, which GET
// /v1/tenants and GET /v1/groups share.
func parseConditions(q map[string][]string) (substate.TenantFilter, error) {
	var f substate.TenantFilter
	var err error
	if v := first(q, "subState"); v != "" {
		if f.SubState, err = substate.ParseSubState(v); err != nil {
			return f, err
		}
	}
	if v := first(q, "hasError"); v != "" {
		if f.HasError, err = strconv.ParseBool(v); err != nil {
			return f, substate.Errorf(substate.EINVALID, "hasError %s: want true or false", substate.QuotePrefix(v, substate.QuoteLimit))
		}
	}
	if f.MinRetryCount, err = nonNegative("minRetryCount", first(q, "minRetryCount")); err != nil {
		return f, err
	}
	if v := first(q, "provider"); v != "" {
		if f.Provider, err = substate.ParseProvider(v); err != nil {
			return f, err
		}
	}
	if f.TenantPrefix = first(q, "tenantPrefix"); len(f.TenantPrefix) > substate.MaxTenantIDBytes {
		return f, substate.Errorf(substate.EINVALID, "tenantPrefix: longer than %d bytes", substate.MaxTenantIDBytes)
	}
	f.Fingerprint, f.Step, f.WorkflowType = first(q, "fingerprint"), first(q, "step"), first(q, "workflowType")
	if err := f.CheckLengths(); err != nil {
		return f, err
	}
	if v := first(q, "verb"); v != "" {
		if f.Verb, err = substate.ParseVerb(v); err != nil {
			return f, err
		}
	}
	if v := first(q, "inStateLongerThan"); v != "" {
		if f.InStateLongerThan, err = time.ParseDuration(v); err != nil || f.InStateLongerThan < 0 {
			return f, substate.Errorf(substate.EINVALID, "inStateLongerThan %s: want a duration such as 90s, 15m or 2h", substate.QuotePrefix(v, substate.QuoteLimit))
		}
	}
	if v := first(q, "stuck"); v != "" {
		if f.Stuck, err = strconv.ParseBool(v); err != nil {
			return f, substate.Errorf(substate.EINVALID, "stuck %s: want true or false", substate.QuotePrefix(v, substate.QuoteLimit))
		}
	}
	return f, nil
}

// CheckParams returns an EINVALID error for the first parameter of q (in
// name order) that is not one of valid, or that is given more than once:
// a misspelt parameter is refused, not ignored.
func CheckParams(q map[string][]string, valid []string) error {
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(valid, k):
			return substate.Errorf(substate.EINVALID, "unknown query parameter %s; the valid ones are %s",
				substate.QuotePrefix(k, substate.QuoteLimit), strings.Join(valid, ", "))
		case len(q[k]) > 1:
			return substate.Errorf(substate.EINVALID, "query parameter %s given %d times; give it once", k, len(q[k]))
		}
	}
	return nil
}

// first returns the first value of the parameter k, "" when absent.
func first(q map[string][]string, k string) string {
	if v := q[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// EncodeTenantFilter writes f as the query parameters ParseTenantFilter
// reads; zero fields are left out.
func EncodeTenantFilter(f substate.TenantFilter) url.Values {
	q := encodeConditions(f)
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if v := sortOf(f); v != "" {
		q.Set("sort", v)
	}
	if f.PageToken != "" {
		q.Set("pageToken", f.PageToken)
	}
	return q
}

// encodeConditions writes the conditions of f that parseConditions reads.
func encodeConditions(f substate.TenantFilter) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("subState", string(f.SubState))
	if f.HasError {
		q.Set("hasError", "true")
	}
	if f.MinRetryCount != 0 {
		q.Set("minRetryCount", strconv.Itoa(f.MinRetryCount))
	}
	set("provider", string(f.Provider))
	set("tenantPrefix", f.TenantPrefix)
	set("fingerprint", f.Fingerprint)
	set("step", f.Step)
	set("workflowType", f.WorkflowType)
	set("verb", string(f.Verb))
	if f.InStateLongerThan != 0 {
		q.Set("inStateLongerThan", f.InStateLongerThan.String())
	}
	if f.Stuck {
		q.Set("stuck", "true")
	}
	return q
}

func nonNegative(name, v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, substate.Errorf(substate.EINVALID, "%s %q: want a non-negative integer", name, v)
	}
	return n, nil
}
