package httpapi

import (
	"context"
	"slices"
	"strings"

	"github.com/substatehq/substate"
)

// ScopedViews returns the view as a key restricted to a tenant-id prefix
// sees it: single reads of other tenants are 403, listings hold only the
// tenants under the prefix, Apply and Checkpoint are the view's. An empty
// prefix returns v itself.
//
// A listing is the view's own with the key's prefix as its TenantPrefix
// filter (a seek on the indexes ordered by tenant id), and its page
// tokens are the view's, bound to that filter.
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

// narrow returns f narrowed to the key's prefix, false when no tenant id
// can start with both.
func (s scopedViews) narrow(f substate.TenantFilter) (substate.TenantFilter, bool) {
	switch {
	case strings.HasPrefix(f.TenantPrefix, s.prefix): // as narrow as the key's, or narrower
	case strings.HasPrefix(s.prefix, f.TenantPrefix):
		f.TenantPrefix = s.prefix
	default:
		return f, false
	}
	return f, true
}

func (s scopedViews) Tenants(ctx context.Context, f substate.TenantFilter) (substate.TenantPage, error) {
	f, ok := s.narrow(f)
	if !ok {
		return substate.TenantPage{Tenants: []substate.TenantView{}}, nil
	}
	page, err := s.ViewStore.Tenants(ctx, f)
	// The view filters by TenantPrefix; should one not, its other tenants
	// still stay out.
	page.Tenants = slices.DeleteFunc(page.Tenants, func(v substate.TenantView) bool { return !strings.HasPrefix(v.TenantID, s.prefix) })
	return page, err
}

// Groups counts only the tenants under the key's prefix: the view's group
// query with the prefix as its TenantPrefix filter, which the view answers
// by reading those tenants (see state.DB.Groups for the cost).
func (s scopedViews) Groups(ctx context.Context, q substate.GroupQuery) (substate.GroupPage, error) {
	f, ok := s.narrow(q.Filter)
	if !ok {
		return substate.GroupPage{By: q.By, Groups: []substate.Group{}}, nil
	}
	q.Filter = f
	return s.ViewStore.Groups(ctx, q)
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
