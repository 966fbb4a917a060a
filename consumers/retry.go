package consumers

import "time"

// Retry is the redelivery policy for transient failures: a message is handed
// back with a delay of Base × 2^(deliveries-1), capped at Max, and
// dead-lettered once it has been delivered MaxDeliveries times.
type Retry struct {
	Base          time.Duration // 0 means 1 s
	Max           time.Duration // 0 means 1 min
	MaxDeliveries int           // 0 means 10
}

// Delay returns the redelivery delay after the given number of deliveries.
func (r Retry) Delay(deliveries uint64) time.Duration {
	base, limit := r.Base, r.Max
	if base <= 0 {
		base = time.Second
	}
	if limit <= 0 {
		limit = time.Minute
	}
	d := base
	for i := uint64(1); i < deliveries && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

func (r Retry) maxDeliveries() uint64 {
	if r.MaxDeliveries <= 0 {
		return 10
	}
	return uint64(r.MaxDeliveries)
}
