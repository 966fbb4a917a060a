package ingress

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
	"github.com/substatehq/substate/internal/tracing"
)

// MaxIngestBody is the largest request body ingress accepts (1 MiB, what an
// EventBridge API destination sends at most).
const MaxIngestBody = 1 << 20

// DefaultBodyTimeout is how long a request body may take to arrive once
// its headers are in: 1 MiB at 100 KB/s. A provider posts from a data
// centre; a client slower than that only holds a connection.
const DefaultBodyTimeout = 10 * time.Second

// DefaultPublishTimeout is how long one request waits for NATS to
// acknowledge its events when Ingress.Timeout is 0.
const DefaultPublishTimeout = 5 * time.Second

// Ingress receives provider status changes over HTTP and puts them on
// SUBSTATE_RAW. It answers 202 only after JetStream acknowledged every raw
// event of the request, so a provider that retries on 5xx never loses one.
type Ingress struct {
	// Store stores the raw events and tells a redelivery (202, counted as
	// a duplicate) from a reused id with another body (409 and a dead
	// letter).
	Store RawStore
	// APIKey, when set, is the X-Api-Key every EventBridge delivery must carry.
	APIKey string
	// Webhook, when set, verifies the Standard Webhooks signature of every
	// Restate delivery.
	Webhook *WebhookVerifier
	// Exposed says the server listens beyond loopback. A route whose
	// credential is not configured then refuses every request, so setting
	// one provider's credential never leaves the other's route open.
	Exposed bool
	// DeadLetters, when set, keeps the body of every authenticated request
	// refused as malformed (400) on substate.dlq.ingest with the reason: the
	// provider was told no, and its bytes stay as evidence. The 400 is sent
	// only after JetStream stored the dead letter.
	DeadLetters substate.DeadLetterPublisher
	// Ready reports whether NATS is reachable; while it is not, requests get
	// 503 at once. Nil means always ready.
	Ready func() bool
	// Admission, when set, answers 429 with Retry-After while the raw
	// backlog or the publishes in flight pass their bounds.
	Admission *Admission
	Timeout   time.Duration // publish timeout of one request; 0 means DefaultPublishTimeout
	// BodyTimeout bounds the time a request's body may take to arrive once
	// its headers are in and its credential checked; 0 means
	// DefaultBodyTimeout. A body slower than that is answered 408.
	BodyTimeout time.Duration
	Now         func() time.Time
	Metrics     *Metrics
	// Tracer, when set, makes a span of each request and of each raw
	// event's publish (nil: no tracing).
	Tracer *tracing.Tracer
	Logger *slog.Logger
}

// Endpoint returns the handler of provider p's ingest route, which the
// HTTP server's route table mounts (httpapi.Server.Ingest): EventBridge
// events of Step Functions (POST /v1/ingest/eventbridge) or Restate
// invocation rows (POST /v1/ingest/restate). It is nil for a provider that
// does not push its events.
func (in *Ingress) Endpoint(p substate.Provider) http.Handler {
	switch p {
	case substate.ProviderStepFunctions:
		return in.endpoint(p, route{in.eventBridgeHeaders, in.eventBridge})
	case substate.ProviderRestate:
		return in.endpoint(p, route{in.restateHeaders, in.restate})
	}
	return nil
}

// route is what an ingest route checks of a request: its headers, before
// any of the body is read (the credential, when it is one), then its body.
type route struct {
	headers func(h http.Header) error
	decode  func(r *http.Request, body []byte) ([]substate.RawEvent, error)
}

// endpoint wraps a route with the steps every ingest route shares:
// headers first, body limits, readiness, publishing, metrics and the
// error body.
func (in *Ingress) endpoint(p substate.Provider, rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := in.now()
		r, span := in.Tracer.Ingest(r, p)
		res, err := in.ingest(w, r, rt)
		span.EndRequest(err)
		in.observe(p, start, err)
		if err != nil {
			if substate.ErrorCode(err) == substate.ETHROTTLED {
				w.Header().Set("Retry-After", in.Admission.retryAfter())
				in.Metrics.countThrottled()
			}
			httpx.Error(w, r, err, in.Logger)
			return
		}
		httpx.JSON(w, http.StatusAccepted, res)
	})
}

// ingest takes one delivery. Its headers are checked before any of its
// body is read: a request without the credential is refused at once, with
// the connection closed, and holds no connection for the time its body
// would take.
func (in *Ingress) ingest(w http.ResponseWriter, r *http.Request, rt route) (IngestResult, error) {
	if err := rt.headers(r.Header); err != nil {
		httpx.DropBody(w)
		return IngestResult{}, err
	}
	body, err := in.readBody(w, r)
	if err != nil {
		return IngestResult{}, err
	}
	events, err := rt.decode(r, body)
	if err == nil {
		err = checkUTF8(body)
	}
	withTraceParent(events, r.Header.Get(substate.HeaderTraceParent))
	if substate.ErrorCode(err) == substate.EINVALID {
		return IngestResult{}, in.deadLetter(r, body, err)
	} else if err != nil {
		return IngestResult{}, err
	}
	if err := in.checkReady(); err != nil {
		return IngestResult{}, err
	}
	release, err := in.Admission.admit(len(events))
	if err != nil {
		return IngestResult{}, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), cmp.Or(in.Timeout, DefaultPublishTimeout))
	defer cancel()
	res, err := in.publish(ctx, events)
	if substate.ErrorCode(err) == substate.ECONFLICT {
		return res, in.deadLetter(r, body, err)
	}
	return res, err
}

