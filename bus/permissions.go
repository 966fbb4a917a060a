package bus

import (
	"slices"
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

// Permissions returns what an identity may publish and subscribe to.
// workerConsumers are the durable consumers subscribers must not touch
// (WorkerConsumers).
func Permissions(id Identity, workerConsumers []string) *server.Permissions {
	switch id {
	case Worker:
		return workerPermissions()
	case Tasks:
		return taskPermissions()
	case Subscriber:
		return subscriberPermissions(workerConsumers)
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
// direct and message gets) and that run consumers of its own (create,
// info, delete, pull, ack, flow control); replies in its own inboxes. The
// worker's consumers are denied by name: a subscriber could otherwise pull
// or ack the projector's messages, or change its filter.
func subscriberPermissions(workerConsumers []string) *server.Permissions {
	pub := []string{"$JS.API.INFO"}
	var deny []string
	for _, s := range SubscriberStreams {
		pub = append(pub,
			"$JS.API.STREAM.INFO."+s, "$JS.API.STREAM.MSG.GET."+s,
			"$JS.API.DIRECT.GET."+s, "$JS.API.DIRECT.GET."+s+".>",
			"$JS.API.CONSUMER.CREATE."+s+".>", "$JS.API.CONSUMER.DURABLE.CREATE."+s+".*",
			"$JS.API.CONSUMER.INFO."+s+".*", "$JS.API.CONSUMER.DELETE."+s+".*",
			"$JS.API.CONSUMER.NAMES."+s, "$JS.API.CONSUMER.LIST."+s,
			"$JS.API.CONSUMER.MSG.NEXT."+s+".*",
			"$JS.ACK."+s+".>", "$JS.ACK.*.*."+s+".>", "$JS.FC."+s+".>")
		for _, c := range workerConsumers {
			deny = append(deny,
				"$JS.API.CONSUMER.*."+s+"."+c, "$JS.API.CONSUMER.CREATE."+s+"."+c+".>",
				"$JS.API.CONSUMER.DURABLE.CREATE."+s+"."+c, "$JS.API.CONSUMER.MSG.NEXT."+s+"."+c,
				"$JS.ACK."+s+"."+c+".>", "$JS.ACK.*.*."+s+"."+c+".>")
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
