// Package ingress receives provider status changes over HTTP and puts them
// on SUBSTATE_RAW: the EventBridge API destination route
// (POST /v1/ingest/eventbridge, X-Api-Key) and the Restate webhook route
// (POST /v1/ingest/restate, verified with Standard Webhooks signatures).
// A request is answered 202 only after JetStream acknowledged every raw
// event of it; an authenticated request refused as malformed leaves its
// body on SUBSTATE_DLQ as evidence; admission control answers 429 while
// the raw backlog or the publishes in flight pass their bounds.
package ingress
