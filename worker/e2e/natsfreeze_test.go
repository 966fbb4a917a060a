package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/substatehq/substate/ingress"
	"github.com/substatehq/substate/testkit/faults"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestFrozenNATS freezes the NATS server under a running worker (--nats-url;
// the server stops answering, its connections stay open, as under
// SIGSTOP). The client still counts itself connected, so /readyz waited
// 2 s for a JetStream request and every ingest 5 s for its publish to
// answer 503. The worker now pings the server every half second: once a
// ping goes unanswered for a second, /readyz and ingest answer 503 at
// once, saying NATS does not answer, without a request to NATS (within
// the readiness timeout and half the publish timeout; before that, each
// answer comes within twice its own timeout); after the thaw both are
// served again.
func TestFrozenNATS(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(ns.Shutdown)
	proxy := faults.NewProxy(t, ns.Addr().String())
	w := workertest.Start(t, func(f *worker.Flags) { f.NATSURL = "nats://" + proxy.Addr() })
	url := w.HTTP.URL()
	workertest.IngestTenant(t, url, "before-freeze", "")

	proxy.Freeze()
	// Each answer while frozen comes within twice its own timeout, and the
	// 503 that names the frozen server at once: well under the old 2 s
	// (/readyz) and 5 s (ingest), with room for a loaded machine.
	workertest.EventuallyWithin(t, 30*time.Second, func() string {
		start := time.Now()
		status, body := workertest.Get(t, url+"/readyz")
		took := time.Since(start)
		t.Logf("GET /readyz while frozen: %d in %s", status, took.Round(time.Millisecond))
		if took > 2*worker.ReadyTimeout {
			t.Errorf("GET /readyz while frozen took %s, want under twice its timeout of %s", took, worker.ReadyTimeout)
		}
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "nats does not answer") {
			return fmt.Sprintf("GET /readyz: %d %s, want 503 saying nats does not answer", status, body)
		}
		if took > worker.ReadyTimeout {
			t.Errorf("GET /readyz answered that nats does not answer in %s, want at once (under %s)", took, worker.ReadyTimeout)
		}
		return ""
	})
	workertest.EventuallyWithin(t, 30*time.Second, func() string {
		start := time.Now()
		status, code, msg := postSFN(t, url, "during-freeze")
		took := time.Since(start)
		t.Logf("ingest while frozen: %d in %s", status, took.Round(time.Millisecond))
		if took > 2*ingress.DefaultPublishTimeout {
			t.Errorf("ingest while frozen took %s, want under twice its publish timeout of %s", took, ingress.DefaultPublishTimeout)
		}
		if status != http.StatusServiceUnavailable || code != "unavailable" || !strings.Contains(msg, "nats is unavailable") {
			return fmt.Sprintf("ingest: %d %s %q, want 503 refused before publishing", status, code, msg)
		}
		if took > ingress.DefaultPublishTimeout/2 {
			t.Errorf("ingest refused in %s, want at once (under %s)", took, ingress.DefaultPublishTimeout/2)
		}
		return ""
	})
	if status, _ := workertest.Get(t, url+"/healthz"); status != http.StatusOK {
		t.Errorf("/healthz while NATS is frozen: %d, want 200 (a restart does not thaw NATS)", status)
	}

	proxy.Thaw()
	w.WaitReady(t)
	workertest.IngestTenant(t, url, "after-thaw", "")
}

// postSFN posts a Step Functions event for tenant and returns the status
// and the error's code and message.
func postSFN(tb testing.TB, url, tenant string) (int, string, string) {
	tb.Helper()
	now := time.Now()
	body := sfnEvent("ev-"+tenant, tenant, tenant+"-run", "RUNNING", now, now, "")
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/ingest/eventbridge", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error.Code, e.Error.Message
}
