package httpapi

import (
	"net/http"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/httpx"
)

// ViewPosition is the answer of GET /v1/view/checkpoint: how far into
// SUBSTATE_EVENTS the tenant view is.
type ViewPosition struct {
	// Checkpoint is the last stream sequence whose effects are committed.
	Checkpoint uint64 `json:"checkpoint"`
	// Applied is the last sequence the view reflects, Checkpoint or later
	// (events that changed nothing are committed with the next change); a
	// replay up to Applied must equal the view.
	Applied uint64 `json:"applied"`
}

// PositionedView is a tenant view that knows both its positions.
type PositionedView interface {
	substate.ViewStore
	Applied() uint64
}

// checkpoint serves GET /v1/view/checkpoint from s.Checkpoint.
func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	applied := s.Checkpoint.Applied() // first: the checkpoint never passes it
	cp, err := s.Checkpoint.Checkpoint(r.Context())
	if err != nil {
		httpx.Error(w, r, err, s.logger())
		return
	}
	httpx.JSON(w, http.StatusOK, ViewPosition{Checkpoint: cp, Applied: max(applied, cp)})
}
