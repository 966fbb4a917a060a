package stepfunctions

import (
	"strings"
	"unicode"

	"github.com/substatehq/substate"
)

// Partition returns the AWS partition of a region: aws-cn for the China
// regions (cn-*), aws-us-gov for GovCloud (us-gov-*), the isolated
// partitions for their regions, and aws for every other region.
func Partition(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	case strings.HasPrefix(region, "us-isob-"):
		return "aws-iso-b"
	case strings.HasPrefix(region, "us-isof-"):
		return "aws-iso-f"
	case strings.HasPrefix(region, "us-iso-"):
		return "aws-iso"
	case strings.HasPrefix(region, "eu-isoe-"):
		return "aws-iso-e"
	}
	return "aws"
}

// StateMachineARN returns the ARN of the state machine name in the region
// and account, in the region's partition.
func StateMachineARN(region, accountID, name string) string {
	return "arn:" + Partition(region) + ":states:" + region + ":" + accountID + ":stateMachine:" + name
}

// ExecutionARN returns the ARN of the execution name of a state machine.
// A version or alias ARN of the state machine gives the same execution ARN
// as the state machine's own ARN. It is an EINVALID error when machineARN is
// not a state machine ARN.
func ExecutionARN(machineARN, name string) (string, error) {
	parts := strings.Split(machineARN, ":")
	if len(parts) < 7 || len(parts) > 8 || parts[0] != "arn" || parts[2] != "states" || parts[5] != "stateMachine" || parts[6] == "" {
		return "", substate.Errorf(substate.EINVALID, "stepfunctions: %q is not a state machine arn", machineARN)
	}
	return strings.Join(parts[:5], ":") + ":execution:" + parts[6] + ":" + name, nil
}

// accountOf returns the account id field of an ARN.
func accountOf(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) < 6 {
		return ""
	}
	return parts[4]
}

// checkName applies Step Functions' naming rules to a state machine or
// execution name: 1 to 80 characters and none of white space, brackets,
// wildcards, the special characters "#%\^|~`$&,;:/ or control codes. The
// provider checks them itself because it builds ARNs from names.
func checkName(kind, name string) error {
	if name == "" || len([]rune(name)) > 80 {
		return substate.Errorf(substate.EINVALID, "stepfunctions: %s name %q must have 1 to 80 characters", kind, name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("<>{}[]?*\"#%\\^|~`$&,;:/", r) {
			return substate.Errorf(substate.EINVALID, "stepfunctions: %s name %q contains %q", kind, name, r)
		}
	}
	return nil
}
