package restatetest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
)

// CountingAdmin serves the server's admin API through a proxy that counts
// every request, for tests that hold the worker to sending Restate none,
// and returns the proxy's URL and its count. The proxy closes with the
// test.
func (s *Server) CountingAdmin(tb testing.TB) (string, *atomic.Int64) {
	tb.Helper()
	admin, err := url.Parse(s.AdminURL)
	if err != nil {
		tb.Fatal(err)
	}
	calls := new(atomic.Int64)
	proxy := httputil.NewSingleHostReverseProxy(admin)
	counting := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		proxy.ServeHTTP(rw, r)
	}))
	tb.Cleanup(counting.Close)
	return counting.URL, calls
}
