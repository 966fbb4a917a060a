package httpapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/substatehq/substate"
)

// DefaultTenantLimit is the page size of a scoped listing that asks for
// none.
const DefaultTenantLimit = 100

// ScopedViews returns the view as a key restricted to a tenant-id prefix
// sees it: single reads of other tenants are 403, listings hold only the
// tenants under the prefix (paged with tokens of its own), Apply and
// Checkpoint are the view's. An empty prefix returns v itself.
//
// A listing reads the view's pages and keeps the matching tenants, so a
// prefix few tenants have costs a scan of the listing's index; a view that
// filters by prefix in its indexes would make it a seek.
func ScopedViews(v substate.ViewStore, prefix string) substate.ViewStore {
	if prefix == "" {
		return v
	}
	return scopedViews{ViewStore: v, prefix: prefix}
}

// ViewsFor returns the view as the request's principal sees it: all of it
// without a principal or a prefix.
func ViewsFor(ctx context.Context, v substate.ViewStore) substate.ViewStore {
	if p, ok := PrincipalFrom(ctx); ok {
		return ScopedViews(v, p.TenantPrefix)
	}
	return v
}

type scopedViews struct {
	substate.ViewStore
	prefix string
}

func (s scopedViews) Tenant(ctx context.Context, id string) (substate.TenantView, error) {
	if !strings.HasPrefix(id, s.prefix) {
		return substate.TenantView{}, substate.Errorf(substate.EFORBIDDEN, "tenant %q is outside this key's tenants (prefix %q)", id, s.prefix)
	}
	return s.ViewStore.Tenant(ctx, id)
}

// scopedToken is where a scoped listing resumes: in the view's page that
// starts at Under (read with Limit), after its first Skip tenants.
type scopedToken struct {
	Under string `json:"u,omitempty"`
	Skip  int    `json:"s,omitempty"`
	Limit int    `json:"l,omitempty"`
}

const scopedTokenPrefix = "p1."

func (s scopedViews) Tenants(ctx context.Context, f substate.TenantFilter) (substate.TenantPage, error) {
	limit := cmp.Or(f.Limit, DefaultTenantLimit)
	cur, err := decodeScopedToken(f.PageToken, limit)
	if err != nil {
		return substate.TenantPage{}, err
	}
	var page substate.TenantPage
	for {
		q := f
		q.PageToken, q.Limit = cur.Under, cur.Limit
		under, err := s.ViewStore.Tenants(ctx, q)
		if err != nil {
			return substate.TenantPage{}, err
		}
		for i := cur.Skip; i < len(under.Tenants); i++ {
			if !strings.HasPrefix(under.Tenants[i].TenantID, s.prefix) {
				continue
			}
			page.Tenants = append(page.Tenants, under.Tenants[i])
			if len(page.Tenants) < limit {
				continue
			}
			next := scopedToken{Under: cur.Under, Skip: i + 1, Limit: cur.Limit}
			if i+1 == len(under.Tenants) {
				next = scopedToken{Under: under.NextPageToken, Limit: cur.Limit}
			}
			if next.Under != "" || next.Skip > 0 {
				page.NextPageToken = encodeScopedToken(next)
			}
			return page, nil
		}
		if under.NextPageToken == "" {
			return page, nil
		}
		if err := ctx.Err(); err != nil {
			return substate.TenantPage{}, err
		}
		cur = scopedToken{Under: under.NextPageToken, Limit: cur.Limit}
	}
}

func encodeScopedToken(t scopedToken) string {
	b, _ := json.Marshal(t)
	return scopedTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// decodeScopedToken reads a token of encodeScopedToken; "" starts a
// listing whose view pages hold limit tenants.
func decodeScopedToken(s string, limit int) (scopedToken, error) {
	if s == "" {
		return scopedToken{Limit: limit}, nil
	}
	bad := substate.Errorf(substate.EINVALID, "invalid page token")
	rest, ok := strings.CutPrefix(s, scopedTokenPrefix)
	if !ok {
		return scopedToken{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	var t scopedToken
	if err != nil || json.Unmarshal(b, &t) != nil || t.Skip < 0 || t.Limit <= 0 {
		return scopedToken{}, bad
	}
	return t, nil
}

// CountTenants counts the tenants matching f (its page fields ignored) by
// paging through the listing, so on a scoped view it counts the tenants
// under the prefix.
func CountTenants(ctx context.Context, v substate.ViewStore, f substate.TenantFilter) (int, error) {
	f.PageToken, f.Limit = "", 1000
	n := 0
	for {
		page, err := v.Tenants(ctx, f)
		if err != nil {
			return 0, err
		}
		n += len(page.Tenants)
		if page.NextPageToken == "" {
			return n, nil
		}
		f.PageToken = page.NextPageToken
	}
}
