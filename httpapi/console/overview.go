package console

import (
	"context"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/httpx"
)

// Overview is what GET /console/api/overview answers.
type Overview struct {
	Now time.Time `json:"now"`
	// Counts are the tenants of each sub-state; nil when the view keeps no
	// counters or the caller's key sees only some tenants.
	Counts map[substate.SubState]int64 `json:"counts"`
	// Stuck are the stuck tenants of each sub-state (their deadline passed
	// with no change; GET /v1/tenants?stuck=true lists them); nil like
	// Counts.
	Stuck map[substate.SubState]int64 `json:"stuck"`
	// RestateUIURL is the Restate UI's URL of an invocation, with
	// InvocationIDPlaceholder where its id goes; "" without one.
	RestateUIURL string   `json:"restateUiUrl,omitempty"`
	Activity     Activity `json:"activity"`
	DLQ          DLQSize  `json:"dlq"`
	Health       Health   `json:"health"`
	// Streams are the open console streams and those dropped for being slow.
	Streams struct {
		Open    int `json:"open"`
		Dropped int `json:"dropped"`
	} `json:"streams"`
}

// DLQSize is how many dead letters SUBSTATE_DLQ holds.
type DLQSize struct {
	Messages uint64 `json:"messages"`
	Error    string `json:"error,omitempty"`
}

// Health is the worker's health as the console shows it.
type Health struct {
	NATS       string        `json:"nats"` // CONNECTED, RECONNECTING…
	Consumers  []ConsumerLag `json:"consumers"`
	Reconciler *Sweep        `json:"reconciler,omitempty"`
}

// ConsumerLag is a durable consumer's backlog.
type ConsumerLag struct {
	Stream     string `json:"stream"`
	Name       string `json:"name"`
	Pending    uint64 `json:"pending"`    // not yet delivered
	AckPending int    `json:"ackPending"` // delivered, not yet acknowledged
	Error      string `json:"error,omitempty"`
}

// Sweep says when the reconciler last finished a sweep.
type Sweep struct {
	Last  *time.Time `json:"last"` // nil: none since the worker started
	Known bool       `json:"known"`
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	p, _ := httpapi.PrincipalFrom(ctx)
	o := Overview{Now: c.now().UTC(), RestateUIURL: c.RestateUIURL}
	if c.Counts != nil && p.TenantPrefix == "" {
		counts, err := c.Counts(ctx)
		if err != nil {
			httpx.Error(w, r, err, c.logger())
			return
		}
		o.Counts = counts
	}
	if c.StuckCounts != nil && p.TenantPrefix == "" {
		stuck, err := c.StuckCounts(ctx)
		if err != nil {
			httpx.Error(w, r, err, c.logger())
			return
		}
		o.Stuck = map[substate.SubState]int64{}
		for _, s := range stuck {
			o.Stuck[s.SubState] += s.Count
		}
	}
	if p.TenantPrefix == "" {
		o.Activity = c.activity.read(ctx)
	}
	o.DLQ = c.dlqSize(ctx)
	o.Health = c.health(ctx)
	_, o.Streams.Dropped = c.hub.stats()
	o.Streams.Open = len(c.streams)
	httpx.JSON(w, http.StatusOK, o)
}

func (c *Console) dlqSize(ctx context.Context) DLQSize {
	if c.JS == nil {
		return DLQSize{Error: "no NATS"}
	}
	s, err := c.JS.Stream(ctx, substate.StreamDLQ)
	if err != nil {
		return DLQSize{Error: err.Error()}
	}
	info, err := s.Info(ctx)
	if err != nil {
		return DLQSize{Error: err.Error()}
	}
	return DLQSize{Messages: info.State.Msgs}
}

func (c *Console) health(ctx context.Context) Health {
	h := Health{NATS: "DISCONNECTED", Consumers: []ConsumerLag{}}
	if c.Conn != nil {
		h.NATS = c.Conn.Status().String()
	}
	for _, d := range c.Consumers {
		l := ConsumerLag{Stream: d.Stream, Name: d.Name}
		if c.JS == nil || c.Conn == nil || c.Conn.Status() != nats.CONNECTED {
			l.Error = "NATS is not connected"
		} else if cons, err := c.JS.Consumer(ctx, d.Stream, d.Name); err != nil {
			l.Error = err.Error()
		} else if info, err := cons.Info(ctx); err != nil {
			l.Error = err.Error()
		} else {
			l.Pending, l.AckPending = info.NumPending, info.NumAckPending
		}
		h.Consumers = append(h.Consumers, l)
	}
	if c.LastSweep != nil {
		h.Reconciler = &Sweep{Known: true}
		if t, ok := c.LastSweep(); ok {
			t = t.UTC()
			h.Reconciler.Last = &t
		}
	}
	return h
}
