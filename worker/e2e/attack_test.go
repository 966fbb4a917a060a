package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/replay"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/worker"
)

// TestAttacksLeaveViewAndStreams is the attack of the issue that made NATS
// authenticated, tried on a running worker: an anonymous client, and the
// task-service and subscriber identities, try to read everything, purge
// SUBSTATE_RAW and publish a forged event that turns a failed tenant
// succeeded and creates another. Every attempt is refused; the view, the
// streams and verify are as before.
func TestAttacksLeaveViewAndStreams(t *testing.T) {
	dataDir := t.TempDir()
	w := workertest.Start(t, workertest.DataDir(dataDir))
	workertest.IngestTenant(t, w.HTTP.URL(), "victim", "")
	workertest.Eventually(t, func() string {
		if v, err := w.View.Tenant(context.Background(), "victim"); err != nil || v.WorkflowSubState != substate.StateFailed {
			return fmt.Sprintf("victim: %+v %v", v, err)
		}
		return ""
	})
	before := streamCounts(t, w)
	url := w.Bus.ClientURL()

	for _, opts := range [][]nats.Option{nil, {nats.UserInfo("substate", "")}, {nats.Token("x")}} {
		if nc, err := nats.Connect(url, opts...); err == nil {
			nc.Close()
			t.Fatal("a client without substate's credentials connected")
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("refused with %v, want an authorization violation", err)
		}
	}

	forged := substate.EventData{TenantID: "victim", Provider: substate.ProviderStepFunctions,
		ExecutionID: "arn:aws:states:us-east-1:123456789012:execution:order-fulfillment:ord-2024-000124-victim",
		SubState:    substate.StateSucceeded, Revision: 1 << 40, OccurredAt: time.Now(), ExecutionStartedAt: time.Now()}
	forged.Normalize()
	ghost := forged
	ghost.TenantID = "ghost-tenant"
	for _, id := range []bus.Identity{bus.Tasks, bus.Subscriber} {
		t.Run(string(id), func(t *testing.T) {
			seed := (bus.Credentials{Dir: worker.NATSCredentialsDir(dataDir)}).SeedFile(id)
			key, err := nats.NkeyOptionFromSeed(seed)
			if err != nil {
				t.Fatal(err)
			}
			violations := make(chan error, 16)
			nc, err := nats.Connect(url, key, nats.CustomInboxPrefix("_INBOX_subscriber"),
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			sub, _ := nc.SubscribeSync(">")
			for _, d := range []substate.EventData{forged, ghost} {
				b, _ := json.Marshal(substate.NewEvent("forged-"+d.TenantID, d))
				_ = nc.Publish(substate.EventsSubject(d.TenantID), b)
			}
			js, _ := jetstream.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+substate.StreamRaw, nil); err == nil {
				t.Error("purged SUBSTATE_RAW")
			}
			ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := js.DeleteStream(ctx, substate.StreamEvents); err == nil {
				t.Error("deleted SUBSTATE_EVENTS")
			}
			_ = nc.Flush()
			if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
				t.Errorf("subscribed to > and received %s", m.Subject)
			}
			select {
			case err := <-violations:
				if !errors.Is(err, nats.ErrPermissionViolation) {
					t.Errorf("error %v, want a permission violation", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("no permission violation reported")
			}
		})
	}

	// The projector has had every chance to apply what got through.
	w.Stop(t)
	restarted := workertest.Start(t, workertest.DataDir(dataDir))
	if got := streamCounts(t, restarted); got != before {
		t.Errorf("streams %v after the attacks, want %v", got, before)
	}
	if v, err := restarted.View.Tenant(context.Background(), "victim"); err != nil || v.WorkflowSubState != substate.StateFailed {
		t.Errorf("victim after the attacks: %+v %v", v, err)
	}
	if _, err := restarted.View.Tenant(context.Background(), "ghost-tenant"); substate.ErrorCode(err) != substate.ENOTFOUND {
		t.Errorf("ghost-tenant: %v, want not found", err)
	}
	if v := verifyEqual(t, restarted); v.Evidence == nil || v.Evidence.Counts[replay.CheckVerified] != 1 {
		t.Errorf("verify: evidence %+v, want 1 verified", v.Evidence)
	}
	if code, _, _ := workertest.APIGet(t, restarted.HTTP.URL()+"/v1/tenants/ghost-tenant", ""); code != http.StatusNotFound {
		t.Errorf("GET ghost-tenant: %d", code)
	}
}

// streamCounts is how many messages each of substate's streams holds.
func streamCounts(tb testing.TB, w *workertest.Worker) [3]uint64 {
	tb.Helper()
	var out [3]uint64
	for i, name := range []string{substate.StreamRaw, substate.StreamEvents, substate.StreamDLQ} {
		s, err := w.Bus.JetStream.Stream(context.Background(), name)
		if err != nil {
			tb.Fatal(err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = info.State.Msgs
	}
	return out
}
