package main

import (
	"context"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
)

// TenantsCmd is "substate tenants".
type TenantsCmd struct {
	Get    TenantsGetCmd    `cmd:"" help:"Show one tenant's view."`
	List   TenantsListCmd   `cmd:"" help:"List tenants, filtered from the view's indexes."`
	Groups TenantsGroupsCmd `cmd:"" help:"Count tenants by error fingerprint, sub-state, provider, step or workflow type."`
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

// FilterFlags select tenants as GET /v1/tenants and GET /v1/groups do.
type FilterFlags struct {
	SubState          string        `help:"Only tenants in this sub-state (running, waiting, backing-off, error, succeeded, failed)."`
	HasError          bool          `help:"Only tenants with an error message."`
	MinRetries        int           `help:"Only tenants with at least this many retries."`
	Provider          string        `help:"Only tenants whose execution runs on this provider (stepfunctions, restate, engine)."`
	TenantPrefix      string        `help:"Only tenants whose id starts with this."`
	Fingerprint       string        `help:"Only tenants with this error fingerprint (see tenants groups --by fingerprint)."`
	Verb              string        `help:"Only tenants with this verb form (executing, waiting, retrying, failing, completed, failed, cancelled)."`
	InStateLongerThan time.Duration `help:"Only tenants that entered their sub-state longer ago than this (15m, 2h)."`
	Stuck             bool          `help:"Only stuck tenants (their deadline from --slo-file passed with no change), the longest stuck first."`
}

// Filter returns the filter the flags say; the server checks the values.
func (c *FilterFlags) Filter() substate.TenantFilter {
	return substate.TenantFilter{SubState: substate.SubState(c.SubState), HasError: c.HasError, MinRetryCount: max(c.MinRetries, 0),
		Provider: substate.Provider(c.Provider), TenantPrefix: c.TenantPrefix, Fingerprint: c.Fingerprint,
		Verb: substate.Verb(c.Verb), InStateLongerThan: c.InStateLongerThan, Stuck: c.Stuck}
}

// TenantsListCmd is "substate tenants list".
type TenantsListCmd struct {
	FilterFlags `embed:""`
	SortRetries bool `help:"Highest retry count first."`
	Limit       int  `default:"100" help:"Tenants per page."`
	All         bool `help:"Follow page tokens to the end."`
	ServerFlags `embed:""`
}

// Run prints the matching tenants.
func (c *TenantsListCmd) Run(ctx context.Context, m *Main) error {
	f := c.Filter()
	f.SortRetryDesc, f.Limit = c.SortRetries, c.Limit
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

// TenantsGroupsCmd is "substate tenants groups".
type TenantsGroupsCmd struct {
	By          string `default:"fingerprint" enum:"fingerprint,subState,provider,step,workflowType" help:"The field to group by: fingerprint, subState, provider, step or workflowType."`
	Limit       int    `default:"20" help:"Groups to show, the largest first."`
	FilterFlags `embed:""`
	ServerFlags `embed:""`
}

// Run prints the groups as a table.
func (c *TenantsGroupsCmd) Run(ctx context.Context, m *Main) error {
	page, err := c.Client().Groups(ctx, substate.GroupQuery{By: substate.GroupBy(c.By), Filter: c.Filter(), Limit: c.Limit})
	if err != nil {
		return err
	}
	if c.JSON {
		return termtext.WriteJSON(m.Stdout, page)
	}
	return termtext.WriteGroups(m.Stdout, page)
}
