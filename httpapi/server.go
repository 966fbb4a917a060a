// Package httpapi is substate's HTTP server. Every route the worker
// serves is one row of one table (routes.go): its method and path, who may
// call it, and its handler, whose dependencies are fields of Server. It
// serves ingest, the tenant view's queries, history and executions, the
// contract documents, the operator console, liveness, readiness and the
// Prometheus metrics. Every error response is {"error":{"code":…,"message":…}}
// with the one status its code maps to. It also holds what guards the API:
// timeouts and a connection cap, JSON-only bodies, and the read API's keys,
// scopes and tenant prefixes.
package httpapi

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
	"github.com/substatehq/substate/redact"
)

// Defaults of Limits.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second // a whole request, body included: 1 MiB at 35 KB/s
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConns          = 4096
	DefaultMaxConnsPerClient = 256
	DefaultHealthConns       = 64
)

// Limits bound what one client can hold of the server; zero values mean
// the defaults. A slow client is closed when a timeout passes; a
// connection above MaxConns, or above MaxConnsPerClient of its client
// address, may only ask for /healthz or /readyz (on one of HealthConns
// connections kept for that) and is otherwise answered 503 at once and
// closed.
type Limits struct {
	ReadHeaderTimeout time.Duration // to read a request's headers
	ReadTimeout       time.Duration // to read a whole request, body included
	WriteTimeout      time.Duration // to write a response (Streaming routes have none)
	IdleTimeout       time.Duration // a kept-alive connection waiting for its next request
	MaxHeaderBytes    int
	MaxConns          int // connections open at once; negative for no cap
	// MaxConnsPerClient caps the connections of one client address (an
	// IPv4 address, an IPv6 /64); negative for no cap.
	MaxConnsPerClient int
	// MaxEventStreams caps the GET /v1/events streams served at once (0:
	// DefaultMaxEventStreams); one more is answered 503.
	MaxEventStreams int
	// HealthConns are the connections beyond the caps that may ask for
	// /healthz or /readyz; negative for none.
	HealthConns int
}

