package stepfunctions_test

import (
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/stepfunctions"
)

func TestStateMachineARN(t *testing.T) {
	for _, tt := range []struct{ region, partition, want string }{
		{"us-east-1", "aws", "arn:aws:states:us-east-1:123456789012:stateMachine:orders"},
		{"eu-central-2", "aws", "arn:aws:states:eu-central-2:123456789012:stateMachine:orders"},
		{"ap-southeast-5", "aws", "arn:aws:states:ap-southeast-5:123456789012:stateMachine:orders"},
		{"cn-north-1", "aws-cn", "arn:aws-cn:states:cn-north-1:123456789012:stateMachine:orders"},
		{"cn-northwest-1", "aws-cn", "arn:aws-cn:states:cn-northwest-1:123456789012:stateMachine:orders"},
		{"us-gov-west-1", "aws-us-gov", "arn:aws-us-gov:states:us-gov-west-1:123456789012:stateMachine:orders"},
		{"us-gov-east-1", "aws-us-gov", "arn:aws-us-gov:states:us-gov-east-1:123456789012:stateMachine:orders"},
		{"us-iso-east-1", "aws-iso", "arn:aws-iso:states:us-iso-east-1:123456789012:stateMachine:orders"},
		{"us-isob-east-1", "aws-iso-b", "arn:aws-iso-b:states:us-isob-east-1:123456789012:stateMachine:orders"},
	} {
		t.Run(tt.region, func(t *testing.T) {
			if got := stepfunctions.Partition(tt.region); got != tt.partition {
				t.Fatalf("Partition = %s, want %s", got, tt.partition)
			}
			if got := stepfunctions.StateMachineARN(tt.region, "123456789012", "orders"); got != tt.want {
				t.Fatalf("StateMachineARN = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestExecutionARN(t *testing.T) {
	for _, tt := range []struct{ name, machine, want string }{
		{"Plain", "arn:aws:states:us-east-1:123456789012:stateMachine:orders", "arn:aws:states:us-east-1:123456789012:execution:orders:ord-1"},
		{"Version", "arn:aws:states:us-east-1:123456789012:stateMachine:orders:7", "arn:aws:states:us-east-1:123456789012:execution:orders:ord-1"},
		{"Alias", "arn:aws:states:us-east-1:123456789012:stateMachine:orders:prod", "arn:aws:states:us-east-1:123456789012:execution:orders:ord-1"},
		{"China", "arn:aws-cn:states:cn-north-1:123456789012:stateMachine:orders", "arn:aws-cn:states:cn-north-1:123456789012:execution:orders:ord-1"},
		{"GovCloud", "arn:aws-us-gov:states:us-gov-west-1:123456789012:stateMachine:orders", "arn:aws-us-gov:states:us-gov-west-1:123456789012:execution:orders:ord-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stepfunctions.ExecutionARN(tt.machine, "ord-1")
			if err != nil || got != tt.want {
				t.Fatalf("ExecutionARN = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "orders", "arn:aws:lambda:us-east-1:123456789012:function:orders",
		"arn:aws:states:us-east-1:123456789012:execution:orders:ord-1", "arn:aws:states:us-east-1:123456789012:stateMachine:"} {
		if _, err := stepfunctions.ExecutionARN(bad, "ord-1"); substate.ErrorCode(err) != substate.EINVALID {
			t.Errorf("ExecutionARN(%q) err = %v, want EINVALID", bad, err)
		}
	}
}
