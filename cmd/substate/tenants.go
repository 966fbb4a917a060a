package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
)

// ServerFlags say which running worker to ask.
type ServerFlags struct {
	Server string `default:"http://127.0.0.1:8080" help:"Base URL of a running substate worker."`
	APIKey string `name:"api-key" help:"Read-API key, sent as Authorization: Bearer (needed once the worker has keys)."`
	JSON   bool   `name:"json" help:"Print JSON instead of a table."`
}

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
	var v substate.TenantView
	if err := getJSON(ctx, c.Server, c.APIKey, "/v1/tenants/"+url.PathEscape(c.ID), &v); err != nil {
		return err
	}
	if c.JSON {
		return termtext.WriteJSON(m.Stdout, v)
	}
	return printTenants(m.Stdout, []substate.TenantView{v})
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
	q := url.Values{}
	if c.SubState != "" {
		q.Set("subState", c.SubState)
	}
	if c.HasError {
		q.Set("hasError", "true")
	}
	if c.MinRetries > 0 {
		q.Set("minRetryCount", strconv.Itoa(c.MinRetries))
	}
	if c.SortRetries {
		q.Set("sort", "retryCount:desc")
	}
	q.Set("limit", strconv.Itoa(c.Limit))
	var all []substate.TenantView
	for {
		var page substate.TenantPage
		if err := getJSON(ctx, c.Server, c.APIKey, "/v1/tenants?"+q.Encode(), &page); err != nil {
			return err
		}
		all = append(all, page.Tenants...)
		if !c.All || page.NextPageToken == "" {
			if c.JSON {
				return termtext.WriteJSON(m.Stdout, substate.TenantPage{Tenants: all, NextPageToken: page.NextPageToken})
			}
			return printTenants(m.Stdout, all)
		}
		q.Set("pageToken", page.NextPageToken)
	}
}

func printTenants(w io.Writer, views []substate.TenantView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tSUB-STATE\tVERB\tSTEP\tRETRIES\tPROVIDER\tEXECUTION\tUPDATED\tERROR")
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", termtext.Text(v.TenantID), termtext.Dash(termtext.Text(string(v.WorkflowSubState))),
			termtext.Dash(termtext.Text(string(v.WorkflowVerb))), termtext.Dash(termtext.Clip(v.WorkflowStep, 30)), v.WorkflowRetryCount, termtext.Dash(termtext.Text(string(v.Provider))),
			termtext.Dash(termtext.Shorten(v.WorkflowExecutionID, 48)), age(v.UpdatedAt), termtext.Dash(termtext.Clip(v.WorkflowErrorMessage, 60)))
	}
	return tw.Flush()
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

// getJSON GETs path from a worker, with key as its bearer token unless
// it is empty, and decodes the JSON answer, turning an error body into an
// error with its message.
func getJSON(ctx context.Context, base, key, path string, v any) error {
	return callWorker(ctx, http.MethodGet, base, path, key, nil, v)
}
