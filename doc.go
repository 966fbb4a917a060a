// Package substate holds the domain of substate: the canonical sub-states of a
// workflow execution, the canonical event that carries them, the per-tenant
// view, the error codes, subject names and the small interfaces that the
// adapter packages implement.
//
// The package imports no NATS, bbolt, HTTP or AWS code, and nothing of this
// repository. Adapters live in folders named after what they adapt
// (mapping, ingress, consumers, publishers, state, engine, and one folder a
// provider under providers/) and import this package; worker composes a
// running substate from them, and cmd/substate holds the commands.
// docs/architecture.md draws the whole graph.
package substate
