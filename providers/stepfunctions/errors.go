package stepfunctions

import (
	"context"
	"errors"
	"fmt"
	"net"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/substatehq/substate"
)

// apiCodes maps Step Functions error codes to substate error codes.
var apiCodes = map[string]string{
	"ExecutionDoesNotExist":    substate.ENOTFOUND,
	"StateMachineDoesNotExist": substate.ENOTFOUND,
	"ActivityDoesNotExist":     substate.ENOTFOUND,
	"ResourceNotFound":         substate.ENOTFOUND,

	"InvalidDefinition":              substate.EINVALID,
	"InvalidArn":                     substate.EINVALID,
	"InvalidExecutionInput":          substate.EINVALID,
	"InvalidName":                    substate.EINVALID,
	"InvalidOutput":                  substate.EINVALID,
	"InvalidToken":                   substate.EINVALID,
	"InvalidLoggingConfiguration":    substate.EINVALID,
	"InvalidTracingConfiguration":    substate.EINVALID,
	"InvalidEncryptionConfiguration": substate.EINVALID,
	"MissingRequiredParameter":       substate.EINVALID,
	"StateMachineTypeNotSupported":   substate.EINVALID,
	"ValidationException":            substate.EINVALID,

	// Step Functions raises StateMachineAlreadyExists only when the
	// definition differs: creating the same one again is idempotent.
	"ExecutionAlreadyExists":    substate.EEXISTS,
	"StateMachineAlreadyExists": substate.ECONFLICT,
	"ConflictException":         substate.ECONFLICT,
	"StateMachineDeleting":      substate.ECONFLICT,
	"ExecutionNotRedrivable":    substate.ECONFLICT,
	// The account holds as many state machines (activities) as its quota
	// allows: creating one more waits for a deletion or a quota raise.
	"StateMachineLimitExceeded": substate.ECONFLICT,
	"ActivityLimitExceeded":     substate.ECONFLICT,

	"ThrottlingException":      substate.ETHROTTLED,
	"Throttling":               substate.ETHROTTLED,
	"TooManyRequestsException": substate.ETHROTTLED,
	"KmsThrottlingException":   substate.ETHROTTLED,
	"ExecutionLimitExceeded":   substate.ETHROTTLED,

	"AccessDeniedException":       substate.EUNAUTHORIZED,
	"UnrecognizedClientException": substate.EUNAUTHORIZED,
	"InvalidSignatureException":   substate.EUNAUTHORIZED,
	"ExpiredTokenException":       substate.EUNAUTHORIZED,
	"KmsAccessDeniedException":    substate.EUNAUTHORIZED,
}

// ErrorCode returns the substate error code of an AWS SDK error ("" for
// nil): the code
// of a known Step Functions error, EUNAVAILABLE for a 5xx answer or a
// request that could not be sent (after the SDK's own retries), EINVALID
// for parameters the SDK rejected before sending, and EINTERNAL otherwise.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		if c, ok := apiCodes[api.ErrorCode()]; ok {
			return c
		}
	}
	var resp *awshttp.ResponseError
	var send *smithyhttp.RequestSendError
	var netErr net.Error
	var params smithy.InvalidParamsError
	switch {
	case errors.As(err, &resp) && resp.HTTPStatusCode() >= 500,
		errors.As(err, &send), errors.As(err, &netErr):
		return substate.EUNAVAILABLE
	case api != nil && api.ErrorFault() == smithy.FaultServer:
		return substate.EUNAVAILABLE
	case errors.As(err, &params):
		return substate.EINVALID
	}
	return substate.EINTERNAL
}

// wrap turns an SDK error of the operation op into a *substate.Error whose
// message names the operation ("stepfunctions: describe execution") and
// whose cause is the SDK error. A cancelled or expired context is returned
// wrapped but without a code, so callers see the context error.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stepfunctions: %s: %w", op, err)
	}
	return substate.WrapError(ErrorCode(err), err, "stepfunctions: %s", op)
}
