package bus

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/substatehq/substate"
)

// StreamChanges is the durable change feed's stream: subscribers may read
// it like SUBSTATE_EVENTS.
const StreamChanges = substate.StreamChanges

// SubscriberStreams are the streams a Subscriber may read with JetStream.
var SubscriberStreams = []string{substate.StreamEvents, StreamChanges}

// TaskReplyWindow is how long a task service may take to answer one
// request: its permission to publish to that request's reply inbox lasts
// this long.
const TaskReplyWindow = 24 * time.Hour

// WorkerConsumers returns the names of the worker's durable consumers on
// the streams subscribers read: the EventBridge forwarder and the projector
// of the default instance and of each named one. Subscribers may not read,
// acknowledge, change or delete them.
func WorkerConsumers(instances ...string) []string {
	out := []string{ConsumerEventBridge, ProjectorConsumer("")}
	for _, in := range instances {
		if name := ProjectorConsumer(in); !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// DefaultSubscriberConsumers are the consumer names subscribers may create
// when none are given (--subscriber-consumers).
var DefaultSubscriberConsumers = []string{"subscriber-1", "subscriber-2", "subscriber-3", "subscriber-4"}

// MaxSubscriberConsumers bounds the names subscribers may be given, far
// below a stream's consumer limit (nats-server's default is 1,000), which
// the worker's own consumers need room under.
const MaxSubscriberConsumers = 256

// Consumers names the consumers of the streams subscribers read.
type Consumers struct {
	// Worker are the worker's durable consumers (WorkerConsumers), which
	// subscribers may not read, acknowledge, change or delete.
	Worker []string
	// Subscriber are the only names under which subscribers may create
	// and use consumers, durable or not, on each stream they read: at most
	// that many consumers of theirs exist on a stream at once, so they can
	// never fill the stream's consumer limit and keep the worker from
	// creating its own. Nil means DefaultSubscriberConsumers.
	Subscriber []string
}

// subscriber returns the names subscribers may use.
func (c Consumers) subscriber() []string {
	if c.Subscriber == nil {
		return DefaultSubscriberConsumers
	}
	return c.Subscriber
}

// Check says why the subscribers' names cannot be used: too many, not a
// valid consumer name, or in the worker's "substate-" names.
func (c Consumers) Check() error {
	names := c.subscriber()
	if len(names) > MaxSubscriberConsumers {
		return fmt.Errorf("subscriber consumers: %d names, more than the %d allowed", len(names), MaxSubscriberConsumers)
	}
	for _, n := range names {
		switch {
		case n == "" || len(n) > 64 || strings.ContainsAny(n, ".*> \t\r\n/\\"):
			return fmt.Errorf("subscriber consumer %q: a name is 1 to 64 characters without dots, wildcards, slashes or spaces", n)
		case strings.HasPrefix(n, "substate-") || slices.Contains(c.Worker, n):
			return fmt.Errorf("subscriber consumer %q: names starting with substate- are the worker's", n)
		}
	}
	return nil
}

// Permissions returns what an identity may publish and subscribe to.
// consumers name the worker's consumers, which subscribers must not
// touch, and the ones subscribers may create.
func Permissions(id Identity, consumers Consumers) *server.Permissions {
	switch id {
	case Worker:
		return workerPermissions()
	case Tasks:
		return taskPermissions()
	case Subscriber:
		return subscriberPermissions(consumers)
	}
	return denyAll()
}

// workerPermissions: substate's subjects, the JetStream API and acks (it
// may watch its consumers' acks too), its inboxes, and the service
// discovery subjects: the engine's control endpoint answers them, and
// "workflow start" asks them which task services are there.
func workerPermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{"substate.>", "$JS.API.>", "$JS.ACK.>", "_INBOX.>", "$SRV.>"}},
		Subscribe: &server.SubjectPermission{Allow: []string{"substate.>", "$JS.ACK.>", "_INBOX.>", "$SRV.>"}},
	}
}

// taskPermissions: receive task requests (and service discovery pings, as
// nats.go's micro package answers them), publish nothing but the one reply
// each request asks for.
func taskPermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{}},
		Subscribe: &server.SubjectPermission{Allow: []string{substate.SubjectTasksPrefix + ">", "$SRV.>"}},
		Response:  &server.ResponsePermission{MaxMsgs: 1, Expires: TaskReplyWindow},
	}
}

// subscriberPermissions: core subscriptions to the events and the change
// feed; on their streams, the JetStream API calls that read (stream info,
// direct and message gets, consumer names and lists) and that run
// consumers of its own under the names it was given (create, info,
// delete, pull, ack, flow control); replies in its own inboxes. A consumer
// without a name or under any other name cannot be created, which bounds
// how many a subscriber holds. The worker's consumers are also denied by
// name: a subscriber could otherwise pull or ack the projector's messages,
// or change its filter.
func subscriberPermissions(c Consumers) *server.Permissions {
	pub := []string{"$JS.API.INFO"}
	var deny []string
	for _, s := range SubscriberStreams {
		pub = append(pub,
			"$JS.API.STREAM.INFO."+s, "$JS.API.STREAM.MSG.GET."+s,
			"$JS.API.DIRECT.GET."+s, "$JS.API.DIRECT.GET."+s+".>",
			"$JS.API.CONSUMER.NAMES."+s, "$JS.API.CONSUMER.LIST."+s,
			"$JS.ACK."+s+".>", "$JS.ACK.*.*."+s+".>", "$JS.FC."+s+".>")
		for _, n := range c.subscriber() {
			pub = append(pub,
				"$JS.API.CONSUMER.CREATE."+s+"."+n, "$JS.API.CONSUMER.CREATE."+s+"."+n+".>",
				"$JS.API.CONSUMER.DURABLE.CREATE."+s+"."+n,
				"$JS.API.CONSUMER.INFO."+s+"."+n, "$JS.API.CONSUMER.DELETE."+s+"."+n,
				"$JS.API.CONSUMER.MSG.NEXT."+s+"."+n)
		}
		for _, w := range c.Worker {
			deny = append(deny,
				"$JS.API.CONSUMER.*."+s+"."+w, "$JS.API.CONSUMER.CREATE."+s+"."+w+".>",
				"$JS.API.CONSUMER.DURABLE.CREATE."+s+"."+w, "$JS.API.CONSUMER.MSG.NEXT."+s+"."+w,
				"$JS.ACK."+s+"."+w+".>", "$JS.ACK.*.*."+s+"."+w+".>")
		}
	}
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: pub, Deny: deny},
		Subscribe: &server.SubjectPermission{Allow: []string{
			substate.SubjectEventsPrefix + ">", substate.SubjectChangesPrefix + ">", SubscriberInboxPrefix + ".>"}},
	}
}

func denyAll() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{}},
		Subscribe: &server.SubjectPermission{Allow: []string{}},
	}
}
