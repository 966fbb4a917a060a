//go:build !unix

package httpapi

// fileLimit is unknown outside Unix.
func fileLimit() (uint64, bool) { return 0, false }
