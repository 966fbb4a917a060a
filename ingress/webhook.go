package ingress

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/substatehq/substate"
)

// WebhookVerifier checks Standard Webhooks signatures: HMAC-SHA256 over
// "id.timestamp.body" with a whsec_ secret, and a timestamp within
// Tolerance of now, which makes a captured request useless after a while.
type WebhookVerifier struct {
	Tolerance time.Duration // 0 means 5 minutes
	Now       func() time.Time

	wh *standardwebhooks.Webhook
}

// NewWebhookVerifier returns a verifier for a "whsec_<base64>" secret.
func NewWebhookVerifier(secret string) (*WebhookVerifier, error) {
	if !strings.HasPrefix(secret, "whsec_") {
		return nil, substate.Errorf(substate.EINVALID, "webhook secret must start with whsec_")
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "webhook secret is not whsec_ followed by base64")
	}
	return &WebhookVerifier{Tolerance: 5 * time.Minute, Now: time.Now, wh: wh}, nil
}

// CheckHeaders checks what of a delivery can be checked before its body
// is read: the webhook-id, webhook-timestamp and webhook-signature headers
// are there, the timestamp is within the tolerance (EUNAUTHORIZED
// otherwise), and the webhook-id is a bounded plain token (EINVALID).
func (v *WebhookVerifier) CheckHeaders(h http.Header) error {
	id, ts, sig := h.Get(substate.HeaderWebhookID), h.Get(substate.HeaderWebhookTimestamp), h.Get(substate.HeaderWebhookSignature)
	if id == "" || ts == "" || sig == "" {
		return substate.Errorf(substate.EUNAUTHORIZED, "missing webhook-id, webhook-timestamp or webhook-signature header")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return substate.Errorf(substate.EUNAUTHORIZED, "webhook-timestamp %s is not Unix seconds", substate.QuotePrefix(ts, substate.QuoteLimit))
	}
	if d := v.Now().Sub(time.Unix(sec, 0)); d > v.Tolerance || d < -v.Tolerance {
		return substate.Errorf(substate.EUNAUTHORIZED, "webhook-timestamp is %s away from now, beyond the tolerance of %s", d.Round(time.Second).Abs(), v.Tolerance)
	}
	return checkWebhookID(id)
}

// checkWebhookID refuses a webhook-id that cannot be a Nats-Msg-Id.
func checkWebhookID(id string) error {
	if err := substate.ValidateSourceID(id); err != nil {
		return substate.Errorf(substate.EINVALID, "webhook-id header: %s", substate.ErrorMessage(err))
	}
	return nil
}

// Verify checks the webhook-id, webhook-timestamp and webhook-signature
// headers against body: CheckHeaders, then the signature. A failed
// signature is an EUNAUTHORIZED error.
func (v *WebhookVerifier) Verify(body []byte, h http.Header) error {
	if err := v.CheckHeaders(h); err != nil {
		return err
	}
	// The timestamp is checked above with the injectable clock.
	if err := v.wh.VerifyIgnoringTimestamp(body, h); err != nil {
		return substate.Errorf(substate.EUNAUTHORIZED, "webhook signature does not match")
	}
	return nil
}

// SignWebhook returns the webhook-signature header value a Standard
// Webhooks sender computes for a delivery (what a Restate handler posting
// to substate does).
func SignWebhook(secret, id string, at time.Time, body []byte) (string, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return "", substate.WrapError(substate.EINVALID, err, "webhook secret is not whsec_ followed by base64")
	}
	return wh.Sign(id, at, body)
}
