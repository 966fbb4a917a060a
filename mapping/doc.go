// Package mapping turns provider payloads into canonical sub-state events.
//
// It decodes AWS Step Functions status changes (EventBridge events and the
// reconciler's DescribeExecution polls with their history), Restate
// sys_invocation rows and the built-in engine's status events, maps each
// native state to a sub-state, verb and legacy status through the tables in
// table.go, and resolves the tenant of the execution with configurable
// rules. It is pure: no network, disk or bus; logs go to an injected
// *slog.Logger.
//
// docs/state-mapping.md is generated from the tables by go generate.
package mapping

//go:generate go run ./internal/gendoc -o ../docs/state-mapping.md