func (l Limits) withDefaults() Limits {
	l.ReadHeaderTimeout = cmp.Or(l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	l.ReadTimeout = cmp.Or(l.ReadTimeout, DefaultReadTimeout)
	l.WriteTimeout = cmp.Or(l.WriteTimeout, DefaultWriteTimeout)
	l.IdleTimeout = cmp.Or(l.IdleTimeout, DefaultIdleTimeout)
	l.MaxHeaderBytes = cmp.Or(l.MaxHeaderBytes, DefaultMaxHeaderBytes)
	l.MaxConns = cmp.Or(l.MaxConns, DefaultMaxConns)
	l.MaxConnsPerClient = cmp.Or(l.MaxConnsPerClient, DefaultMaxConnsPerClient)
	l.HealthConns = cmp.Or(l.HealthConns, DefaultHealthConns)
	return l
}

// Server is the HTTP server of a substate worker. Its routes are one table
// (Routes, in routes.go); the fields below are what their handlers need,
// and a nil one leaves its routes out (404), so one Server type serves
// every role: the ingest role has no view, the metrics address only
// metrics and health.
type Server struct {
	Addr   string // listen address, host:port
	Limits Limits
	Logger *slog.Logger
	// AllowedHosts are names a request's Host may carry besides localhost,
	// IP addresses and the listen host (a local proxy's public name). A
	// server on loopback, or one given names here, refuses any other Host
	// with 403: see hosts.go.
	AllowedHosts []string
	// Auth checks the key of every route that needs one (see Guard). Nil
	// is a server without keys that checks none: every request is the
	// Anonymous principal, as on a loopback worker without keys, except
	// that a key sent anyway is not looked at (the metrics address, which
	// a scraper may reach with the main address's token).
	Auth *Authorizer
	// Redaction says what of the providers' input and output a caller
	// below admin sees in history evidence and execution descriptions;
	// nil shows none of it.
	Redaction *redact.Policy

	Live        func() error              // GET /healthz: nil error means alive; nil func means always
	Ready       func() error              // GET /readyz: nil error means ready; nil func means always
	Metrics     http.Handler              // GET /metrics
	Ingest      Ingester                  // POST /v1/ingest/…
	Views       substate.ViewStore        // GET /v1/tenants, /v1/tenants/{id}
	Checkpoint  PositionedView            // GET /v1/view/checkpoint
	History     substate.HistoryReader    // GET /v1/tenants/{id}/history
	Events      substate.EventFollower    // GET /v1/events (replay.EventFeed)
	DeadLetters substate.DeadLetterReader // GET /v1/deadletters (replay.DeadLetters)
	Executions  substate.ExecutionService // GET /v1/tenants/{id}/execution, POST …/execution/{action}
	Jobs        substate.JobService       // /v1/actions: fleet jobs
	Contract    fs.FS                     // GET /v1/openapi.json, /v1/asyncapi.json, /v1/schemas/{name} (contract.Files)
	Console     Console                   // GET /, /console/… (console.Console)
	// TraceUI is the URL of a trace in the operator's trace UI, with
	// {traceId} where the trace id goes: each transition of a history
	// gets its link (Transition.TraceURL). Empty leaves the links out.
	TraceUI string

	ln  net.Listener
	srv *http.Server

	historyTurns callerTurns // MaxHistoryReadsPerCaller

	streamsOnce  sync.Once
	streams      chan struct{}   // a token per GET /v1/events stream served
	closing      context.Context // cancelled by Close, which ends the streams
	closeStreams context.CancelFunc
}

// Ingester takes provider events pushed over HTTP (ingress.Ingress).
type Ingester interface {
	// Endpoint returns the handler of provider p's ingest route, nil for
	// a provider that does not push. The handler checks p's credential
	// itself (an API key, a webhook signature): read keys do not apply.
	Endpoint(p substate.Provider) http.Handler
}

// Console is the operator console (console.Console). It lives in a
// package of its own that imports this one for the Authorizer and the
// principal, so the table takes it through this interface: its handlers
// come unguarded and the table guards each, as it does every route.
type Console interface {
	Handlers() ConsoleHandlers
}

// ConsoleHandlers are the operator console's handlers, one per route.
type ConsoleHandlers struct {
	Page        http.Handler // the page, index.html
	Assets      http.Handler // its scripts and styles, by path below /console/assets/
	Overview    http.Handler // sub-state counts, health, activity
	DeadLetters http.Handler // the dead letters, payloads for read:raw and above
	Requeue     http.Handler // map a dead letter's raw message again
	Changes     http.Handler // the change feed as Server-Sent Events
}

// Open listens on Addr, so a bind error is returned here, and serves in the
// background.
func (s *Server) Open() error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	lim := s.Limits.withDefaults()
	s.ln = ln
	if lim.MaxConns > 0 {
		fds, known := fileLimit()
		if n := capConns(lim.MaxConns, fds, known); n < lim.MaxConns {
			s.logger().Warn("http connection cap lowered to fit the open-file limit", "cap", n, "wanted", lim.MaxConns, "open_files", fds)
			lim.MaxConns = n
		}
	}
	if lim.MaxConns > 0 || lim.MaxConnsPerClient > 0 {
		ln = newLimitListener(ln, lim.MaxConns, lim.MaxConnsPerClient, lim.HealthConns)
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ConnContext:       connContext,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.logger().Handler(), slog.LevelDebug),
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger().Error("http server stopped", "err", err)
		}
	}()
	return nil
}

// URL returns the server's base URL, with the port it actually bound.
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Close stops accepting requests and waits up to ten seconds for the ones
// in progress.
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	s.initStreams()
	s.closeStreams()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// healthz is liveness: 503 once the worker cannot do its work any more
// and only a restart can help (its view cannot be written), so that a
// liveness probe restarts it.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.Live != nil {
		if err := s.Live(); err != nil {
			httpx.Error(w, r, substate.Errorf(substate.EUNAVAILABLE, "not alive: %v", err), s.logger())
			return
		}
	}
	httpx.JSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.Ready != nil {
		if err := s.Ready(); err != nil {
			httpx.Error(w, r, substate.Errorf(substate.EUNAVAILABLE, "not ready: %v", err), s.logger())
			return
		}
	}
	httpx.JSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// recoverer turns a handler panic into a 500 with the JSON error body.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.logger().Error("http handler panic", "path", r.URL.Path, "panic", v)
				httpx.Error(w, r, substate.Errorf(substate.EINTERNAL, "internal error"), nil)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
