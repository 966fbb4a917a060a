package httpapi

import (
	"net/http"
	"time"
)

// CapConns exports capConns to the tests.
var CapConns = capConns

// Mux returns the server's router without the middleware around it, and
// the patterns it registered.
func Mux(s *Server) (*http.ServeMux, []string) {
	mux := http.NewServeMux()
	return mux, s.register(mux)
}

// SetEventWriteTimeout sets how long a GET /v1/events write may wait for
// its client, until the returned function puts it back.
func SetEventWriteTimeout(d time.Duration) (restore func()) {
	old := eventWriteTimeout
	eventWriteTimeout = d
	return func() { eventWriteTimeout = old }
}

// ClientKey and RemoteKey export the per-client keys to the tests.
var ClientKey, RemoteKey = clientKey, remoteKey
