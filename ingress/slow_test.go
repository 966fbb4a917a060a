package ingress_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/testkit/bustest"
)

// rawRequest sends a request's headers (and the start of its body) on a
// connection of its own and returns the answer and whether the server
// closed the connection after it.
func rawRequest(tb testing.TB, addr, head, bodyStart string) (*http.Response, string, bool) {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, head+"\r\n"+bodyStart); err != nil {
		tb.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatalf("no answer before the body was sent: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte()
	var ne net.Error
	return resp, string(b), err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// A request is refused on its headers before any of its body is read:
// without the credential it is 401 at once and its connection closed, so
// it holds nothing while its body trickles; a webhook-id that cannot be a
// Nats-Msg-Id is 400 the same way. A body that arrives too slowly is 408.
func TestIngressChecksHeadersFirst(t *testing.T) {
	b := bustest.Open(t)
	in, srv := newIngress(t, b)
	_, now, sign := signedRestate(t, in, srv)
	addr := srv.Listener.Addr().String()
	signed := sign("msg_ok", now, []byte(`{}`))
	head := func(path string, h map[string]string) string {
		s := "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
		for k, v := range h {
			s += k + ": " + v + "\r\n"
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		path   string
		header map[string]string
		status int
		msg    string
	}{
		{"ErrNoAPIKey", "/v1/ingest/eventbridge", nil, 401, "X-Api-Key"},
		{"ErrWrongAPIKey", "/v1/ingest/eventbridge", map[string]string{"X-Api-Key": "nope"}, 401, "X-Api-Key"},
		{"ErrNoSignature", "/v1/ingest/restate", nil, 401, "webhook-signature"},
		{"ErrStaleTimestamp", "/v1/ingest/restate", map[string]string{
			"webhook-id": "msg_1", "webhook-signature": signed["webhook-signature"],
			"webhook-timestamp": fmt.Sprint(now.Add(-time.Hour).Unix())}, 401, "tolerance"},
		{"ErrLongWebhookID", "/v1/ingest/restate", map[string]string{
			"webhook-id": strings.Repeat("x", 5000), "webhook-signature": signed["webhook-signature"],
			"webhook-timestamp": signed["webhook-timestamp"]}, 400, "5000 bytes"},
		{"ErrWebhookIDSpace", "/v1/ingest/restate", map[string]string{
			"webhook-id": "msg 1", "webhook-signature": signed["webhook-signature"],
			"webhook-timestamp": signed["webhook-timestamp"]}, 400, "printable ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, closed := rawRequest(t, addr, head(tc.path, tc.header), `{"id":`)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.msg) {
				t.Fatalf("got %d %s, want %d saying %q", resp.StatusCode, body, tc.status, tc.msg)
			}
			if !closed {
				t.Error("the connection stays open after a refusal on the headers")
			}
		})
	}
	t.Run("ErrSlowBody", func(t *testing.T) {
		in.BodyTimeout = 200 * time.Millisecond
		defer func() { in.BodyTimeout = 0 }()
		resp, body, closed := rawRequest(t, addr, head("/v1/ingest/eventbridge", map[string]string{"X-Api-Key": testAPIKey}), `{"id":`)
		var e struct{ Error struct{ Code string } }
		if resp.StatusCode != http.StatusRequestTimeout || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != substate.ETIMEOUT {
			t.Fatalf("a body that never arrives: %d %s, want 408 %s", resp.StatusCode, body, substate.ETIMEOUT)
		}
		if !closed {
			t.Error("the connection stays open after a body that was cut")
		}
	})
	t.Run("ErrLongEventID", func(t *testing.T) {
		body := `{"id":"` + strings.Repeat("x", 5000) + `","detail-type":"Step Functions Execution Status Change"}`
		r := post(t, srv.URL+"/v1/ingest/eventbridge", []byte(body), map[string]string{"X-Api-Key": testAPIKey})
		if r.status != 400 || !strings.Contains(r.errorMessage(), "longer than the maximum of 256") {
			t.Fatalf("got %d %v, want 400", r.status, r.body)
		}
	})
	if n := bustest.Count(t, b.JetStream, substate.StreamRaw); n != 0 {
		t.Fatalf("refused requests stored %d raw messages", n)
	}
}
