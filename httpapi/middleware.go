package httpapi

import (
	"context"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// RequireJSON answers 415 with the JSON error to a request whose body is
// declared in a content type other than JSON: application/json or any
// application/*+json (application/cloudevents+json), parameters such as
// charset allowed. A request without a Content-Type is let through: the
// route still parses its body strictly as JSON and answers 400 when it is
// not. EventBridge API destinations always send application/json; curl
// --data sends application/x-www-form-urlencoded, refused here with a
// message that says which header to add.
func RequireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
			httpx.Error(w, r, substate.Errorf(substate.EMEDIATYPE,
				"Content-Type %q is not JSON: send the body as application/json (curl: -H 'Content-Type: application/json')", ct), nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isJSON reports whether a Content-Type names JSON.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// sameOrigin refuses a state-changing request (POST, PUT, DELETE…) that a
// browser sends from a page of another origin, with 403 and the JSON
// error: an ingest, an action on an execution, a requeue. A page on any
// site the operator visits could otherwise post to a worker on loopback
// without keys (no-cors fetches and forms need no CORS permission) and
// forge events or stop executions. Requests without the browser's
// Sec-Fetch-Site and Origin headers (webhooks, curl, the CLI) and reads
// are let through (http.CrossOriginProtection).
func sameOrigin(next http.Handler) http.Handler {
	c := http.NewCrossOriginProtection()
	c.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.Error(w, r, substate.Errorf(substate.EFORBIDDEN,
			"cross-origin request refused: %s %s came from a browser page of another origin (Origin %q)", r.Method, r.URL.Path, r.Header.Get("Origin")), nil)
	}))
	return c.Handler(next)
}

// noDeadline is the zero time: no deadline.
var noDeadline time.Time

// streaming lets a route stream its response for as long as it likes
// (Server-Sent Events, Route.Stream): it lifts the server's read and write
// deadlines for that request, which otherwise end a response after
// WriteTimeout, and ends the request's context when the server closes, as
// Shutdown waits for the requests in progress and a stream would hold it
// until its timeout.
func (s *Server) streaming(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(noDeadline)
		_ = rc.SetWriteDeadline(noDeadline)
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(s.closingContext(), cancel)()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// jsonErrors makes every error response JSON: an error a handler (or the
// router itself, for an unknown path or a method the path does not take)
// writes as plain text becomes {"error":{"code":…,"message":…}} with the
// same status and headers (Allow stays).
func jsonErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&errorWriter{ResponseWriter: w, r: r}, r)
	})
}

// errorWriter rewrites a non-JSON error response as the JSON error.
type errorWriter struct {
	http.ResponseWriter
	r        *http.Request
	headed   bool // WriteHeader was called
	replaced bool // the body written is the JSON error; the handler's is dropped
}

func (w *errorWriter) WriteHeader(status int) {
	if w.headed {
		return
	}
	w.headed = true
	if status < 400 || isJSON(w.Header().Get("Content-Type")) {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.replaced = true
	h := w.Header()
	h.Del("Content-Length")
	h.Del("X-Content-Type-Options")
	code, msg := errorFor(status, w.r, h.Get("Allow"))
	httpx.JSON(w.ResponseWriter, status, httpx.ErrorBody{Error: httpx.ErrorDetail{Code: code, Message: msg}})
}

func (w *errorWriter) Write(p []byte) (int, error) {
	if !w.headed {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes).
func (w *errorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on, for streaming responses.
func (w *errorWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.replaced {
		f.Flush()
	}
}

// errorFor returns the error code and message of a status the router or a
// library wrote as plain text.
func errorFor(status int, r *http.Request, allow string) (string, string) {
	switch status {
	case http.StatusNotFound:
		return substate.ENOTFOUND, "no route for " + r.Method + " " + r.URL.Path
	case http.StatusMethodNotAllowed:
		return substate.EMETHOD, r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + allow
	case http.StatusUnauthorized:
		return substate.EUNAUTHORIZED, "unauthorized"
	case http.StatusForbidden:
		return substate.EFORBIDDEN, "forbidden"
	case http.StatusConflict:
		return substate.ECONFLICT, "conflict"
	case http.StatusRequestTimeout:
		return substate.ETIMEOUT, "the request did not arrive in time"
	case http.StatusRequestEntityTooLarge:
		return substate.ETOOLARGE, "request body too large"
	case http.StatusTooManyRequests:
		return substate.ETHROTTLED, "too many requests; retry later"
	case http.StatusUnsupportedMediaType:
		return substate.EMEDIATYPE, "unsupported content type"
	case http.StatusServiceUnavailable:
		return substate.EUNAVAILABLE, "service unavailable; retry later"
	}
	if status >= 500 {
		return substate.EINTERNAL, "internal error"
	}
	return substate.EINVALID, strings.ToLower(http.StatusText(status))
}

// dropUnreadBody closes the connection of a request whose body the
// handler did not read to its end, once it is answered: a refusal before
// the body (a key, a content type, a route or Host refused), a body cut
// short. Go's server would otherwise read up to 256 KiB of the rest to
// reuse the connection, for as long as the client takes to send it, and
// a slow client would hold the connection after its answer.
func dropUnreadBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		body := &eofReader{ReadCloser: r.Body}
		r.Body = body
		next.ServeHTTP(&bodyWatcher{ResponseWriter: w, body: body}, r)
	})
}

// eofReader records that its reader reached the end.
type eofReader struct {
	io.ReadCloser
	eof bool
}

func (b *eofReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// bodyWatcher drops the request's body when the answer starts before the
// body was read to its end.
type bodyWatcher struct {
	http.ResponseWriter
	body   *eofReader
	headed bool
}

func (w *bodyWatcher) WriteHeader(status int) {
	if !w.headed {
		w.headed = true
		if !w.body.eof {
			httpx.DropBody(w.ResponseWriter)
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *bodyWatcher) Write(p []byte) (int, error) {
	if !w.headed {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *bodyWatcher) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on, for streaming responses.
func (w *bodyWatcher) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
