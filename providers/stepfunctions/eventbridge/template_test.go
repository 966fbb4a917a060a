package eventbridge_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/providers/stepfunctions/eventbridge"
)

// node returns the node at the mapping keys path below n, or fails.
func node(t *testing.T, n *yaml.Node, path ...string) *yaml.Node {
	t.Helper()
	if n.Kind == yaml.DocumentNode {
		n = n.Content[0]
	}
	for _, key := range path {
		var next *yaml.Node
		if n.Kind == yaml.SequenceNode {
			i, err := strconv.Atoi(key)
			if err != nil || i >= len(n.Content) {
				t.Fatalf("no item %s in %v", key, path)
			}
			next = n.Content[i]
		}
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			t.Fatalf("template has no %s", strings.Join(path, "."))
		}
		n = next
	}
	return n
}

// TestTemplate checks that the CloudFormation template builds what Setup
// builds: same header, path, names, pattern, retry policy and dead letters.
func TestTemplate(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/cloudformation/eventbridge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	res := node(t, &doc, "Resources")
	for _, tt := range []struct {
		path []string
		want string
	}{
		{[]string{"Connection", "Properties", "AuthorizationType"}, "API_KEY"},
		{[]string{"Connection", "Properties", "AuthParameters", "ApiKeyAuthParameters", "ApiKeyName"}, substate.HeaderAPIKey},
		{[]string{"Connection", "Properties", "Name"}, "${NamePrefix}-ingest"},
		{[]string{"ApiDestination", "Properties", "Name"}, "${NamePrefix}-ingest"},
		{[]string{"ApiDestination", "Properties", "HttpMethod"}, "POST"},
		{[]string{"ApiDestination", "Properties", "InvocationEndpoint"}, "${Endpoint}" + eventbridge.IngestPath},
		{[]string{"Rule", "Properties", "Name"}, "${NamePrefix}-stepfunctions-status"},
		{[]string{"Rule", "Properties", "State"}, "ENABLED"},
		{[]string{"Rule", "Properties", "Targets", "0", "Id"}, eventbridge.TargetID},
		{[]string{"Rule", "Properties", "Targets", "0", "RetryPolicy", "MaximumEventAgeInSeconds"}, strconv.Itoa(eventbridge.DefaultMaximumEventAgeSeconds)},
		{[]string{"Rule", "Properties", "Targets", "0", "DeadLetterConfig", "Arn"}, "DeadLetterQueue.Arn"},
		{[]string{"Rule", "Properties", "Targets", "0", "RoleArn"}, "InvokeRole.Arn"},
		{[]string{"InvokeRole", "Properties", "Policies", "0", "PolicyDocument", "Statement", "0", "Action"}, "events:InvokeApiDestination"},
	} {
		if got := node(t, res, tt.path...).Value; got != tt.want {
			t.Errorf("%s = %q, want %q", strings.Join(tt.path, "."), got, tt.want)
		}
	}
	if got, want := node(t, &doc, "Parameters", "MaximumRetryAttempts", "Default").Value, strconv.Itoa(eventbridge.DefaultMaximumRetryAttempts); got != want {
		t.Errorf("MaximumRetryAttempts default = %s, want %s", got, want)
	}
	if node(t, &doc, "Parameters", "ApiKey", "NoEcho").Value != "true" {
		t.Error("the ApiKey parameter is not NoEcho")
	}
	var pattern any
	if err := node(t, res, "Rule", "Properties", "EventPattern").Decode(&pattern); err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal([]byte(eventbridge.EventPattern), &want); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(pattern); !reflect.DeepEqual(jsonValue(t, got), want) {
		t.Errorf("event pattern = %s, want %s", got, eventbridge.EventPattern)
	}
}

func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
