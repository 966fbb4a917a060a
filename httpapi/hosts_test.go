package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// A server on loopback answers only to localhost, IP addresses, its listen
// host and the names it is given, with any port; one beyond loopback
// checks Host only when it is given names.
func TestAllowedHosts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addr  string
		names []string
		host  string
		want  int
	}{
		{"LoopbackIP", "127.0.0.1:8080", nil, "127.0.0.1:8080", 200},
		{"LoopbackOtherPort", "127.0.0.1:8080", nil, "127.0.0.1:9999", 200},
		{"LoopbackOtherIP", "127.0.0.1:8080", nil, "127.0.0.2:8080", 200},
		{"Localhost", "127.0.0.1:8080", nil, "localhost:8080", 200},
		{"LocalhostUpper", "127.0.0.1:8080", nil, "LOCALHOST:8080", 200},
		{"LocalhostDot", "127.0.0.1:8080", nil, "localhost.:8080", 200},
		{"IPv6", "[::1]:8080", nil, "[::1]:8080", 200},
		{"NoPort", "127.0.0.1:8080", nil, "localhost", 200},
		{"NoHost", "127.0.0.1:8080", nil, "", 200},
		{"Rebound", "127.0.0.1:8080", nil, "evil.example:8080", 403},
		{"ReboundNoPort", "127.0.0.1:8080", nil, "evil.example", 403},
		{"SubdomainOfLocalhostName", "127.0.0.1:8080", nil, "localhost.evil.example", 403},
		{"OtherIP", "127.0.0.1:8080", nil, "10.0.0.5:8080", 200},
		{"OtherIPv6", "127.0.0.1:8080", nil, "[2001:db8::1]:8080", 200},
		{"Configured", "127.0.0.1:8080", []string{"substate.internal"}, "Substate.Internal:443", 200},
		{"ConfiguredWithPort", "127.0.0.1:8080", []string{"substate.internal:8443"}, "substate.internal", 200},
		{"NotConfigured", "127.0.0.1:8080", []string{"substate.internal"}, "other.internal", 403},
		{"ListenName", "localhost:8080", nil, "localhost:8080", 200},
		{"ExposedUnchecked", "0.0.0.0:8080", nil, "anything.example", 200},
		{"ExposedConfigured", "10.0.0.5:8080", []string{"substate.example"}, "anything.example", 403},
		{"ExposedConfiguredIP", "10.0.0.5:8080", []string{"substate.example"}, "10.0.0.9:8080", 200},
		{"ExposedConfiguredName", "0.0.0.0:8080", []string{"substate.example"}, "substate.example", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &httpapi.Server{Addr: tc.addr, AllowedHosts: tc.names}
			r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
			r.Host = tc.host
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			if got := w.Code; got != tc.want {
				t.Fatalf("Host %q on %s: %d %s, want %d", tc.host, tc.addr, got, w.Body, tc.want)
			}
			if tc.want != 403 {
				return
			}
			var body struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Code != substate.EFORBIDDEN {
				t.Fatalf("body %s, want the JSON error %s", w.Body, substate.EFORBIDDEN)
			}
			if w.Header().Get("Connection") != "close" {
				t.Error("a refused Host keeps its connection open")
			}
		})
	}
}
