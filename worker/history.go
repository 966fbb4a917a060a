package worker

import (
	"net/http"

	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/replay"
)

// replayRoutes are the worker's routes that read the retained streams and
// say how far the view is.
func (w *Worker) replayRoutes() map[string]http.Handler {
	log := w.Logger.With("component", "http")
	routes := map[string]http.Handler{
		"GET /v1/tenants/{id}/history": w.readRoute(httpapi.ScopeRead, httpapi.RedactedHistory(replay.NewHistory(w.Bus.JetStream), w.Redaction, log)),
	}
	if w.View != nil { // a role without a view has no checkpoint to tell
		routes["GET /v1/view/checkpoint"] = w.readRoute(httpapi.ScopeRead, httpapi.Checkpoint(w.View, log))
	}
	return routes
}
