// Package cputime reads the CPU time the process has used, for the
// benchmarks and the bench that report CPU per event.
package cputime
