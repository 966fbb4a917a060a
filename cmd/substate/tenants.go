package main

import (
	"context"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
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
	OutputFlags `embed:""`
}

// Run prints the tenant.
func (c *TenantsGetCmd) Run(ctx context.Context, m *Main) error {
	v, err := c.Client().Tenant(ctx, c.ID)
	if err != nil {
		return err
	}
	return c.Printer(m.Stdout).PrintTable(v, func(wide bool) termtext.Table {
		return termtext.TenantTable([]substate.TenantView{v}, wide)
	})
}

// FilterFlags select tenants as GET /v1/tenants and GET /v1/groups do.
type FilterFlags struct {
	SubState          string        `help:"Only tenants in this sub-state (running, waiting, backing-off, error, succeeded, failed)."`
	HasError          bool          `help:"Only tenants with an error message."`
	MinRetries        int           `help:"Only tenants with at least this many retries."`
	Provider          string        `help:"Only tenants whose execution runs on this provider (stepfunctions, restate, engine)."`
	TenantPrefix      string        `help:"Only tenants whose id starts with this."`
	Fingerprint       string        `help:"Only tenants with this error fingerprint (see tenants groups --by fingerprint)."`
	Step              string        `help:"Only tenants at this step (see tenants groups --by step)."`
	WorkflowType      string        `help:"Only tenants of this workflow type (see tenants groups --by workflowType)."`
	Verb              string        `help:"Only tenants with this verb form (executing, waiting, retrying, failing, completed, failed, cancelled)."`
	InStateLongerThan time.Duration `help:"Only tenants that entered their sub-state longer ago than this (15m, 2h)."`
	Stuck             bool          `help:"Only stuck tenants (their deadline from --slo-file passed with no change), the longest stuck first."`
}

// Filter returns the filter the flags say; the server checks the values.
func (c *FilterFlags) Filter() substate.TenantFilter {
	return substate.TenantFilter{SubState: substate.SubState(c.SubState), HasError: c.HasError, MinRetryCount: max(c.MinRetries, 0),
		Provider: substate.Provider(c.Provider), TenantPrefix: c.TenantPrefix, Fingerprint: c.Fingerprint,
		Step: c.Step, WorkflowType: c.WorkflowType,
		Verb: substate.Verb(c.Verb), InStateLongerThan: c.InStateLongerThan, Stuck: c.Stuck}
}

// TenantsListCmd is "substate tenants list".
type TenantsListCmd struct {
	FilterFlags `embed:""`
	Sort        string `enum:"id,tenantId:desc,retryCount:desc,retryCount:asc,updatedAt:desc,updatedAt:asc" default:"id" help:"Order: id (the default: tenant id for most filters), retryCount:desc (the most retried first), updatedAt:desc (the latest changed first), or one of them from its end: tenantId:desc, retryCount:asc, updatedAt:asc."`
	SortRetries bool   `hidden:"" help:"The same as --sort retryCount:desc."`
	Limit       int    `default:"100" help:"Tenants per page."`
	PageToken   string `help:"Start at this page: the token the previous page printed after \"more:\"."`
	All         bool   `help:"Follow page tokens to the end."`
	ServerFlags `embed:""`
	OutputFlags `embed:""`
}

// Run prints the matching tenants: a page, or every page with --all.
func (c *TenantsListCmd) Run(ctx context.Context, m *Main) error {
	f := c.Filter()
	f.Limit, f.PageToken = c.Limit, c.PageToken
	if c.SortRetries && c.Sort != "id" && c.Sort != "retryCount:desc" {
		return substate.Errorf(substate.EINVALID, "--sort-retries is --sort retryCount:desc: give one of it and --sort %s", c.Sort)
	}
	sort := c.Sort
	if sort == "id" {
		sort = ""
	}
	if err := httpapi.ParseSort(sort, &f); err != nil {
		return err
	}
	f.SortRetryDesc = f.SortRetryDesc || c.SortRetries
	page := substate.TenantPage{Tenants: []substate.TenantView{}}
	for p, err := range c.Client().TenantPages(ctx, f) {
		if err != nil {
			return err
		}
		page.Tenants, page.NextPageToken = append(page.Tenants, p.Tenants...), p.NextPageToken
		if !c.All {
			break
		}
	}
	return c.Printer(m.Stdout).PrintTable(page, func(wide bool) termtext.Table {
		t := termtext.TenantTable(page.Tenants, wide)
		t.Empty = "no tenants match"
		if page.NextPageToken != "" {
			t.Footer = []string{"more: --page-token " + termtext.Text(page.NextPageToken)}
		}
		return t
	})
}

// TenantsGroupsCmd is "substate tenants groups".
type TenantsGroupsCmd struct {
	By          string `default:"fingerprint" enum:"fingerprint,subState,provider,step,workflowType" help:"The field to group by: fingerprint, subState, provider, step or workflowType."`
	Limit       int    `default:"20" help:"Groups to show, the largest first."`
	FilterFlags `embed:""`
	ServerFlags `embed:""`
	OutputFlags `embed:""`
}

// Run prints the groups.
func (c *TenantsGroupsCmd) Run(ctx context.Context, m *Main) error {
	page, err := c.Client().Groups(ctx, substate.GroupQuery{By: substate.GroupBy(c.By), Filter: c.Filter(), Limit: c.Limit})
	if err != nil {
		return err
	}
	return c.Printer(m.Stdout).PrintTable(page, func(wide bool) termtext.Table {
		return termtext.GroupTable(page, wide)
	})
}
