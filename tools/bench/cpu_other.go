//go:build !unix

package bench

import "time"

// cpuTime returns 0 where the system has no getrusage: the bench then
// reports no CPU time per event.
func cpuTime() time.Duration { return 0 }
