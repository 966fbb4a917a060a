package mapping

import (
	"strings"
)

// stepEvents is the part of a Step Functions poll that tells the step: the
// history events, with the name of each state entered.
type stepEvents struct {
	History struct {
		Events []stepEvent `json:"events"`
	} `json:"history"`
}

type stepEvent struct {
	ID           int64  `json:"id"`
	Type         string `json:"type"`
	StateEntered *struct {
		Name string `json:"name"`
	} `json:"stateEnteredEventDetails"`
}

// pollStep returns the step of a Step Functions poll: the name of the
// newest *StateEntered event in its history (events in either order), or
// "" when the poll read no history or none entered a state. It reads the
// body on its own, apart from the history analysis.
func pollStep(body []byte) string {
	var p stepEvents
	if decode(body, &p) != nil {
		return ""
	}
	var newest *stepEvent
	for i := range p.History.Events {
		e := &p.History.Events[i]
		if e.StateEntered == nil || !strings.HasSuffix(e.Type, "StateEntered") || e.StateEntered.Name == "" {
			continue
		}
		if newest == nil || e.ID > newest.ID {
			newest = e
		}
	}
	if newest == nil {
		return ""
	}
	return newest.StateEntered.Name
}
