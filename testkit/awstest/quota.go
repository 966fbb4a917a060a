package awstest

import (
	"net/http"
	"time"
)

// bucket is one API's token bucket, as Step Functions throttles its APIs
// per account: up to size calls at once, refilled at rate a second.
type bucket struct {
	size   float64
	rate   float64
	tokens float64
	at     time.Time
}

// take takes a token at now, false when the bucket is empty.
func (b *bucket) take(now time.Time) bool {
	if !b.at.IsZero() {
		b.tokens = min(b.size, b.tokens+now.Sub(b.at).Seconds()*b.rate)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Quota throttles op as Step Functions does its API quotas: a token
// bucket of size calls, refilled at rate a second (by the server's Now);
// a call that finds it empty is answered with a ThrottlingException. A
// size of 0 removes the quota.
func (s *Server) Quota(op string, size int, rate float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.quotas == nil {
		s.quotas = map[string]*bucket{}
	}
	if size <= 0 {
		delete(s.quotas, op)
		return
	}
	s.quotas[op] = &bucket{size: float64(size), rate: rate, tokens: float64(size)}
}

// overQuota returns the throttling error of a call of op at now that its
// quota refuses, nil when it has a token (or no quota). Called with s.mu
// held.
func (s *Server) overQuota(op string, now time.Time) *apiError {
	if b := s.quotas[op]; b != nil && !b.take(now) {
		return &apiError{http.StatusBadRequest, "ThrottlingException", "Rate exceeded"}
	}
	return nil
}
