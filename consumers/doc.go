// Package consumers receives provider status changes and moves them through
// the pipeline: the HTTP ingress (EventBridge API destination, Restate
// webhooks), the JetStream consumers (the normalizer from SUBSTATE_RAW to
// SUBSTATE_EVENTS, the projector from SUBSTATE_EVENTS into the tenant view,
// the EventBridge forwarder) with their ack discipline, and the pollers: the
// Reconciler, which asks a provider about tenants nothing was heard of for a
// while, and the RestatePoller, which reads Restate's admin API. Pollers
// never write the view; they publish what a provider answered on
// SUBSTATE_RAW like any provider event (see docs/reconciler.md).
//
// Ack discipline: a message is acknowledged only after its effect is durable
// (the publish it caused was acknowledged, or the view transaction holding it
// committed). Input that can never be processed goes to SUBSTATE_DLQ with its
// reason at once; transient failures are retried with a delay that grows with
// the delivery count and dead-lettered after MaxDeliveries.
package consumers
