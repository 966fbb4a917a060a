package worker

import (
	"context"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi/console"
	"github.com/substatehq/substate/mapping"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/replay"
)

// openConsole starts the operator console, or returns nil on a role
// without the view. The HTTP server guards its routes with the read API's
// keys and scopes.
func (w *Worker) openConsole() *console.Console {
	if w.View == nil {
		return nil
	}
	log := w.Logger.With("component", "console")
	c := &console.Console{
		Counts: w.View.Counts, Conn: w.Bus.Conn, JS: w.Bus.JetStream,
		Consumers: w.consoleDurables(), Requeue: w.RequeueRaw, Redact: w.Redaction, Logger: log,
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
// the worker's tenant rules.
func (w *Worker) RequeueRaw(ctx context.Context, seq uint64) (int, error) {
	rules, err := mapping.ParseTenantRules(w.Flags.TenantRule...)
	if err != nil {
		return 0, err
	}
	r := &replay.Renormalizer{
		Reader: &replay.Reader{JS: w.Bus.JetStream}, Mapper: mapping.New(mapping.Config{Tenants: rules}),
		EventID: mapping.EventID, Events: publishers.NewJetStream(w.Bus.JetStream),
	}
	res, err := r.Run(ctx, replay.Range{FromSeq: seq, ToSeq: seq})
	if err != nil {
		return 0, err
	}
	if res.Raw == 0 {
		return 0, substate.Errorf(substate.ENOTFOUND, "%s no longer holds sequence %d", substate.StreamRaw, seq)
	}
	if res.Rejected > 0 {
		return 0, substate.Errorf(substate.EINVALID, "the mapping rejects the message again: %s", res.FirstRejection)
	}
	return res.Published, nil
}
