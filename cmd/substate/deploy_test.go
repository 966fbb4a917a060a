package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/substatehq/substate/testkit/awstest"
)

// ebWrites are the EventBridge operations that change resources.
var ebWrites = []string{"CreateConnection", "UpdateConnection", "CreateApiDestination", "UpdateApiDestination", "PutRule", "PutTargets"}

func writeCount(srv *awstest.Server) int {
	n := 0
	for _, op := range ebWrites {
		n += srv.Calls(op)
	}
	return n
}

// deployArgs returns a "substate deploy eventbridge" command line.
func deployArgs(extra ...string) []string {
	return append([]string{"deploy", "eventbridge", "--endpoint", "https://substate.example.com",
		"--dead-letter-arn", "arn:aws:sqs:us-east-1:123456789012:substate-eventbridge-dlq",
		"--role-arn", "arn:aws:iam::123456789012:role/substate-eventbridge"}, extra...)
}

func TestDeployEventBridgeTwice(t *testing.T) {
	srv := awstest.New(t)
	awstest.Env(t, srv.URL, awstest.Region)
	t.Setenv("SUBSTATE_INGEST_API_KEY", "k-0123456789abcdef")

	code, out, errOut := runCLI(t, deployArgs()...)
	if code != 0 || strings.Count(out, "created") != 4 {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	if c, ok := srv.Connection("substate-ingest"); !ok || c.APIKeyValue != "k-0123456789abcdef" || c.APIKeyName != "X-Api-Key" {
		t.Fatalf("connection = %+v", c)
	}

	srv.ResetCalls()
	code, out, errOut = runCLI(t, deployArgs("--json")...)
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s%s", code, out, errOut)
	}
	if n := writeCount(srv); n != 0 {
		t.Fatalf("second run made %d write calls, want none", n)
	}
	var res deployResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("second run output: %v\n%s", err, out)
	}
	if res.Changed || len(res.Changes) != 4 || res.RuleARN == "" {
		t.Fatalf("second run = %+v, want 4 resources unchanged", res)
	}
	for _, ch := range res.Changes {
		if ch.Action != "unchanged" {
			t.Errorf("%s %s %s, want unchanged", ch.Resource, ch.Name, ch.Action)
		}
	}
	if code, out, _ = runCLI(t, deployArgs()...); code != 0 || strings.Count(out, "unchanged") != 4 || writeCount(srv) != 0 {
		t.Fatalf("third run: exit %d, %d writes\n%s", code, writeCount(srv), out)
	}
}

func TestDeployEventBridgeKeyFromFile(t *testing.T) {
	srv := awstest.New(t)
	awstest.Env(t, srv.URL, awstest.Region)
	file := filepath.Join(t.TempDir(), "ingest-api-key")
	if err := os.WriteFile(file, []byte("k-first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := deployArgs("--api-key-secret", "file:"+file)
	if code, out, errOut := runCLI(t, args...); code != 0 {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	if c, _ := srv.Connection("substate-ingest"); c.APIKeyValue != "k-first" {
		t.Fatalf("key = %q, want the file's line without its newline", c.APIKeyValue)
	}
	if err := os.WriteFile(file, []byte("k-rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.ResetCalls()
	code, out, errOut := runCLI(t, args...)
	if code != 0 || !strings.Contains(out, "updated") || srv.Calls("UpdateConnection") != 1 || writeCount(srv) != 1 {
		t.Fatalf("rotated key: exit %d, %d writes\n%s%s", code, writeCount(srv), out, errOut)
	}
}

func TestDeployEventBridgeRefusesBareKey(t *testing.T) {
	srv := awstest.New(t)
	awstest.Env(t, srv.URL, awstest.Region)
	for _, ref := range []string{"k-0123456789abcdef", "env:SUBSTATE_TEST_UNSET_KEY", "file:" + filepath.Join(t.TempDir(), "missing")} {
		code, out, errOut := runCLI(t, deployArgs("--api-key-secret", ref)...)
		if code != 1 || strings.Contains(errOut, "0123456789abcdef") || srv.TotalCalls() != 0 {
			t.Errorf("--api-key-secret %s: exit %d after %d calls\n%s%s", ref, code, srv.TotalCalls(), out, errOut)
		}
	}
}

func TestDeployHelp(t *testing.T) {
	code, out, _ := runCLI(t, "deploy", "eventbridge", "--help")
	if code != 0 || !strings.Contains(out, "Usage: substate deploy eventbridge") || !strings.Contains(out, "env:SUBSTATE_INGEST_API_KEY") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}
