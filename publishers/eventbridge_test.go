package publishers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/publishers"
	"github.com/substatehq/substate/testkit/awstest"
)

func newEventBridge(t *testing.T) (*awstest.Server, *publishers.EventBridge) {
	t.Helper()
	srv := awstest.New(t)
	p := publishers.NewEventBridge(eventbridge.NewFromConfig(srv.Config()), "workflow-events")
	p.Backoff = func(int) time.Duration { return 0 }
	return srv, p
}

// events returns n canonical events with ids ev-0 … ev-(n-1).
func events(n int) []substate.Event {
	out := make([]substate.Event, n)
	for i := range out {
		out[i] = substate.NewEvent(fmt.Sprintf("ev-%d", i), substate.EventData{
			TenantID:    fmt.Sprintf("t-%d", i),
			Provider:    substate.ProviderStepFunctions,
			ExecutionID: fmt.Sprintf("arn:aws:states:us-east-1:123456789012:execution:orders:ord-%d", i),
			Workflow:    "orders",
			SubState:    substate.StateRunning,
			OccurredAt:  time.Date(2024, 6, 19, 10, 0, i, 0, time.UTC),
		})
	}
	return out
}

func TestEventBridgePublish(t *testing.T) {
	srv, p := newEventBridge(t)
	in := events(25)
	if err := p.Publish(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if got, want := srv.Calls("PutEvents"), 3; got != want {
		t.Fatalf("PutEvents calls = %d, want %d", got, want)
	}
	got := srv.Events()
	if len(got) != 25 || p.Published() != 25 || p.Failed() != 0 {
		t.Fatalf("%d entries stored, published %d, failed %d; want 25, 25, 0", len(got), p.Published(), p.Failed())
	}
	for i, e := range got {
		ev, err := substate.UnmarshalEvent([]byte(e.Detail))
		if err != nil {
			t.Fatal(err)
		}
		if ev.ID != in[i].ID || e.Source != "substate" || e.DetailType != "Workflow Sub-State Changed" || e.EventBusName != "workflow-events" ||
			len(e.Resources) != 1 || e.Resources[0] != in[i].Data.ExecutionID || !e.Time.Equal(in[i].Time.Time) {
			t.Fatalf("entry %d = %+v, want event %s", i, e, in[i].ID)
		}
	}
	if err := p.Publish(context.Background(), nil); err != nil || srv.Calls("PutEvents") != 3 {
		t.Fatalf("publishing nothing: %v, %d calls", err, srv.Calls("PutEvents"))
	}
}

// failing fails the entries of the given event ids the given number of
// times each (-1: always) with code.
func failing(code string, times int, ids ...string) func(awstest.PutEventsEntry) (string, string) {
	var mu sync.Mutex
	left := make(map[string]int)
	for _, id := range ids {
		left[id] = times
	}
	return func(e awstest.PutEventsEntry) (string, string) {
		mu.Lock()
		defer mu.Unlock()
		for id, n := range left {
			if n != 0 && strings.Contains(e.Detail, `"id":"`+id+`"`) {
				left[id]--
				return code, "injected failure"
			}
		}
		return "", ""
	}
}

func TestEventBridgePartialFailure(t *testing.T) {
	t.Run("RetriedThenOK", func(t *testing.T) {
		srv, p := newEventBridge(t)
		srv.FailEntries(failing("InternalFailure", 2, "ev-3", "ev-17"))
		if err := p.Publish(context.Background(), events(25)); err != nil {
			t.Fatal(err)
		}
		// 3 batches, then the two failed entries together, twice.
		if got, want := srv.Calls("PutEvents"), 5; got != want {
			t.Fatalf("PutEvents calls = %d, want %d", got, want)
		}
		if n := len(srv.Events()); n != 25 || p.Published() != 25 {
			t.Fatalf("%d entries stored, %d published; want 25 each, once", n, p.Published())
		}
	})
	t.Run("ErrPersistent", func(t *testing.T) {
		srv, p := newEventBridge(t)
		srv.FailEntries(failing("ThrottlingException", -1, "ev-3"))
		err := p.Publish(context.Background(), events(25))
		wantFailed(t, err, substate.EUNAVAILABLE, "ev-3", "ThrottlingException")
		if got, want := srv.Calls("PutEvents"), 3+publishers.DefaultEventBridgeAttempts-1; got != want {
			t.Fatalf("PutEvents calls = %d, want %d", got, want)
		}
		if len(srv.Events()) != 24 || p.Published() != 24 || p.Failed() != 1 {
			t.Fatalf("stored %d, published %d, failed %d; want 24, 24, 1", len(srv.Events()), p.Published(), p.Failed())
		}
	})
	t.Run("ErrPermanent", func(t *testing.T) {
		srv, p := newEventBridge(t)
		srv.FailEntries(failing("NotAuthorizedForSourceException", -1, "ev-1"))
		err := p.Publish(context.Background(), events(2))
		wantFailed(t, err, substate.EINVALID, "ev-1", "NotAuthorizedForSourceException")
		if got := srv.Calls("PutEvents"); got != 1 {
			t.Fatalf("PutEvents calls = %d, want 1: a refused entry is not resent", got)
		}
	})
}

// wantFailed checks that err has the code and names the one failed event.
func wantFailed(t *testing.T, err error, code, id, entryCode string) {
	t.Helper()
	if got := substate.ErrorCode(err); got != code {
		t.Fatalf("code = %s, want %s (err: %v)", got, code, err)
	}
	var ebErr *publishers.EventBridgeError
	if !errors.As(err, &ebErr) || len(ebErr.Failed) != 1 || ebErr.Failed[0].EventID != id || ebErr.Failed[0].Code != entryCode {
		t.Fatalf("err = %v, want %s failed with %s", err, id, entryCode)
	}
	if !strings.Contains(err.Error(), id) {
		t.Fatalf("err = %q does not name %s", err, id)
	}
}

func TestEventBridgeSizes(t *testing.T) {
	t.Run("BatchedBySize", func(t *testing.T) {
		srv, p := newEventBridge(t)
		in := events(5)
		for i := range in {
			in[i].Data.ErrorMessage = strings.Repeat("x", 100*1024)
		}
		if err := p.Publish(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		// Two 100 KiB entries fit in 256 KiB, three do not.
		if got, want := srv.Calls("PutEvents"), 3; got != want {
			t.Fatalf("PutEvents calls = %d, want %d", got, want)
		}
	})
	t.Run("ErrTooLarge", func(t *testing.T) {
		srv, p := newEventBridge(t)
		in := events(3)
		in[1].Data.ErrorMessage = strings.Repeat("x", 256*1024)
		err := p.Publish(context.Background(), in)
		wantFailed(t, err, substate.ETOOLARGE, "ev-1", publishers.TooLargeCode)
		if len(srv.Events()) != 2 || srv.Calls("PutEvents") != 1 {
			t.Fatalf("stored %d in %d calls; want the 2 others in 1", len(srv.Events()), srv.Calls("PutEvents"))
		}
	})
}

func TestEventBridgeRequestErrors(t *testing.T) {
	srv, p := newEventBridge(t)
	srv.Throttle("PutEvents", awstest.MaxAttempts)
	err := p.Publish(context.Background(), events(12))
	if got := substate.ErrorCode(err); got != substate.ETHROTTLED || !strings.HasPrefix(err.Error(), "eventbridge: put events: ") {
		t.Fatalf("err = %v (%s), want ETHROTTLED", err, got)
	}
	if p.Failed() != 12 {
		t.Fatalf("failed = %d, want 12", p.Failed())
	}
	srv.Fail("PutEvents", awstest.MaxAttempts, 500, "InternalFailure", "boom")
	if got := substate.ErrorCode(p.Publish(context.Background(), events(1))); got != substate.EUNAVAILABLE {
		t.Fatalf("code = %s, want EUNAVAILABLE", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Publish(ctx, events(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestEventBridgeBackoff(t *testing.T) {
	for retry, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 5: 1600 * time.Millisecond, 20: 5 * time.Second} {
		if got := publishers.DefaultEventBridgeBackoff(retry); got < want/2 || got > want {
			t.Errorf("backoff(%d) = %v, want within [%v, %v]", retry, got, want/2, want)
		}
	}
}
