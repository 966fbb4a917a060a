// Package publishers puts substate's messages on their buses: raw provider
// payloads, canonical events and dead letters on JetStream (each with a
// deterministic Nats-Msg-Id, so a repeated publish has no second effect),
// tenant view changes on the change feed, and canonical events on an Amazon
// EventBridge bus.
package publishers
