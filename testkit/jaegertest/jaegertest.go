// Package jaegertest runs a real Jaeger for tests: the OTLP receiver the
// worker's traces are sent to, with in-memory storage, and its query API,
// through which a test reads the traces back (api/v3, OTLP JSON).
//
// The binary is Jaeger's own (the jaeger program of
// github.com/jaegertracing/jaeger at the version .ci/tools pins, built
// from the Go module proxy into bin/tools/jaeger; SUBSTATE_JAEGER names
// another, else one on PATH is used). Every listener is on loopback, on
// free ports. Without the binary the test is skipped with the command that
// builds it, unless SUBSTATE_CI=1, when it fails.
package jaegertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a running Jaeger.
type Server struct {
	// OTLPHTTP is the OTLP/HTTP receiver's base URL (what
	// OTEL_EXPORTER_OTLP_ENDPOINT takes); OTLPGRPC the OTLP/gRPC one.
	OTLPHTTP, OTLPGRPC string
	// QueryURL is the query service's base URL (its API and UI).
	QueryURL string

	client *http.Client
}

// binary returns the jaeger program to run, or "" when there is none.
func binary() string {
	if p := os.Getenv("SUBSTATE_JAEGER"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	if p := filepath.Join(filepath.Dir(file), "..", "..", "bin", "tools", "jaeger"); isFile(p) {
		return p
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		return p
	}
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Start runs Jaeger until the test ends, or skips the test when it is not
// installed (fails under SUBSTATE_CI=1).
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := binary()
	if bin == "" {
		msg := "Jaeger is not installed: run `.ci/tools jaeger` (builds bin/tools/jaeger from the Go module proxy) or set SUBSTATE_JAEGER"
		if os.Getenv("SUBSTATE_CI") == "1" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	ports := freePorts(tb, 4)
	s := &Server{
		OTLPHTTP: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		OTLPGRPC: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		QueryURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		client:   &http.Client{Timeout: 10 * time.Second},
	}
	dir := tb.TempDir()
	config := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(config, []byte(serverConfig(ports)), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", config)
	cmd.Env = withoutOTEL(os.Environ()) // its own telemetry stays off, whatever the test's environment
	start(tb, cmd, dir)
	s.waitReady(tb)
	return s
}

// withoutOTEL returns env without the OTEL_* variables.
func withoutOTEL(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	return out
}

// serverConfig is Jaeger's configuration for a test: the OTLP receivers,
// in-memory storage and the query service, every listener on loopback, no
// telemetry of its own (the query service would trace itself, to an
// OTLP endpoint on localhost:4317, and wait 10 s to give up on it when
// it stops).
func serverConfig(ports []int) string {
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: []
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    traces:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memory:
        memory:
          max_traces: 100000
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memory
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
      grpc:
        endpoint: 127.0.0.1:%d
exporters:
  jaeger_storage_exporter:
    trace_storage: memory
`, ports[2], ports[3], ports[0], ports[1])
}

// start runs cmd with its output in a log file under dir (shown when the
// test fails) and stops it, by its pid, when the test ends.
func start(tb testing.TB, cmd *exec.Cmd, dir string) {
	tb.Helper()
	logPath := filepath.Join(dir, "jaeger.log")
	log, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start jaeger: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = log.Close()
		if tb.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				tb.Logf("jaeger log:\n%s", b)
			}
		}
	})
}

// waitReady waits until the query service answers and the OTLP/HTTP
// receiver accepts connections: Jaeger starts them one after the other,
// and a span exported to a receiver not yet listening is lost.
func (s *Server) waitReady(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	receiver := strings.TrimPrefix(s.OTLPHTTP, "http://")
	for {
		resp, err := s.client.Get(s.QueryURL + "/api/services")
		if err == nil {
			resp.Body.Close()
			var c net.Conn
			if c, err = net.DialTimeout("tcp", receiver, time.Second); err == nil {
				c.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("jaeger did not become ready within 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePorts returns n free loopback TCP ports.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	out := make([]int, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out
}

// Span is a span as Jaeger stored it. Attribute values are as they read
// in OTLP JSON: a string, a number as decimal text, true or false.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          Kind
	Attributes                    map[string]string
	Links                         []Link
	Service                       string // the resource's service.name
}

// Link is a span's link to another span.
type Link struct {
	TraceID, SpanID string
	Attributes      map[string]string
}

// Kind is a span's kind, as OTLP numbers it.
type Kind int

// Span kinds.
const (
	KindInternal Kind = 1
	KindServer   Kind = 2
	KindClient   Kind = 3
	KindProducer Kind = 4
	KindConsumer Kind = 5
)

// Trace returns the spans Jaeger holds of a trace, none when it holds
// none (yet).
func (s *Server) Trace(tb testing.TB, traceID string) []Span {
	tb.Helper()
	return s.get(tb, "/api/v3/traces/"+url.PathEscape(traceID), nil)
}

// Find returns the spans of the traces that have a span called operation
// of the service, started within the last hour.
func (s *Server) Find(tb testing.TB, service, operation string) []Span {
	tb.Helper()
	now := time.Now().UTC()
	q := url.Values{
		"query.service_name":   {service},
		"query.operation_name": {operation},
		"query.start_time_min": {now.Add(-time.Hour).Format(time.RFC3339Nano)},
		"query.start_time_max": {now.Add(time.Minute).Format(time.RFC3339Nano)},
		"query.num_traces":     {"1000"},
	}
	return s.get(tb, "/api/v3/traces", q)
}

// get reads spans from the query API; not found is none.
func (s *Server) get(tb testing.TB, path string, q url.Values) []Span {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := s.QueryURL + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := s.client.Do(req)
	if err != nil {
		tb.Fatalf("jaeger query %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	var body struct {
		Result traces `json:"result"`
		Error  *struct {
			HTTPCode int    `json:"httpCode"`
			Message  string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		tb.Fatalf("jaeger query %s: decode: %v", path, err)
	}
	if body.Error != nil {
		if body.Error.HTTPCode == http.StatusNotFound {
			return nil
		}
		tb.Fatalf("jaeger query %s: %d %s", path, body.Error.HTTPCode, body.Error.Message)
	}
	return body.Result.spans()
}
