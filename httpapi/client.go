package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/termtext"
)

// Client calls a running worker's API: the read routes, the execution
// routes and /readyz. An error answer becomes a *substate.Error with the
// worker's code and message.
type Client struct {
	// URL is the worker's base URL, such as http://127.0.0.1:8080; a path
	// under it (where a proxy mounts the worker) is kept.
	URL string
	// APIKey, when not empty, is sent as Authorization: Bearer.
	APIKey string
	// HTTPClient sends the requests; nil is http.DefaultClient.
	HTTPClient *http.Client
}

// Compile-time check that a Client reads histories.
var _ substate.HistoryReader = (*Client)(nil)

// Tenant reads GET /v1/tenants/{id}.
func (c *Client) Tenant(ctx context.Context, id string) (substate.TenantView, error) {
	var v substate.TenantView
	err := c.Get(ctx, "/v1/tenants/"+url.PathEscape(id), &v)
	return v, err
}

// Tenants reads one page of GET /v1/tenants, filtered by f.
func (c *Client) Tenants(ctx context.Context, f substate.TenantFilter) (substate.TenantPage, error) {
	var page substate.TenantPage
	err := c.Get(ctx, "/v1/tenants?"+EncodeTenantFilter(f).Encode(), &page)
	return page, err
}

// Groups reads GET /v1/groups: the tenants q.Filter matches, grouped by
// q.By.
func (c *Client) Groups(ctx context.Context, q substate.GroupQuery) (substate.GroupPage, error) {
	var page substate.GroupPage
	err := c.Get(ctx, "/v1/groups?"+EncodeGroupQuery(q).Encode(), &page)
	return page, err
}

// TenantPages reads GET /v1/tenants page by page from f, following the
// page tokens until the last page, an error (yielded last) or the caller
// stops.
func (c *Client) TenantPages(ctx context.Context, f substate.TenantFilter) iter.Seq2[substate.TenantPage, error] {
	return func(yield func(substate.TenantPage, error) bool) {
		for {
			page, err := c.Tenants(ctx, f)
			if err != nil {
				yield(page, err)
				return
			}
			if !yield(page, nil) || page.NextPageToken == "" {
				return
			}
			f.PageToken = page.NextPageToken
		}
	}
}

// AllTenants reads every tenant f matches, page by page.
func (c *Client) AllTenants(ctx context.Context, f substate.TenantFilter) ([]substate.TenantView, error) {
	var out []substate.TenantView
	for page, err := range c.TenantPages(ctx, f) {
		if err != nil {
			return nil, err
		}
		out = append(out, page.Tenants...)
	}
	return out, nil
}

// Checkpoint reads GET /v1/view/checkpoint.
func (c *Client) Checkpoint(ctx context.Context) (ViewPosition, error) {
	var p ViewPosition
	err := c.Get(ctx, "/v1/view/checkpoint", &p)
	return p, err
}

// Applied reads the applied position of GET /v1/view/checkpoint: the last
// sequence the view reflects.
func (c *Client) Applied(ctx context.Context) (uint64, error) {
	p, err := c.Checkpoint(ctx)
	return p.Applied, err
}

// History reads one page of GET /v1/tenants/{id}/history.
func (c *Client) History(ctx context.Context, q substate.HistoryQuery) (substate.HistoryPage, error) {
	var page substate.HistoryPage
	path := "/v1/tenants/" + url.PathEscape(q.TenantID) + "/history?" + EncodeHistoryQuery(q).Encode()
	err := c.Get(ctx, path, &page)
	return page, err
}

// Execution reads GET /v1/tenants/{id}/execution.
func (c *Client) Execution(ctx context.Context, tenant string) (substate.ExecutionInfo, error) {
	var info substate.ExecutionInfo
	err := c.Get(ctx, "/v1/tenants/"+url.PathEscape(tenant)+"/execution", &info)
	return info, err
}

// Act posts an action on a tenant's execution: POST
// /v1/tenants/{id}/execution/{action}.
func (c *Client) Act(ctx context.Context, tenant string, action substate.ExecutionAction, req ActionRequest) (substate.ExecutionResult, error) {
	var res substate.ExecutionResult
	path := "/v1/tenants/" + url.PathEscape(tenant) + "/execution/" + string(action)
	err := c.call(ctx, http.MethodPost, path, c.APIKey, req, &res)
	return res, err
}

// Ready reads /readyz, without the key (it needs none): nil when the
// worker is ready, else the reason it gives.
func (c *Client) Ready(ctx context.Context) error {
	return c.call(ctx, http.MethodGet, "/readyz", "", nil, &struct{}{})
}

// Get GETs path (with its query) under URL and decodes the JSON answer
// into v.
func (c *Client) Get(ctx context.Context, path string, v any) error {
	return c.call(ctx, http.MethodGet, path, c.APIKey, nil, v)
}

// call sends a request, with key when it is not empty and body as JSON
// when it is not nil, and decodes the JSON answer into v.
func (c *Client) call(ctx context.Context, method, path, key string, body, v any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := cmp.Or(c.HTTPClient, http.DefaultClient).Do(req)
	if err != nil {
		return fmt.Errorf("ask the worker at %s (is \"substate run\" running?): %w", c.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return answerError(resp)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// answerError is the error of a worker's answer other than 200: the code
// and message of its JSON error body or, for any other body (a proxy's
// page, a route the worker does not serve), the body's first line.
func answerError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return substate.Errorf(e.Error.Code, "%s (HTTP %d)", e.Error.Message, resp.StatusCode)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return substate.Errorf(substate.EINTERNAL, "the worker answered HTTP %d %s: %s",
		resp.StatusCode, http.StatusText(resp.StatusCode), termtext.Clip(cmp.Or(line, "no body"), 200))
}
