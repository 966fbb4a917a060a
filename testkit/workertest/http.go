package workertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/substatehq/substate"
)

// ingestClient delivers provider events: a worker answers within seconds
// or is stuck.
var ingestClient = &http.Client{Timeout: 10 * time.Second}

// Get returns the status and the body of a GET.
func Get(tb testing.TB, url string) (int, string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// GetJSON GETs url and decodes a 200 answer into v; it returns the
// status.
func GetJSON(tb testing.TB, url string, v any) int {
	tb.Helper()
	code, body := Get(tb, url)
	if code == http.StatusOK {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			tb.Fatalf("GET %s: %v", url, err)
		}
	}
	return code
}

// APIGet GETs a path of the worker with a read-API key (none when empty)
// and returns the status, the code of the JSON error body (failing the
// test when an error answer has none), and the body.
func APIGet(tb testing.TB, url, key string) (int, string, string) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &e); err != nil {
			tb.Fatalf("GET %s: %d with a body that is not the JSON error: %s", url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, e.Error.Code, string(b)
}

// Post POSTs body to url with the headers and returns the status.
func Post(tb testing.TB, url string, body []byte, header map[string]string) int {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// PostFile POSTs the file at path to url and returns the status.
func PostFile(tb testing.TB, url, path string, header map[string]string) int {
	tb.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return Post(tb, url, body, header)
}

// KeyHash is the hex SHA-256 of a read-API key, as a key line
// (--api-keys, --api-keys-file) names it after "sha256:".
func KeyHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// FreeAddr returns a loopback address with a port nothing listens on
// right now: for a child process, or for a server that must be away.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// WaitView polls GET /v1/tenants/{id} of the worker at base, as "substate
// tenants get" does, until ok accepts the view (for up to a minute), and
// returns it.
func WaitView(tb testing.TB, base, tenant string, ok func(substate.TenantView) bool) substate.TenantView {
	tb.Helper()
	var v substate.TenantView
	EventuallyWithin(tb, 60*time.Second, func() string {
		v = substate.TenantView{}
		if code := GetJSON(tb, base+"/v1/tenants/"+url.PathEscape(tenant), &v); code != http.StatusOK || !ok(v) {
			return fmt.Sprintf("tenant %s: %d %+v", tenant, code, v)
		}
		return ""
	})
	return v
}
