package stepfunctions

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"golang.org/x/time/rate"

	"github.com/substatehq/substate/internal/timex"
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

// Budget returns a client option (for New) that spends at most qps
// requests a second on Step Functions, retried attempts included, with
// bursts of up to one second's worth: a request waits for its turn. A qps
// of 0 or less means no limit. The account's throttling quotas are shared
// with every other caller, so the budget leaves them room.
func Budget(qps float64) func(*sfn.Options) {
	return BudgetOn(qps, time.Now, timex.Sleep)
}

// BudgetOn is Budget timed by now and sleep instead of the wall clock: a
// test runs the poller with its budget on the clock it runs it on.
func BudgetOn(qps float64, now func() time.Time, sleep func(context.Context, time.Duration) error) func(*sfn.Options) {
	if qps <= 0 || math.IsInf(qps, 1) {
		return func(*sfn.Options) {}
	}
	var mu sync.Mutex
	lim := rate.NewLimiter(rate.Limit(qps), max(int(math.Ceil(qps)), 1))
	mw := middleware.DeserializeMiddlewareFunc("substateBudget", func(
		ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler,
	) (middleware.DeserializeOutput, middleware.Metadata, error) {
		mu.Lock()
		r := lim.ReserveN(now(), 1)
		d := r.DelayFrom(now())
		mu.Unlock()
		if d > 0 {
			if err := sleep(ctx, d); err != nil {
				r.CancelAt(now())
				return middleware.DeserializeOutput{}, middleware.Metadata{}, err
			}
		}
		return next.HandleDeserialize(ctx, in)
	})
	return func(o *sfn.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Deserialize.Add(mw, middleware.After)
		})
	}
}

// captureBody returns a client option that stores the body of a successful
// response in dst while leaving it readable for the SDK's deserializer. The
// middleware runs innermost in the deserialize step, before the operation's
// deserializer reads the body; on a retried call the last attempt wins.
func captureBody(dst *json.RawMessage) func(*sfn.Options) {
	capture := middleware.DeserializeMiddlewareFunc("substateCaptureBody", func(
		ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler,
	) (middleware.DeserializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleDeserialize(ctx, in)
		resp, ok := out.RawResponse.(*smithyhttp.Response)
		if err != nil || !ok || resp.StatusCode/100 != 2 {
			return out, md, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return out, md, err
		}
		*dst = b
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return out, md, nil
	})
	return func(o *sfn.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Deserialize.Add(capture, middleware.After)
		})
	}
}
