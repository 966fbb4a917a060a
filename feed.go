package substate

import "context"

// ChangePublisher publishes real changes of tenant views on the change feed
// (substate.changes.<tenant>) after the transaction that made them committed.
type ChangePublisher interface {
	PublishChanges(ctx context.Context, changes []Change) error
}
