// Package substate holds the domain of substate: the canonical sub-states of a
// workflow execution, the canonical event that carries them, the per-tenant
// view, the error codes, subject names and the small interfaces that the
// adapter packages implement.
//
// The package imports no NATS, bbolt, HTTP or AWS code. Adapters live in
// folders named after what they adapt (mapping, consumers, publishers, engine,
// state) and import this package, never each other; only cmd/substate wires
// them together.
package substate
