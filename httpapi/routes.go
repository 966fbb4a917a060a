package httpapi

import (
	"net/http"
	"strings"

	"github.com/substatehq/substate"
)

// Route is one route of the server: a row of the table Routes returns.
type Route struct {
	Method string // GET, POST
	// Path is an http.ServeMux path: /v1/tenants/{id}. One ending in /
	// is a subtree, and its handler sees the path below it.
	Path  string
	Guard Guard // who may call it
	// JSONBody refuses a body declared in another content type than JSON
	// with 415, before anything else (RequireJSON).
	JSONBody bool
	// Stream lifts the read and write deadlines: the response lasts for
	// as long as the client reads it (Server-Sent Events).
	Stream bool
	// Handler serves the route once its guard let the request in; nil
	// when the server lacks what the route serves, which is then not
	// served (404).
	Handler http.Handler
}

// Pattern is the route's http.ServeMux pattern, "GET /v1/tenants/{id}".
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// Routes returns every route of the server, served or not: this table is
// the only place a route is defined. Adding one is a row here and its
// handler, with the handler's dependency a field of Server.
func (s *Server) Routes() []Route {
	c := s.consoleHandlers()
	views, execs, jobs, docs := s.Views != nil, s.Executions != nil, s.Jobs != nil, s.Contract != nil
	return []Route{
		// Health and metrics.
		{Method: "GET", Path: "/healthz", Guard: GuardPublic, Handler: http.HandlerFunc(s.healthz)},
		{Method: "GET", Path: "/readyz", Guard: GuardPublic, Handler: http.HandlerFunc(s.readyz)},
		{Method: "GET", Path: "/metrics", Guard: GuardRead, Handler: s.Metrics},

		// Ingest: each provider's handler checks that provider's credential.
		{Method: "POST", Path: "/v1/ingest/eventbridge", Guard: GuardIngest, JSONBody: true, Handler: s.ingest(substate.ProviderStepFunctions)},
		{Method: "POST", Path: "/v1/ingest/restate", Guard: GuardIngest, JSONBody: true, Handler: s.ingest(substate.ProviderRestate)},

		// The tenant view; a key's tenant prefix narrows every answer.
		{Method: "GET", Path: "/v1/tenants", Guard: GuardRead, Handler: when(views, s.listTenants)},
		{Method: "GET", Path: "/v1/tenants/{id}", Guard: GuardRead, Handler: when(views, s.getTenant)},
		{Method: "GET", Path: "/v1/groups", Guard: GuardRead, Handler: when(views, s.listGroups)},
		{Method: "GET", Path: "/v1/whoami", Guard: GuardRead, Handler: when(views, s.whoami)},
		{Method: "GET", Path: "/v1/view/checkpoint", Guard: GuardRead, Handler: when(s.Checkpoint != nil, s.checkpoint)},
		// raw=true needs read:raw, which the handler checks.
		{Method: "GET", Path: "/v1/tenants/{id}/history", Guard: GuardRead, Handler: when(s.History != nil, s.history)},
		// The retained streams: canonical events live, dead letters. A
		// dead letter's payload needs read:raw, which the handler checks.
		{Method: "GET", Path: "/v1/events", Guard: GuardRead, Stream: true, Handler: when(s.Events != nil, s.followEvents)},
		{Method: "GET", Path: "/v1/deadletters", Guard: GuardRead, Handler: when(s.DeadLetters != nil, s.deadLetters)},
		{Method: "GET", Path: "/v1/tenants/{id}/execution", Guard: GuardReadRaw, Handler: when(execs, s.describeExecution)},
		{Method: "POST", Path: "/v1/tenants/{id}/execution/{action}", Guard: GuardAdminOrLoopback, JSONBody: true, Handler: when(execs, s.actOnExecution)},

		// Fleet jobs: an action on every tenant a filter selects, narrowed
		// to the key's tenant prefix; only admin keys (and the loopback
		// operator of a worker without keys) create, see and control them.
		{Method: "POST", Path: "/v1/actions", Guard: GuardAdminOrLoopback, JSONBody: true, Handler: when(jobs, s.createJob)},
		{Method: "GET", Path: "/v1/actions", Guard: GuardAdminOrLoopback, Handler: when(jobs, s.listJobs)},
		{Method: "GET", Path: "/v1/actions/{id}", Guard: GuardAdminOrLoopback, Handler: when(jobs, s.getJob)},
		{Method: "GET", Path: "/v1/actions/{id}/report", Guard: GuardAdminOrLoopback, Handler: when(jobs, s.jobReport)},
		{Method: "GET", Path: "/v1/actions/{id}/events", Guard: GuardAdminOrLoopback, Stream: true, Handler: when(jobs, s.jobEvents)},
		{Method: "POST", Path: "/v1/actions/{id}/{op}", Guard: GuardAdminOrLoopback, Handler: when(jobs, s.controlJob)},

		// The contract documents, public like the documentation they are.
		{Method: "GET", Path: "/v1/openapi.json", Guard: GuardPublic, Handler: when(docs, s.document("openapi.json"))},
		{Method: "GET", Path: "/v1/asyncapi.json", Guard: GuardPublic, Handler: when(docs, s.document("asyncapi.json"))},
		{Method: "GET", Path: "/v1/schemas/{name}", Guard: GuardPublic, Handler: when(docs, s.schema)},

		// The operator console: the page and its assets hold no data and
		// are public, since a browser cannot send a key with a navigation.
		{Method: "GET", Path: "/{$}", Guard: GuardPublic, Handler: c.Page},
		{Method: "GET", Path: "/console/assets/", Guard: GuardPublic, Handler: c.Assets},
		{Method: "GET", Path: "/console/api/overview", Guard: GuardRead, Handler: c.Overview},
		{Method: "GET", Path: "/console/api/deadletters", Guard: GuardRead, Handler: c.DeadLetters},
		{Method: "POST", Path: "/console/api/deadletters/{seq}/requeue", Guard: GuardAdmin, Handler: c.Requeue},
		{Method: "GET", Path: "/console/api/changes", Guard: GuardReadCookie, Stream: true, Handler: c.Changes},
	}
}

