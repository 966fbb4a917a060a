package stepfunctions_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
)

// TestPollKeepsTraceHeader: an execution started with an X-Ray trace
// header is polled with it. DescribeExecution's traceHeader stays in the
// raw poll payload, where the normalizer's span finds the X-Ray trace to
// link to (docs/tracing.md).
func TestPollKeepsTraceHeader(t *testing.T) {
	ctx := context.Background()
	srv, p := newProvider(t)
	machine := ensure(t, p)
	const header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	out, err := sfn.NewFromConfig(srv.Config()).StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(machine), Name: aws.String("traced"), Input: aws.String(`{"tenantId":"acme"}`),
		TraceHeader: aws.String(header),
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := p.Poll(ctx, *out.ExecutionArn, true)
	if err != nil {
		t.Fatal(err)
	}
	if x, _ := decodePayload(t, raw); x["traceHeader"] != header {
		t.Errorf("poll payload's execution traceHeader = %v, want %q", x["traceHeader"], header)
	}
}
