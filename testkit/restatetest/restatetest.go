// Package restatetest runs a real Restate server and a TypeScript test
// service for integration tests, both from the npm packages pinned in
// service/package.json (npm ci there installs them; .ci/run does).
//
// Start launches restate-server on free loopback ports with a fresh base
// directory, starts the service (service/service.js) on loopback,
// registers it through the admin API and stops both when the test ends.
// Without the packages the test is skipped with the command that installs
// them, unless SUBSTATE_CI=1, when it fails.
//
// Telemetry is off. restate-server still asks GitHub for its latest
// release once when it starts (there is no setting for it); without a
// network the request fails at once and the server logs an error line.
package restatetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Server is a running restate-server with the test service registered.
type Server struct {
	// AdminURL and IngressURL are the server's admin API and ingress.
	AdminURL, IngressURL string
	// ControlURL steers the test service's handlers (see Gate).
	ControlURL string

	dir    string // the test service's folder
	client *http.Client
}

// Dir returns the folder of the test service: service/ beside this file.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "service")
}

// binary returns the restate-server binary the npm package installed for
// this platform.
func binary() string {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	return filepath.Join(Dir(), "node_modules", "@restatedev", "restate-server-"+runtime.GOOS+"-"+arch, "bin", "restate-server")
}

// Start runs a Restate server with the test service registered, or skips
// the test when the npm packages or node are not installed (fails under
// SUBSTATE_CI=1).
func Start(tb testing.TB) *Server {
	tb.Helper()
	node, err := exec.LookPath("node")
	_, berr := os.Stat(binary())
	_, serr := os.Stat(filepath.Join(Dir(), "node_modules", "@restatedev", "restate-sdk"))
	if err != nil || berr != nil || serr != nil {
		msg := fmt.Sprintf("the real Restate server and SDK are not installed: run `npm ci` in %s (needs node)", Dir())
		if os.Getenv("SUBSTATE_CI") == "1" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	ports := freePorts(tb, 5)
	s := &Server{
		AdminURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		IngressURL: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		ControlURL: fmt.Sprintf("http://127.0.0.1:%d", ports[4]),
		dir:        Dir(),
		client:     &http.Client{Timeout: 30 * time.Second},
	}
	base := tb.TempDir()
	config := filepath.Join(base, "restate.toml")
	if err := os.WriteFile(config, []byte(serverConfig(ports)), 0o600); err != nil {
		tb.Fatal(err)
	}
	start(tb, "restate-server", exec.Command(binary(), "--config-file", config, "--base-dir", filepath.Join(base, "data"), "--no-logo"), base)
	s.waitHealthy(tb)
	svc := exec.Command(node, filepath.Join(Dir(), "service.js"), fmt.Sprint(ports[3]), fmt.Sprint(ports[4]))
	svc.Env = append(os.Environ(), "NODE_ENV=test")
	start(tb, "test service", svc, base)
	s.register(tb, fmt.Sprintf("http://127.0.0.1:%d", ports[3]))
	return s
}

// serverConfig is restate-server's configuration for a test: every
// listener on loopback at the given ports (admin, ingress, node-to-node),
// TCP only, telemetry off, few partitions and little memory.
func serverConfig(ports []int) string {
	return fmt.Sprintf(`node-name = "substate-test"
cluster-name = "substate-test"
listen-mode = "tcp"
bind-ip = "127.0.0.1"
advertised-host = "127.0.0.1"
bind-address = "127.0.0.1:%d"
disable-telemetry = true
default-num-partitions = 2
rocksdb-total-memory-size = "256 MiB"
log-format = "compact"
log-disable-ansi-codes = true

[admin]
bind-address = "127.0.0.1:%d"
disable-web-ui = true

[ingress]
bind-address = "127.0.0.1:%d"
`, ports[2], ports[0], ports[1])
}

// start runs cmd with its output in a log file under dir, and stops it
// (the process it started, by its pid) when the test ends.
func start(tb testing.TB, name string, cmd *exec.Cmd, dir string) {
	tb.Helper()
	logPath := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".log")
	log, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		log.Close()
		if tb.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				tb.Logf("%s log (last 4 KiB):\n%s", name, b[max(len(b)-4096, 0):])
			}
		}
	})
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// waitHealthy waits for the admin API to answer.
func (s *Server) waitHealthy(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := s.client.Get(s.AdminURL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("restate-server did not become healthy: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// register registers the test service's deployment, retrying while the
// service starts.
func (s *Server) register(tb testing.TB, uri string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.call(http.MethodPost, s.AdminURL+"/deployments", map[string]any{"uri": uri})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("register the test service: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// call sends a JSON request and returns the answer's body; a status
// outside 2xx is an error.
func (s *Server) call(method, url string, body any) ([]byte, error) {
	return s.callWith(method, url, body, nil)
}

// callWith sends a JSON request with the given headers too, as call does.
func (s *Server) callWith(method, url string, body any, header http.Header) ([]byte, error) {
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		in = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, in)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return out, fmt.Errorf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, bytes.TrimSpace(out))
	}
	return out, nil
}
