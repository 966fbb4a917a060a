package main

import (
	"context"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
)

// TenantsCmd is "substate tenants".
type TenantsCmd struct {
	Get  TenantsGetCmd  `cmd:"" help:"Show one tenant's view."`
	List TenantsListCmd `cmd:"" help:"List tenants, filtered from the view's indexes."`
}

// TenantsGetCmd is "substate tenants get ID".
type TenantsGetCmd struct {
	ID          string `arg:"" help:"Tenant id."`
	ServerFlags `embed:""`
}

// Run prints the tenant.
func (c *TenantsGetCmd) Run(ctx context.Context, m *Main) error {
	v, err := c.Client().Tenant(ctx, c.ID)
	if err != nil {
		return err
	}
	if c.JSON {
		return termtext.WriteJSON(m.Stdout, v)
	}
	return termtext.WriteTenants(m.Stdout, []substate.TenantView{v})
}

// TenantsListCmd is "substate tenants list".
type TenantsListCmd struct {
	SubState    string `help:"Only tenants in this sub-state (running, waiting, backing-off, error, succeeded, failed)."`
	HasError    bool   `help:"Only tenants with an error message."`
	MinRetries  int    `help:"Only tenants with at least this many retries."`
	SortRetries bool   `help:"Highest retry count first."`
	Limit       int    `default:"100" help:"Tenants per page."`
	All         bool   `help:"Follow page tokens to the end."`
	ServerFlags `embed:""`
}

// Run prints the matching tenants.
func (c *TenantsListCmd) Run(ctx context.Context, m *Main) error {
	f := substate.TenantFilter{SubState: substate.SubState(c.SubState), HasError: c.HasError,
		MinRetryCount: max(c.MinRetries, 0), SortRetryDesc: c.SortRetries, Limit: c.Limit}
	var all []substate.TenantView
	var next string
	for page, err := range c.Client().TenantPages(ctx, f) {
		if err != nil {
			return err
		}
		all, next = append(all, page.Tenants...), page.NextPageToken
		if !c.All {
			break
		}
	}
	if c.JSON {
		return termtext.WriteJSON(m.Stdout, substate.TenantPage{Tenants: all, NextPageToken: next})
	}
	return termtext.WriteTenants(m.Stdout, all)
}
