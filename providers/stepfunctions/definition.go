package stepfunctions

import (
	"encoding/json"
	"fmt"

	"github.com/substatehq/substate"
)

// CheckDefinition checks an Amazon States Language definition before it is
// sent: it must be a JSON object with a StartAt string that names one of its
// States. Step Functions validates the rest when the state machine is
// created. Failures are EINVALID errors.
func CheckDefinition(def []byte) error {
	var asl struct {
		StartAt *string                     `json:"StartAt"`
		States  map[string]*json.RawMessage `json:"States"`
	}
	if err := json.Unmarshal(def, &asl); err != nil {
		return definitionError(err, "not a JSON object")
	}
	switch {
	case asl.StartAt == nil || *asl.StartAt == "":
		return definitionError(nil, "no StartAt")
	case len(asl.States) == 0:
		return definitionError(nil, "no States")
	case asl.States[*asl.StartAt] == nil:
		return definitionError(nil, "StartAt %q names no state", *asl.StartAt)
	}
	return nil
}

// definitionError returns an EINVALID error about a definition.
func definitionError(cause error, format string, args ...any) error {
	return substate.WrapError(substate.EINVALID, cause, "stepfunctions: invalid state machine definition: %s", fmt.Sprintf(format, args...))
}
