package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/substatehq/substate"
)

// PreviewJob posts a dry run: POST /v1/actions with dryRun.
func (c *Client) PreviewJob(ctx context.Context, req substate.JobRequest) (substate.JobPreview, error) {
	var p substate.JobPreview
	req.DryRun = true
	err := c.call(ctx, http.MethodPost, "/v1/actions", c.APIKey, req, &p)
	return p, err
}

// CreateJob posts a job: POST /v1/actions.
func (c *Client) CreateJob(ctx context.Context, req substate.JobRequest) (substate.Job, error) {
	var j substate.Job
	req.DryRun = false
	err := c.call(ctx, http.MethodPost, "/v1/actions", c.APIKey, req, &j)
	return j, err
}

// Job reads GET /v1/actions/{id}.
func (c *Client) Job(ctx context.Context, id string) (substate.Job, error) {
	var j substate.Job
	err := c.Get(ctx, "/v1/actions/"+url.PathEscape(id), &j)
	return j, err
}

// Jobs reads GET /v1/actions?limit=N.
func (c *Client) Jobs(ctx context.Context, limit int) ([]substate.Job, error) {
	var page struct {
		Jobs []substate.Job `json:"jobs"`
	}
	path := "/v1/actions"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	err := c.Get(ctx, path, &page)
	return page.Jobs, err
}

// ControlJob posts POST /v1/actions/{id}/{op}.
func (c *Client) ControlJob(ctx context.Context, id string, op substate.JobOp) (substate.Job, error) {
	var j substate.Job
	err := c.call(ctx, http.MethodPost, "/v1/actions/"+url.PathEscape(id)+"/"+string(op), c.APIKey, nil, &j)
	return j, err
}

// JobReport reads one page of GET /v1/actions/{id}/report.
func (c *Client) JobReport(ctx context.Context, id string, q substate.JobReportQuery) (substate.JobReport, error) {
	var rep substate.JobReport
	v := url.Values{}
	if q.After > 0 {
		v.Set("after", strconv.Itoa(q.After))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Outcome != "" {
		v.Set("outcome", q.Outcome)
	}
	err := c.Get(ctx, "/v1/actions/"+url.PathEscape(id)+"/report?"+v.Encode(), &rep)
	return rep, err
}

// WatchJob reads GET /v1/actions/{id}/events and calls fn with the job at
// every event, until the job ends (the last call has it final), the
// stream breaks or ctx is done.
func (c *Client) WatchJob(ctx context.Context, id string, fn func(substate.Job)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.URL, "/")+"/v1/actions/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	client := *cmp.Or(c.HTTPClient, http.DefaultClient)
	client.Timeout = 0 // a stream lasts as long as the job
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("ask the worker at %s (is \"substate run\" running?): %w", c.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerError(resp)
	}
	return readJobEvents(resp.Body, fn)
}

// errJobEnded stops the reading of a job's stream at its "end" event.
var errJobEnded = errors.New("the job ended")

// maxJobEventBytes bounds one event of a job's stream.
const maxJobEventBytes = 4 << 20

// readJobEvents decodes the events of a job's stream.
func readJobEvents(r io.Reader, fn func(substate.Job)) error {
	err := scanEvents(r, maxJobEventBytes, func(_, name string, data []byte) error {
		switch name {
		case "error":
			err := errorOf(data)
			return substate.Errorf(substate.ErrorCode(err), "the worker stopped the job's stream: %s", substate.ErrorMessage(err))
		case "progress", "end":
			var j substate.Job
			if err := json.Unmarshal(data, &j); err != nil {
				return fmt.Errorf("decode job event: %w", err)
			}
			fn(j)
			if name == "end" {
				return errJobEnded
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errJobEnded):
		return nil
	case substate.ErrorCode(err) == substate.EUNAVAILABLE:
		return err
	case err != nil:
		return fmt.Errorf("the job's stream broke: %w", err)
	}
	return substate.Errorf(substate.EUNAVAILABLE, "the job's stream ended before the job did (the worker stopped?): watch it again")
}
