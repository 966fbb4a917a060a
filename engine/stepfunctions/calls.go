package stepfunctions

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/middleware"
)

// CountCalls returns a client option (for New) that calls count with the
// operation name ("DescribeExecution", "GetExecutionHistory", …) once per
// request sent to Step Functions, retried attempts included: the number
// that costs money and counts against the account's throttling quotas.
func CountCalls(count func(operation string)) func(*sfn.Options) {
	mw := middleware.DeserializeMiddlewareFunc("substateCountCalls", func(
		ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler,
	) (middleware.DeserializeOutput, middleware.Metadata, error) {
		count(middleware.GetOperationName(ctx))
		return next.HandleDeserialize(ctx, in)
	})
	return func(o *sfn.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Deserialize.Add(mw, middleware.After)
		})
	}
}
