package worker

import (
	"context"
	"net/url"
	"strings"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi/console"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
)

// ConsoleFlags link the console to the providers' own UIs.
type ConsoleFlags struct {
	RestateUIURL string `name:"restate-ui-url" placeholder:"URL" help:"URL of an invocation in your Restate UI, with {invocationId} where the invocation id goes (http://restate:9070/ui/invocations/{invocationId}); the console links a Restate tenant's execution to it."`
}

// Check refuses a Restate UI URL that is not an absolute http(s) URL with
// the placeholder.
func (f ConsoleFlags) Check() error {
	if f.RestateUIURL == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(f.RestateUIURL, console.InvocationIDPlaceholder, "x"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(f.RestateUIURL, console.InvocationIDPlaceholder) {
		return substate.Errorf(substate.EINVALID, "--restate-ui-url %q is not an http(s) URL with %s where the invocation id goes (such as http://restate:9070/ui/invocations/%s)",
			f.RestateUIURL, console.InvocationIDPlaceholder, console.InvocationIDPlaceholder)
	}
	return nil
}

// openConsole starts the operator console, or returns nil on a role
// without the view. The HTTP server guards its routes with the read API's
// keys and scopes.
func (w *Worker) openConsole() *console.Console {
	if w.View == nil {
		return nil
	}
	log := w.Logger.With("component", "console")
	c := &console.Console{
		Counts: w.View.Counts, StuckCounts: w.View.StuckCounts, Conn: w.Bus.Conn, JS: w.Bus.JetStream,
		Consumers: w.consoleDurables(), Requeue: w.RequeueRaw, Redact: w.Redaction, Logger: log,
		RestateUIURL: w.Flags.RestateUIURL,
	}
	if w.reconcile.reconciler != nil || w.reconcile.restate != nil {
		c.LastSweep = w.reconcile.metrics.LastSweep
	}
	if err := c.Open(); err != nil {
		log.Warn("operator console not served", "err", err)
		return nil
	}
	w.closers = append(w.closers, c.Close)
	return c
}

// consoleDurables are the durable consumers whose lag the console shows.
func (w *Worker) consoleDurables() []console.Durable {
	var out []console.Durable
	for _, d := range w.durables() {
		out = append(out, console.Durable{Stream: d.stream, Name: d.consumer})
	}
	if len(out) == 0 {
		out = append(out, console.Durable{Stream: substate.StreamEvents, Name: bus.ProjectorConsumer(w.Flags.Instance)})
	}
	return out
}

// RequeueRaw maps the raw message at seq again, as renormalize does, with
// the worker's tenant rules. When allow is set, every event mapped must
// pass it before any is published; the first refusal is returned and
// nothing is published.
func (w *Worker) RequeueRaw(ctx context.Context, seq uint64, allow func(tenantID string) error) (int, error) {
	rules, err := mapping.ParseTenantRules(w.Flags.TenantRule...)
	if err != nil {
		return 0, err
	}
	m := &checkedMapper{Mapper: mapping.New(mapping.Config{Tenants: rules}), allow: allow}
	r := &replay.Renormalizer{
		Reader: &replay.Reader{JS: w.Bus.JetStream}, Mapper: m,
		EventID: mapping.EventID, Events: publishers.NewJetStream(w.Bus.JetStream),
	}
	res, err := r.Run(ctx, replay.Range{FromSeq: seq, ToSeq: seq})
	if err != nil {
		return 0, err
	}
	if m.refused != nil {
		return 0, m.refused
	}
	if res.Raw == 0 {
		return 0, substate.Errorf(substate.ENOTFOUND, "%s no longer holds sequence %d", substate.StreamRaw, seq)
	}
	if res.Rejected > 0 {
		return 0, substate.Errorf(substate.EINVALID, "the mapping rejects the message again: %s", res.FirstRejection)
	}
	return res.Published, nil
}

// checkedMapper maps as its Mapper does and refuses a message any of whose
// events allow refuses, remembering why. The renormalizer publishes only
// what a message maps to, so a refused one publishes nothing.
type checkedMapper struct {
	substate.Mapper
	allow   func(tenantID string) error
	refused error
}

func (m *checkedMapper) Map(raw substate.RawEvent) ([]substate.EventData, error) {
	data, err := m.Mapper.Map(raw)
	if err != nil || m.allow == nil {
		return data, err
	}
	for _, d := range data {
		if err := m.allow(d.TenantID); err != nil {
			m.refused = err
			return nil, err
		}
	}
	return data, nil
}
