// Package state is the tenant view: it applies canonical sub-state events
// to one record per tenant in a bbolt file, with the projection rules, and
// answers queries from indexes by sub-state, error and retry count.
package state