// Handler returns the server's routes behind what every request passes:
// a panic is a 500, a connection beyond the caps is served health only, a
// Host the server does not answer to is refused (DNS rebinding), a
// browser page of another origin cannot post, every error is the JSON
// error body, and a body left unread closes its connection. Open serves
// it.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.register(mux)
	return dropUnreadBody(jsonErrors(s.recoverer(healthOnly(s.checkHost(sameOrigin(mux))))))
}

// register puts every route with a handler on mux, behind its guard, and
// returns their patterns.
func (s *Server) register(mux *http.ServeMux) []string {
	var patterns []string
	for _, rt := range s.Routes() {
		if rt.Handler == nil {
			continue
		}
		mux.Handle(rt.Pattern(), s.wrap(rt))
		patterns = append(patterns, rt.Pattern())
	}
	return patterns
}

// wrap puts a route's handler behind its guard and the route's traits.
func (s *Server) wrap(rt Route) http.Handler {
	h := rt.Handler
	if strings.HasSuffix(rt.Path, "/") {
		h = http.StripPrefix(rt.Path, h)
	}
	h = s.guard(rt, h)
	if rt.JSONBody {
		h = RequireJSON(h)
	}
	if rt.Stream {
		h = s.streaming(h)
	}
	return h
}

// when returns h when the server has what it serves, nil otherwise.
func when(ok bool, h http.HandlerFunc) http.Handler {
	if !ok {
		return nil
	}
	return h
}

// ingest returns the ingest handler of provider p, nil without one.
func (s *Server) ingest(p substate.Provider) http.Handler {
	if s.Ingest == nil {
		return nil
	}
	return s.Ingest.Endpoint(p)
}

// consoleHandlers returns the console's handlers, none without a console.
func (s *Server) consoleHandlers() ConsoleHandlers {
	if s.Console == nil {
		return ConsoleHandlers{}
	}
	return s.Console.Handlers()
}
