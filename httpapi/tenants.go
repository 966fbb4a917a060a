package httpapi

import (
	"net/http"
	"net/url"
	"strconv"

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

// ParseTenantFilter reads the query parameters of GET /v1/tenants: subState,
// hasError, minRetryCount, provider, tenantPrefix, sort (retryCount:desc or
// updatedAt:desc), limit and pageToken.
func ParseTenantFilter(q map[string][]string) (substate.TenantFilter, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	var f substate.TenantFilter
	var err error
	if v := get("subState"); v != "" {
		if f.SubState, err = substate.ParseSubState(v); err != nil {
			return f, err
		}
	}
	if v := get("hasError"); v != "" {
		if f.HasError, err = strconv.ParseBool(v); err != nil {
			return f, substate.Errorf(substate.EINVALID, "hasError %q: want true or false", v)
		}
	}
	if f.MinRetryCount, err = nonNegative("minRetryCount", get("minRetryCount")); err != nil {
		return f, err
	}
	if f.Limit, err = nonNegative("limit", get("limit")); err != nil {
		return f, err
	}
	switch v := get("sort"); v {
	case "":
	case "retryCount:desc":
		f.SortRetryDesc = true
	case "updatedAt:desc":
		f.SortUpdatedDesc = true
	default:
		return f, substate.Errorf(substate.EINVALID, "sort %q: want retryCount:desc or updatedAt:desc", v)
	}
	if v := get("provider"); v != "" {
		if f.Provider, err = substate.ParseProvider(v); err != nil {
			return f, err
		}
	}
	if f.TenantPrefix = get("tenantPrefix"); len(f.TenantPrefix) > substate.MaxTenantIDBytes {
		return f, substate.Errorf(substate.EINVALID, "tenantPrefix: longer than %d bytes", substate.MaxTenantIDBytes)
	}
	f.PageToken = get("pageToken")
	return f, nil
}

// EncodeTenantFilter writes f as the query parameters ParseTenantFilter
// reads; zero fields are left out.
func EncodeTenantFilter(f substate.TenantFilter) url.Values {
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
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	switch {
	case f.SortRetryDesc:
		q.Set("sort", "retryCount:desc")
	case f.SortUpdatedDesc:
		q.Set("sort", "updatedAt:desc")
	}
	set("provider", string(f.Provider))
	set("tenantPrefix", f.TenantPrefix)
	set("pageToken", f.PageToken)
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
