// Package demo holds the workflow language's complete example, the order
// processing workflow, and task services that make it do something: some
// succeed, one fails once and then succeeds (a retry), some fail for good
// (one caught by a catch block), and one fails until an operator retries it. substate's demo command and the
// engine's end-to-end test run them.
package demo

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/substatehq/substate"
)

// Workflow is the order_processing_workflow definition, as in the language
// specification.
//
//go:embed order_processing.yaml
var Workflow []byte

// Scenario is one demo execution: its input and how it ends.
type Scenario struct {
	Name     string          // execution name
	TenantID string          // the tenant it provisions
	Input    json.RawMessage // execution input
	Outcome  string          // substate.EngineSucceeded or substate.EngineFailed
	Story    string          // what happens, for people watching
}

// Scenarios are the demo's orders: one for each of the workflow's four paths,
// and one that fails until an operator retries it.
var Scenarios = []Scenario{
	{"order-happy", "acme", json.RawMessage(`{"orderId":"o-100","amount":250,"quantity":2}`), substate.EngineSucceeded,
		"reserving inventory fails once (InventoryBusy), is retried after a backoff, then the order ships"},
	{"order-backorder", "globex", json.RawMessage(`{"orderId":"o-200","amount":80,"quantity":50}`), substate.EngineFailed,
		"not enough stock: the customer is notified of the backorder and the order fails"},
	{"order-declined", "initech", json.RawMessage(`{"orderId":"o-300","amount":5000,"quantity":1}`), substate.EngineFailed,
		"the card is declined (PaymentError) on every retry; catch reverses the payment and the order fails"},
	{"order-invalid", "umbrella", json.RawMessage(`{"amount":10,"quantity":1}`), substate.EngineFailed,
		"the order has no id (ValidationError): retried, then caught, and the order fails"},
	{"order-courier-down", "cyberdyne", json.RawMessage(`{"orderId":"` + CourierDownOrder + `","amount":120,"quantity":1}`), substate.EngineFailed,
		"the courier is down when the order ships (CourierUnavailable, no retry): the order fails until an operator retries it"},
}

// CourierDownOrder is the order whose first shipment fails: the courier is
// down the first time it is asked, and up for every later visit, so an
// operator's retry (substate executions retry) ships it.
const CourierDownOrder = "o-500"

// Stock is how many items the demo inventory holds for any order.
const Stock = 10

// CardLimit is the largest amount the demo payment service charges.
const CardLimit = 1000

// order is the part of the state input the demo services read.
type order struct {
	OrderID  string  `json:"orderId"`
	Amount   float64 `json:"amount"`
	Quantity int     `json:"quantity"`
}

// handler answers one task request: output, or an error type and message.
type handler func(o order, attemptKey string) (out any, errType, msg string)

var handlers = map[string]map[string]handler{
	"orderService": {"validate": validate},
	"inventoryService": {
		"check": func(o order, _ string) (any, string, string) {
			return map[string]any{"inventoryAvailable": o.Quantity <= Stock}, "", ""
		},
		"reserve": reserve,
	},
	"paymentService": {
		"charge":  charge,
		"reverse": func(o order, _ string) (any, string, string) { return map[string]any{"reversed": true}, "", "" },
	},
	"fulfillmentService":  {"ship": ship},
	"notificationService": {"backorder": func(o order, _ string) (any, string, string) { return map[string]any{"customerNotified": true}, "", "" }},
}

func validate(o order, _ string) (any, string, string) {
	switch {
	case o.OrderID == "":
		return nil, "ValidationError", "the order has no orderId"
	case o.Amount <= 0:
		return nil, "ValidationError", fmt.Sprintf("order %s has no positive amount", o.OrderID)
	}
	return map[string]any{"validated": true}, "", ""
}

// reserve fails the first attempt of every execution, as a busy inventory would.
func reserve(o order, key string) (any, string, string) {
	if strings.HasSuffix(key, "/1") {
		return nil, "InventoryBusy", "inventory is locked by another order; try again"
	}
	return map[string]any{"reservationId": "res-" + o.OrderID}, "", ""
}

// courierBackStep is the first step at which the courier ships
// CourierDownOrder. The idempotency key carries the step, the number of
// states the execution entered: the order workflow enters fulfill_order at
// step 6, and an operator's redrive enters it again at a later one. Any
// demo services process, a new one included, answers the same.
const courierBackStep = 7

// ship ships an order; CourierDownOrder's first visit finds the courier down.
func ship(o order, key string) (any, string, string) {
	if o.OrderID == CourierDownOrder && keyStep(key) < courierBackStep {
		return nil, "CourierUnavailable", "the courier's API answered 503: no pickup could be booked"
	}
	return map[string]any{"trackingNumber": "trk-" + o.OrderID}, "", ""
}

// keyStep is the step of an idempotency key "execution/step/state/attempt"
// (the execution name has no slash), or 0.
func keyStep(key string) int {
	parts := strings.Split(key, "/")
	if len(parts) != 4 {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}

func charge(o order, _ string) (any, string, string) {
	if o.Amount > CardLimit {
		return nil, "PaymentError", fmt.Sprintf("card declined: %.2f is above the card limit", o.Amount)
	}
	return map[string]any{"paymentId": "pay-" + o.OrderID}, "", ""
}

// Serves reports whether the demo task services answer a resource
// ("service.operation").
func Serves(resource string) bool {
	i := strings.LastIndexByte(resource, '.')
	if i < 0 {
		return false
	}
	_, ok := handlers[resource[:i]][resource[i+1:]]
	return ok
}

// Services are the running demo task services.
type Services struct {
	svcs []micro.Service
}

// Register starts the demo task services on nc, one nats micro service per
// service name with an endpoint per operation.
func Register(nc *nats.Conn) (*Services, error) {
	s := &Services{}
	for _, name := range []string{"orderService", "inventoryService", "paymentService", "fulfillmentService", "notificationService"} {
		svc, err := micro.AddService(nc, micro.Config{Name: name, Version: "1.0.0", Description: "substate demo task service"})
		if err != nil {
			_ = s.Stop()
			return nil, fmt.Errorf("add demo service %s: %w", name, err)
		}
		s.svcs = append(s.svcs, svc)
		for op, h := range handlers[name] {
			if err := svc.AddEndpoint(op, serve(h), micro.WithEndpointSubject(substate.TaskSubject(name, op))); err != nil {
				_ = s.Stop()
				return nil, fmt.Errorf("add demo endpoint %s.%s: %w", name, op, err)
			}
		}
	}
	return s, nil
}

// serve adapts a handler to a micro endpoint: errors go back as a micro
// error whose code is the error type, with the {errorType, message} body.
func serve(h handler) micro.HandlerFunc {
	return func(req micro.Request) {
		var o order
		_ = json.Unmarshal(req.Data(), &o)
		out, errType, msg := h(o, req.Headers().Get(substate.HeaderIdempotencyKey))
		if errType != "" {
			body, _ := json.Marshal(map[string]string{"errorType": errType, "message": msg})
			_ = req.Error(errType, msg, body)
			return
		}
		_ = req.RespondJSON(out)
	}
}

// Stop stops every demo service.
func (s *Services) Stop() error {
	var errs []error
	for _, svc := range s.svcs {
		errs = append(errs, svc.Stop())
	}
	return errors.Join(errs...)
}
