package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// DefaultMaxEventStreams is how many GET /v1/events streams a server
// serves at once, when Limits.MaxEventStreams is 0: each holds a
// connection for as long as its client reads.
const DefaultMaxEventStreams = 256

// eventWriteTimeout is how long a write of an event stream waits for its
// client: one that reads nothing for that long is closed.
var eventWriteTimeout = 10 * time.Second

// EventParams are the query parameters of GET /v1/events.
var EventParams = []string{"tenant", "afterSeq", "since", "fromStart"}

// ParseEventStreamQuery reads the query parameters of GET /v1/events:
// tenant, afterSeq (a SUBSTATE_EVENTS sequence), since (as the history
// route's) and fromStart=true. A Last-Event-ID, lastID when not empty,
// stands for afterSeq: a client that reconnects resumes where it was.
func ParseEventStreamQuery(q url.Values, lastID string, now time.Time) (substate.EventStreamQuery, error) {
	var s substate.EventStreamQuery
	if err := CheckParams(q, EventParams); err != nil {
		return s, err
	}
	s.TenantID = first(q, "tenant")
	var err error
	if s.Since, err = ParseWhen("since", first(q, "since"), now); err != nil {
		return s, err
	}
	if v := cmp.Or(lastID, first(q, "afterSeq")); v != "" {
		if s.AfterSeq, err = strconv.ParseUint(v, 10, 64); err != nil {
			return s, substate.Errorf(substate.EINVALID, "afterSeq %s: want a stream sequence", substate.QuotePrefix(v, substate.QuoteLimit))
		}
	}
	if v := first(q, "fromStart"); v != "" {
		if s.FromStart, err = strconv.ParseBool(v); err != nil {
			return s, substate.Errorf(substate.EINVALID, "fromStart %s: want true or false", substate.QuotePrefix(v, substate.QuoteLimit))
		}
	}
	return s, nil
}

// EncodeEventStreamQuery writes q as the parameters ParseEventStreamQuery
// reads; zero fields are left out.
func EncodeEventStreamQuery(q substate.EventStreamQuery) url.Values {
	v := url.Values{}
	if q.TenantID != "" {
		v.Set("tenant", q.TenantID)
	}
	if q.AfterSeq != 0 {
		v.Set("afterSeq", strconv.FormatUint(q.AfterSeq, 10))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if q.FromStart {
		v.Set("fromStart", "true")
	}
	return v
}

// followEvents serves GET /v1/events: SUBSTATE_EVENTS as Server-Sent
// Events, one "event" event per canonical event with its stream sequence
// as the id and its CloudEvent as the data, from where the query says
// and then live, until the client goes. A key with a tenant prefix gets
// its tenants' events only, and asking for another tenant is 403.
func (s *Server) followEvents(w http.ResponseWriter, r *http.Request) {
	q, err := ParseEventStreamQuery(r.URL.Query(), r.Header.Get(substate.HeaderLastEventID), time.Now())
	if err == nil && q.TenantID != "" {
		err = principal(r).CheckTenant(q.TenantID)
	}
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	select {
	case s.eventStreams() <- struct{}{}:
		defer func() { <-s.eventStreams() }()
	default:
		httpx.Error(w, r, substate.Errorf(substate.EUNAVAILABLE,
			"%d event streams are open, as many as this worker serves; try again later", cap(s.eventStreams())), nil)
		return
	}
	ctx := r.Context() // ends when the client goes or the server closes (streaming)
	es := httpx.NewEventStream(w, eventWriteTimeout)
	defer es.Close()
	fmt.Fprintf(es, "retry: 1000\n\n")
	if es.Flush() != nil {
		return
	}
	events := make(chan substate.StoredEvent)
	errc := make(chan error, 1)
	go func() {
		defer close(events)
		for e, err := range s.Events.FollowEvents(ctx, q) {
			if err != nil {
				errc <- err
				return
			}
			select {
			case events <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	s.writeEvents(ctx, es, principal(r), events, errc)
}

// writeEvents writes the events the principal may see until the feed or
// the client ends; a feed that fails ends the stream with an "error"
// event carrying the JSON error body.
func (s *Server) writeEvents(ctx context.Context, es *httpx.EventStream, p Principal, events <-chan substate.StoredEvent, errc <-chan error) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-es.KeepAlive():
			fmt.Fprintf(es, ": keep-alive\n\n")
		case e, ok := <-events:
			if !ok {
				select {
				case err := <-errc:
					s.logger().Warn("event stream ended", "err", err)
					body, _ := json.Marshal(httpx.ErrorBody{Error: httpx.ErrorDetail{Code: substate.ErrorCode(err), Message: substate.ErrorMessage(err)}})
					fmt.Fprintf(es, "event: error\n")
					writeData(es, body)
				default:
				}
				_ = es.Flush()
				return
			}
			if p.TenantPrefix != "" && !p.SeesTenant(eventTenant(e.Data)) {
				continue
			}
			fmt.Fprintf(es, "id: %d\nevent: event\n", e.Seq)
			writeData(es, e.Data)
		case <-es.Due():
			if es.Flush() != nil {
				return
			}
		}
	}
}

// writeData writes data as an event's data lines and ends the event: a
// JSON event is compacted onto one line; anything else is split at its
// line breaks, which a client joins back with "\n". Data on one line (a
// stored CloudEvent) is written as it is.
func writeData(w io.Writer, data []byte) {
	if !bytes.ContainsAny(data, "\r\n") {
		_, _ = io.WriteString(w, "data: ") // a failed write shows in the flush that follows
		_, _ = w.Write(data)
		_, _ = io.WriteString(w, "\n\n")
		return
	}
	var b bytes.Buffer
	if json.Compact(&b, data) == nil {
		data = b.Bytes()
	}
	var out bytes.Buffer
	for _, line := range bytes.Split(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\n")) {
		out.WriteString("data: ")
		out.Write(bytes.ReplaceAll(line, []byte("\r"), nil))
		out.WriteByte('\n')
	}
	out.WriteByte('\n')
	_, _ = w.Write(out.Bytes())
}

// eventTenant is the tenant of a stored CloudEvent, "" when it names none.
func eventTenant(data []byte) string {
	var e struct {
		Data struct {
			TenantID string `json:"tenantId"`
		} `json:"data"`
	}
	_ = json.Unmarshal(data, &e)
	return e.Data.TenantID
}

// eventStreams is the semaphore of the event streams being served.
func (s *Server) eventStreams() chan struct{} {
	s.initStreams()
	return s.streams
}

// closingContext is cancelled when the server closes: the streams it
// serves end then, as Shutdown does not wait for them.
func (s *Server) closingContext() context.Context {
	s.initStreams()
	return s.closing
}

func (s *Server) initStreams() {
	s.streamsOnce.Do(func() {
		s.closing, s.closeStreams = context.WithCancel(context.Background())
		s.streams = make(chan struct{}, cmp.Or(s.Limits.MaxEventStreams, DefaultMaxEventStreams))
	})
}
