package publishers

// Steps of a change-feed round a test can fail at.
const (
	StepPublishing = stepPublishing
	StepAcked      = stepAcked
)

// SetFault makes f call fault at each step of a round; an error abandons
// the round there, as a crash would.
func SetFault(f *ChangeFeed, fault func(step string, n int) error) { f.fault = fault }
