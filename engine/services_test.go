package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate/testkit/natstest"
)

func TestSubjectMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"substate.tasks.svc.op", "substate.tasks.svc.op", true},
		{"substate.tasks.svc.op", "substate.tasks.svc.other", false},
		{"substate.tasks.svc.*", "substate.tasks.svc.op", true},
		{"substate.tasks.*.op", "substate.tasks.svc.op", true},
		{"substate.tasks.>", "substate.tasks.svc.op", true},
		{"substate.tasks.svc.op.>", "substate.tasks.svc.op", false},
		{"substate.tasks.svc", "substate.tasks.svc.op", false},
		{"substate.tasks.svc.op.x", "substate.tasks.svc.op", false},
		{">", "substate.tasks.svc.op", true},
	} {
		if got := subjectMatches(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", tc.pattern, tc.subject, got, tc.want)
		}
	}
}

func TestResources(t *testing.T) {
	d, err := ParseFile("demo/order_processing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := "fulfillmentService.ship inventoryService.check inventoryService.reserve notificationService.backorder orderService.validate paymentService.charge paymentService.reverse"
	if got := strings.Join(d.Resources(), " "); got != want {
		t.Errorf("resources %q, want %q", got, want)
	}
}

// TestUnservedResources asks an embedded NATS server which resources of the
// order workflow have a task service: none at first, then those of a
// service with one endpoint per operation and of one with a wildcard
// endpoint.
func TestUnservedResources(t *testing.T) {
	nc := natstest.Conn(t, natstest.Server(t))
	d, err := ParseFile("demo/order_processing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ask := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		missing, err := UnservedResources(ctx, nc, d)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(missing, " ")
	}
	if got, want := ask(), strings.Join(d.Resources(), " "); got != want {
		t.Fatalf("with no services, missing %q, want all: %q", got, want)
	}
	natstest.Service(t, nc, "orderService", "validate", func(micro.Request) {})
	svc, err := micro.AddService(nc, micro.Config{Name: "paymentService", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := svc.AddEndpoint("any", micro.HandlerFunc(func(micro.Request) {}), micro.WithEndpointSubject("substate.tasks.paymentService.*")); err != nil {
		t.Fatal(err)
	}
	want := "fulfillmentService.ship inventoryService.check inventoryService.reserve notificationService.backorder"
	if got := ask(); got != want {
		t.Errorf("missing %q, want %q", got, want)
	}
}