func (in *Ingress) checkReady() error {
	if in.Ready != nil && !in.Ready() {
		return substate.Errorf(substate.EUNAVAILABLE, "nats is unavailable, retry later")
	}
	return nil
}

// deadLetterHeaders are the request headers a dead letter keeps; the
// credentials (X-Api-Key) stay out of the stream.
var deadLetterHeaders = []string{substate.HeaderContentType, "User-Agent", substate.HeaderWebhookID, substate.HeaderWebhookTimestamp}

// deadLetter stores the body of a request refused as malformed on
// substate.dlq.ingest and returns refusal, the error to answer with. While
// NATS is away the answer is 503 instead, so the provider retries and the
// body is kept then.
func (in *Ingress) deadLetter(r *http.Request, body []byte, refusal error) error {
	if in.DeadLetters == nil {
		return refusal
	}
	if err := in.checkReady(); err != nil {
		return err
	}
	header := map[string][]string{substate.HeaderReceivedAt: {in.now().UTC().Format(time.RFC3339Nano)}}
	for _, k := range deadLetterHeaders {
		if v := r.Header.Values(k); len(v) > 0 {
			header[k] = v
		}
	}
	sum := sha256.Sum256(append([]byte(r.URL.Path+"\n"), body...))
	d := substate.DeadLetter{
		Stage: substate.StageIngest, Reason: substate.DeadLetterReason(refusal), Subject: r.URL.Path,
		ID: substate.StageIngest + "/" + hex.EncodeToString(sum[:]), Body: body, Header: header,
	}
	ctx, cancel := context.WithTimeout(r.Context(), cmp.Or(in.Timeout, DefaultPublishTimeout))
	defer cancel()
	if err := in.DeadLetters.PublishDeadLetter(ctx, d); err != nil {
		if substate.ErrorCode(err) != substate.ETOOLARGE {
			return publishError(err)
		}
		in.logger().Warn("refused body too large to keep as a dead letter", "path", r.URL.Path, "bytes", len(body), "err", err)
		return refusal
	}
	in.Metrics.countDeadLetter(substate.StageIngest, substate.ErrorCode(refusal))
	in.logger().Warn("dead-lettered", "stage", substate.StageIngest, "path", r.URL.Path, "reason", d.Reason)
	return refusal
}

func (in *Ingress) logger() *slog.Logger {
	return cmp.Or(in.Logger, slog.New(slog.DiscardHandler))
}

// publishError turns a failed publish into what the caller should do:
// retry later, unless the message itself was refused.
func publishError(err error) error {
	if substate.ErrorCode(err) == substate.ETOOLARGE {
		return err
	}
	return substate.WrapError(substate.EUNAVAILABLE, err, "nats did not acknowledge the event, retry later")
}

// checkUTF8 refuses a body that is not valid UTF-8: JSON text is UTF-8
// (RFC 8259), EventBridge and Restate send nothing else, and repairing the
// bytes would merge distinct ids (see docs/pipeline.md, tenant ids). It
// runs after authentication, so the refusal is kept as a dead letter.
func checkUTF8(body []byte) error {
	if utf8.Valid(body) {
		return nil
	}
	at := len(body)
	for i := 0; i < len(body); {
		r, size := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && size <= 1 {
			at = i
			break
		}
		i += size
	}
	return substate.Errorf(substate.EINVALID, "body is not valid UTF-8 (byte 0x%02X at offset %d)", body[at], at)
}

// readBody reads a request body of at most MaxIngestBody bytes within
// BodyTimeout: a larger one is 413, a slower one 408, and either closes
// the connection.
func (in *Ingress) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxIngestBody {
		httpx.DropBody(w)
		return nil, substate.Errorf(substate.ETOOLARGE, "body of %d bytes is above the limit of %d", r.ContentLength, MaxIngestBody)
	}
	// The server's own deadline is for the whole request; this one is
	// tighter, and runs from now, once the headers passed.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(cmp.Or(in.BodyTimeout, DefaultBodyTimeout)))
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxIngestBody+1))
	if err != nil {
		return nil, httpx.BodyError(w, err)
	}
	if len(body) > MaxIngestBody {
		httpx.DropBody(w)
		return nil, substate.Errorf(substate.ETOOLARGE, "body is above the limit of %d bytes", MaxIngestBody)
	}
	return body, nil
}

func (in *Ingress) observe(p substate.Provider, start time.Time, err error) {
	if in.Metrics == nil {
		return
	}
	outcome := "accepted"
	if err != nil {
		outcome = substate.ErrorCode(err)
	}
	in.Metrics.Ingested.WithLabelValues(string(p), outcome).Inc()
	in.Metrics.IngestLatency.WithLabelValues(string(p)).Observe(in.now().Sub(start).Seconds())
}

