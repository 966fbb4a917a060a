package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/ingress"
	"github.com/substatehq/substate/internal/fixtures"
)

// capture is a RawStore and DeadLetterPublisher that keeps what it is
// given, so the fuzz target can run without a server.
type capture struct {
	raw  []substate.RawEvent
	dead []substate.DeadLetter
}

func (c *capture) StoreRaw(_ context.Context, ev substate.RawEvent) (uint64, bool, error) {
	c.raw = append(c.raw, ev)
	return uint64(len(c.raw)), false, nil
}

func (c *capture) RawBody(_ context.Context, seq uint64) ([]byte, error) {
	return c.raw[seq-1].Body, nil
}

func (c *capture) PublishDeadLetter(_ context.Context, d substate.DeadLetter) error {
	c.dead = append(c.dead, d)
	return nil
}

// FuzzIngress feeds arbitrary bodies and headers to both ingest routes: no
// panic, only the documented statuses, every accepted event has an id and a
// JSON object body, and every 400 kept the body as a dead letter.
func FuzzIngress(f *testing.F) {
	v := fixtures.StandardWebhookVector()
	f.Add(false, eventBridgeBody(f), testAPIKey, "", "", "")
	f.Add(false, []byte(`[{"id":"a"},{"id":"b"}]`), testAPIKey, "", "", "")
	f.Add(false, []byte(`[{"id":"a"}, 7]`), "nope", "", "", "")
	f.Add(true, []byte(v.Body), "", v.Headers["webhook-id"], v.Headers["webhook-timestamp"], v.Headers["webhook-signature"])
	f.Add(true, []byte(`{"rows":[]}`), "", "msg_1", "-9223372036854775808", "v1,AAAA")
	wv, err := ingress.NewWebhookVerifier(v.Secret)
	if err != nil {
		f.Fatal(err)
	}
	ts, _ := strconv.ParseInt(v.Headers["webhook-timestamp"], 10, 64)
	wv.Now = func() time.Time { return time.Unix(ts, 0) }
	f.Fuzz(func(t *testing.T, restate bool, body []byte, key, id, stamp, sig string) {
		c := &capture{}
		in := &ingress.Ingress{Store: c, DeadLetters: c, APIKey: testAPIKey}
		path := "/v1/ingest/eventbridge"
		if restate {
			in.Webhook, path = wv, "/v1/ingest/restate"
		}
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		for k, val := range map[string]string{"X-Api-Key": key, "webhook-id": id, "webhook-timestamp": stamp, "webhook-signature": sig} {
			if validHeader(val) {
				req.Header.Set(k, val)
			}
		}
		rec := httptest.NewRecorder()
		(&httpapi.Server{Ingest: in}).Handler().ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusAccepted:
			if len(c.raw) == 0 {
				t.Fatal("202 without a raw event")
			}
			for _, ev := range c.raw {
				var obj map[string]json.RawMessage
				if ev.ID == "" || json.Unmarshal(ev.Body, &obj) != nil {
					t.Fatalf("accepted event without id or not an object: %q %q", ev.ID, ev.Body)
				}
			}
		case http.StatusBadRequest:
			if headerRefusal(rec.Body.Bytes()) {
				// Refused on its headers, before the body was read or
				// authenticated: there is nothing to keep.
				if len(c.raw)+len(c.dead) != 0 {
					t.Fatalf("header refusal stored something: %d raw, %d dead", len(c.raw), len(c.dead))
				}
				return
			}
			if len(c.dead) != 1 || !bytes.Equal(c.dead[0].Body, body) || c.dead[0].Reason == "" {
				t.Fatalf("400 without the body as a dead letter: %+v %s", c.dead, rec.Body)
			}
		case http.StatusUnauthorized, http.StatusRequestEntityTooLarge:
			if len(c.raw)+len(c.dead) != 0 {
				t.Fatalf("%d stored something: %d raw, %d dead", rec.Code, len(c.raw), len(c.dead))
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

// headerRefusal reports whether an error body refuses a delivery for its
// webhook-id header, the one 400 given before the body is read.
func headerRefusal(answer []byte) bool {
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	return json.Unmarshal(answer, &e) == nil && strings.HasPrefix(e.Error.Message, "webhook-id header:")
}

// validHeader reports whether net/http would send s as a header value.
func validHeader(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return s != ""
}
