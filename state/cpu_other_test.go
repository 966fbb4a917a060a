//go:build !unix

package state_test

import "time"

// cpuTime is 0 where getrusage is not: the benchmarks report no CPU.
func cpuTime() time.Duration { return 0 }
