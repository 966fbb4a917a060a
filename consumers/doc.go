// Package consumers holds the JetStream stages of the pipeline: the
// normalizer from SUBSTATE_RAW to SUBSTATE_EVENTS, the projector from
// SUBSTATE_EVENTS into the tenant view and the EventBridge forwarder, with
// their ack discipline, their batching pull loop and their metrics.
// Provider events reach SUBSTATE_RAW through the packages beside it:
// ingress (the HTTP ingress: EventBridge API destination,
// Restate webhooks), reconcile (the Reconciler, which asks a
// provider about tenants nothing was heard of for a while) and
// providers/restate (the Restate admin-API poller and operator). Pollers
// never write the view; they publish what a provider answered on
// SUBSTATE_RAW like any provider event (see docs/reconciler.md).
//
// Ack discipline: a message is acknowledged only after its effect is durable
// (the publish it caused was acknowledged, or the view transaction holding it
// committed). Input that can never be processed goes to SUBSTATE_DLQ with its
// reason at once; transient failures are retried with a delay that grows with
// the delivery count and dead-lettered after MaxDeliveries. Each stage binds
// its dead-letter handling once: its name, its dead-letter publisher, its
// retry policy, its metrics and its logger.
package consumers