func (in *Ingress) now() time.Time {
	if in.Now != nil {
		return in.Now()
	}
	return time.Now()
}

// eventBridgeHeaders checks an EventBridge delivery's X-Api-Key.
func (in *Ingress) eventBridgeHeaders(h http.Header) error {
	if in.APIKey == "" && in.Exposed {
		return substate.Errorf(substate.EUNAUTHORIZED, "eventbridge ingest is closed: no API key is configured and the server is not on loopback")
	}
	if in.APIKey != "" && subtle.ConstantTimeCompare([]byte(h.Get(substate.HeaderAPIKey)), []byte(in.APIKey)) != 1 {
		return substate.Errorf(substate.EUNAUTHORIZED, "missing or wrong X-Api-Key header")
	}
	return nil
}

// eventBridge decodes one EventBridge event or a JSON array of them. Each
// must be an object with an id; what the event says is the normalizer's
// business, so an unknown detail-type is accepted and dead-lettered there
// with the provider's bytes kept as evidence.
func (in *Ingress) eventBridge(_ *http.Request, body []byte) ([]substate.RawEvent, error) {
	items, err := splitJSON(body)
	if err != nil {
		return nil, err
	}
	events := make([]substate.RawEvent, len(items))
	for i, item := range items {
		var env struct {
			ID *string `json:"id"`
		}
		if err := jsonv2.Unmarshal(item, &env, envelopeOptions); err != nil {
			if _, syntax := errors.AsType[*jsontext.SyntacticError](err); syntax || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, substate.Errorf(substate.EINVALID, "body is not valid JSON")
			}
			return nil, substate.WrapError(substate.EINVALID, err, "event %d: not an EventBridge event object", i)
		}
		if env.ID == nil || *env.ID == "" {
			return nil, substate.Errorf(substate.EINVALID, "event %d: missing \"id\"", i)
		}
		if err := substate.ValidateSourceID(*env.ID); err != nil {
			return nil, substate.Errorf(substate.EINVALID, "event %d: %s", i, substate.ErrorMessage(err))
		}
		events[i] = substate.RawEvent{Kind: substate.RawEventBridge, ID: *env.ID, Body: item}
	}
	return events, nil
}

// restateHeaders checks a Restate delivery's headers: with a secret, the
// Standard Webhooks headers are there, the timestamp within the tolerance
// (the signature needs the body); a webhook-id is bounded either way.
func (in *Ingress) restateHeaders(h http.Header) error {
	if in.Webhook == nil && in.Exposed {
		return substate.Errorf(substate.EUNAUTHORIZED, "restate ingest is closed: no webhook secret is configured and the server is not on loopback")
	}
	if in.Webhook != nil {
		return in.Webhook.CheckHeaders(h)
	}
	if id := h.Get(substate.HeaderWebhookID); id != "" {
		return checkWebhookID(id)
	}
	return nil
}

// restate decodes one sys_invocation row or {"rows":[…]}, verified by its
// Standard Webhooks signature when a secret is configured. The webhook-id
// identifies the delivery; unsigned deliveries (no secret, loopback only)
// without one are identified by a hash of the body.
func (in *Ingress) restate(r *http.Request, body []byte) ([]substate.RawEvent, error) {
	if in.Webhook != nil {
		if err := in.Webhook.Verify(body, r.Header); err != nil {
			return nil, err
		}
	}
	if !json.Valid(body) {
		return nil, substate.Errorf(substate.EINVALID, "body is not valid JSON")
	}
	if t := firstByte(body); t != '{' {
		return nil, substate.Errorf(substate.EINVALID, "body must be a sys_invocation row object or {\"rows\":[…]}")
	}
	id := r.Header.Get(substate.HeaderWebhookID)
	if id == "" {
		sum := sha256.Sum256(body)
		id = "sha256:" + hex.EncodeToString(sum[:])
	}
	return []substate.RawEvent{{Kind: substate.RawRestate, ID: id, Body: body}}, nil
}

// envelopeOptions decode an EventBridge event's envelope in one pass that
// also checks the whole object, as encoding/json's checks did (its
// Valid, then its Unmarshal, then a decode: three passes over every
// request): a member given twice takes its last value, names match
// without regard to case, and invalid UTF-8 is the normalizer's to refuse
// with the bytes kept as evidence.
var envelopeOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true), jsonv2.MatchCaseInsensitiveNames(true))

// splitJSON returns the elements of a JSON array, or the body itself when it
// is one object.
func splitJSON(body []byte) ([]json.RawMessage, error) {
	switch firstByte(body) {
	case '{':
		return []json.RawMessage{body}, nil // eventBridge's decode checks the whole object
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			return nil, substate.WrapError(substate.EINVALID, err, "body is not a valid JSON array")
		}
		if len(items) == 0 {
			return nil, substate.Errorf(substate.EINVALID, "empty array: no events")
		}
		return items, nil
	case 0:
		return nil, substate.Errorf(substate.EINVALID, "empty body")
	}
	return nil, substate.Errorf(substate.EINVALID, "body must be a JSON object or an array of objects")
}

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}
