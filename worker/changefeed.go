package worker

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/publishers"
)

// openChangeFeed sets up the publisher that drains the view's change
// outbox into SUBSTATE_CHANGES, unless --no-change-feed.
func (w *Worker) openChangeFeed(context.Context) error {
	if !w.Flags.ChangeFeed || w.View == nil {
		return nil
	}
	emitted, last := w.Metrics.ChangesEmitted, w.Metrics.ChangesLastPublished
	w.Changes = &publishers.ChangeFeed{
		JetStream: w.Bus.JetStream, Outbox: w.View,
		Published: func(n int) {
			emitted.Add(float64(n))
			last.SetToCurrentTime()
		},
		Tracer: w.Tracer, Logger: w.Logger.With("component", "changefeed"),
	}
	return nil
}

// changeFeedDrainTimeout bounds the last drain of the outbox on shutdown.
const changeFeedDrainTimeout = 5 * time.Second

// drainChangeFeed publishes what the projector's last commits left in the
// outbox before the worker stops. What it cannot publish stays in the
// outbox, durable, for the next start.
func (w *Worker) drainChangeFeed() {
	if w.Changes == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), changeFeedDrainTimeout)
	defer cancel()
	for {
		n, err := w.Changes.Drain(ctx)
		if err != nil {
			w.Logger.Warn("change feed not drained on shutdown; the rest is published at the next start", "err", err)
			return
		}
		if n == 0 {
			return
		}
	}
}

// ContractFlags say where the worker's contracts are found from outside.
type ContractFlags struct {
	PublicURL string `name:"public-url" help:"Base URL under which others reach this worker's HTTP API (http://host:port), written into the dataschema of every CloudEvent substate publishes; default http://<http-addr>, with a wildcard host as 127.0.0.1." placeholder:"URL"`
}

// openSchemaBase tells the publishers of canonical events and changes
// where the worker serves the schemas of their data, once its HTTP server
// listens (a port 0 is known only then).
func (w *Worker) openSchemaBase(context.Context) error {
	if u, err := url.Parse(w.Flags.PublicURL); w.Flags.PublicURL != "" && (err != nil || !u.IsAbs() || u.Host == "") {
		return substate.Errorf(substate.EINVALID, "--public-url %q is not an absolute URL such as https://substate.example.com", w.Flags.PublicURL)
	}
	base := w.schemaBase()
	if w.Normalizer != nil {
		if p, ok := w.Normalizer.Events.(*publishers.JetStream); ok {
			p.SchemaBase = base
		}
	}
	if w.Changes != nil {
		w.Changes.SchemaBase = base
	}
	return nil
}

// schemaBase returns the base URL of the schemas the worker serves.
func (w *Worker) schemaBase() string {
	if w.Flags.PublicURL != "" {
		return w.Flags.PublicURL
	}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(w.HTTP.URL(), "http://"))
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
