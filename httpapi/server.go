// Package httpapi is substate's HTTP server: it mounts the ingest routes,
// serves the tenant view queries, liveness and readiness, and the Prometheus
// metrics. Every error response is {"error":{"code":…,"message":…}} with the
// one status its code maps to. It also holds what guards the API: timeouts
// and a connection cap, JSON-only ingest, and the read API's keys, scopes
// and tenant prefixes.
package httpapi

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// Defaults of Limits.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second // a whole request, body included: 1 MiB at 35 KB/s
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConns          = 4096
)

// Limits bound what one client can hold of the server; zero values mean
// the defaults. A slow client is closed when a timeout passes; a
// connection above MaxConns is answered 503 at once and closed.
type Limits struct {
	ReadHeaderTimeout time.Duration // to read a request's headers
	ReadTimeout       time.Duration // to read a whole request, body included
	WriteTimeout      time.Duration // to write a response (Streaming routes have none)
	IdleTimeout       time.Duration // a kept-alive connection waiting for its next request
	MaxHeaderBytes    int
	MaxConns          int // connections open at once; negative for no cap
}

func (l Limits) withDefaults() Limits {
	l.ReadHeaderTimeout = cmp.Or(l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	l.ReadTimeout = cmp.Or(l.ReadTimeout, DefaultReadTimeout)
	l.WriteTimeout = cmp.Or(l.WriteTimeout, DefaultWriteTimeout)
	l.IdleTimeout = cmp.Or(l.IdleTimeout, DefaultIdleTimeout)
	l.MaxHeaderBytes = cmp.Or(l.MaxHeaderBytes, DefaultMaxHeaderBytes)
	l.MaxConns = cmp.Or(l.MaxConns, DefaultMaxConns)
	return l
}

// Server is the HTTP server of a substate worker.
type Server struct {
	Addr    string                  // listen address, host:port
	Ingest  http.Handler            // the /v1/ingest/ routes; nil leaves them out
	Views   substate.ViewStore      // the tenant view; nil leaves the queries out
	Ready   func() error            // nil error means ready; nil func means always
	Metrics http.Handler            // /metrics; nil leaves it out
	Extra   map[string]http.Handler // more routes by pattern; they authorize themselves
	Logger  *slog.Logger
	// Auth, when set, guards the read routes the server mounts: the tenant
	// queries and /metrics need ScopeRead, and a key's tenant prefix
	// narrows the queries. Nil leaves them open.
	Auth   *Authorizer
	Limits Limits

	ln  net.Listener
	srv *http.Server
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
		ln = newLimitListener(ln, lim.MaxConns)
	}
	s.srv = &http.Server{
		Handler:           s.routes(),
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	if s.Ingest != nil {
		mux.Handle("/v1/ingest/", RequireJSON(s.Ingest))
	}
	if s.Views != nil {
		mux.Handle("GET /v1/tenants/{id}", s.read(http.HandlerFunc(s.getTenant)))
		mux.Handle("GET /v1/tenants", s.read(http.HandlerFunc(s.listTenants)))
	}
	if s.Metrics != nil {
		mux.Handle("GET /metrics", s.read(s.Metrics))
	}
	for pattern, h := range s.Extra {
		mux.Handle(pattern, h)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpx.JSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	return jsonErrors(s.recoverer(sameOrigin(mux)))
}

// read guards a read route with Auth, when there is one.
func (s *Server) read(h http.Handler) http.Handler {
	if s.Auth == nil {
		return h
	}
	return s.Auth.Require(ScopeRead)(h)
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
