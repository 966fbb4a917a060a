package httpapi

import "net/http"

// CapConns exports capConns to the tests.
var CapConns = capConns

// Mux returns the server's router without the middleware around it, and
// the patterns it registered.
func Mux(s *Server) (*http.ServeMux, []string) {
	mux := http.NewServeMux()
	return mux, s.register(mux)
}
