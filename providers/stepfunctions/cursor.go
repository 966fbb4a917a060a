package stepfunctions

import (
	"encoding/json"
)

// cursorOf returns a copy of what the provider remembers of an execution
// (the zero cursor for one it never read), and drops, at most once a
// cursorIdle, the cursors of executions not polled for that long.
func (p *Provider) cursorOf(arn string) *cursor {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.Now()
	if now.Sub(p.pruned) >= cursorIdle {
		for k, c := range p.cursors {
			if now.Sub(c.used) >= cursorIdle {
				delete(p.cursors, k)
			}
		}
		p.pruneBehind(now, cursorIdle)
		p.pruned = now
	}
	c := &cursor{}
	if old := p.cursors[arn]; old != nil {
		*c = *old
	}
	return c
}

// keep remembers the execution's cursor after a poll, ended executions'
// too: the reconciler reads an execution once more after it fails, and a
// redrive adds to its history, so the next read of either costs one call
// when nothing is new. Idle cursors are dropped after cursorIdle.
func (p *Provider) keep(arn string, c *cursor, payload *PollPayload) {
	// An execution the poll could not describe keeps no cursor: the next
	// poll reads its history from the start.
	if statusOf(payload.Execution) == "" {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.cursors, arn)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cursors == nil {
		p.cursors = map[string]*cursor{}
	}
	c.last, c.used = *payload, p.Now()
	p.cursors[arn] = c
}

// statusOf returns the status of a DescribeExecution answer, "" for one
// that does not decode.
func statusOf(execution json.RawMessage) string {
	var x struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(execution, &x); err != nil {
		return ""
	}
	return x.Status
}
