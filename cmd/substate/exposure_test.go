package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/bustest"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/tools/bench"
	"github.com/substatehq/substate/worker"
)

// TestRunRefusesExposedHTTP: on a non-loopback --http-addr, "substate run"
// refuses to start until it has both ingest credentials and read-API
// keys, and says which are missing on one line. A worker given them:
// TestExposedHTTPWithCredentials in worker/e2e.
func TestRunRefusesExposedHTTP(t *testing.T) {
	comments := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(comments, []byte("# no keys yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	readKey := "reader read * sha256:" + workertest.KeyHash("k")
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		notWant string
	}{
		{"Nothing", nil, []string{"--ingest-api-key", "--api-keys-file"}, ""},
		{"IngestOnly", []string{"--ingest-api-key", "i"}, []string{"--api-keys-file or --api-keys"}, "--ingest-api-key"},
		{"ReadOnly", []string{"--api-keys", readKey}, []string{"--ingest-api-key"}, "--api-keys-file"},
		{"EmptyKeyFile", []string{"--ingest-api-key", "i", "--api-keys-file", comments}, []string{"without API keys"}, ""},
		{"BadKeys", []string{"--ingest-api-key", "i", "--api-keys", "reader read *"}, []string{"api keys", "want NAME SCOPES"}, ""},
		{"ProjectorWithoutReadKeys", []string{"--role", "project"}, []string{"--api-keys-file"}, "--ingest-api-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--data-dir", t.TempDir(), "--http-addr", "0.0.0.0:0", "--nats-listen", "127.0.0.1:0"}, tc.args...)
			code, _, errOut := runBinary(t, args...)
			if code != 1 || strings.Count(errOut, "\n") != 1 {
				t.Fatalf("exit %d, want 1 with one line: %s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("error %q does not name %s", errOut, w)
				}
			}
			if tc.notWant != "" && strings.Contains(errOut, tc.notWant) {
				t.Errorf("error %q names %s, which is set", errOut, tc.notWant)
			}
		})
	}
}

// TestRunRefusesExposedNATSWithoutTLS: the embedded server does not listen
// beyond loopback in plain text.
func TestRunRefusesExposedNATSWithoutTLS(t *testing.T) {
	code, _, errOut := runBinary(t, "run", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--nats-listen", "0.0.0.0:0")
	if code != 1 || !strings.Contains(errOut, "without TLS") || !strings.Contains(errOut, "--nats-server-tls-cert") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestRunEmbeddedNATSWithTLS: with its certificate flags the embedded
// server listens beyond loopback; a client needs TLS and its nkey.
func TestRunEmbeddedNATSWithTLS(t *testing.T) {
	p := bustest.NewPKI(t)
	dataDir := t.TempDir()
	_, port, _ := strings.Cut(workertest.FreeAddr(t), ":")
	spawn(t, dataDir, workertest.FreeAddr(t), "0.0.0.0:"+port, "--log-level", "warn",
		"--nats-server-tls-cert", p.Cert, "--nats-server-tls-key", p.Key)
	seed := (bus.Credentials{Dir: worker.NATSCredentialsDir(dataDir)}).SeedFile(bus.Worker)
	key, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("tls://127.0.0.1:"+port, key, nats.RootCAs(p.CA))
	if err != nil {
		t.Fatalf("TLS client with the worker's nkey: %v", err)
	}
	nc.Close()
	if nc, err := nats.Connect("nats://127.0.0.1:"+port, key); err == nil {
		nc.Close()
		t.Fatal("a plain-text client connected")
	}
	if nc, err := nats.Connect("tls://127.0.0.1:"+port, nats.RootCAs(p.CA)); err == nil {
		nc.Close()
		t.Fatal("a TLS client without an nkey connected")
	}
	code, out, errOut := runCLI(t, "events", "tail", "--from-start", "--idle-timeout", "200ms",
		"--nats-url", "tls://127.0.0.1:"+port, "--nats-tls-ca", p.CA, "--data-dir", dataDir)
	if code != 0 {
		t.Fatalf("events tail over TLS: exit %d %s %s", code, out, errOut)
	}
}

// TestRunSaysHowOthersConnect: "substate run" logs where a task service
// and a subscriber find their credentials, and a task service that uses
// them serves a task. Its logs never carry a provider's input: a payload
// with secrets that is dead-lettered is logged by its reason only, and
// the dead letter is listed redacted.
func TestRunSaysHowOthersConnect(t *testing.T) {
	dataDir := t.TempDir()
	natsAddr := workertest.FreeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "run", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0",
		"--nats-listen", natsAddr, "--log-format", "json")
	cmd.Env = append(os.Environ(), "SUBSTATE_TEST_MAIN=1")
	bench.DieWithParent(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	hint := make(chan map[string]any, 1)
	logs := &syncBuffer{}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "nats credentials for other programs" {
				hint <- line
			}
		}
	}()
	var line map[string]any
	select {
	case line = <-hint:
	case <-time.After(30 * time.Second):
		t.Fatal("substate run did not say where the credentials are")
	}
	tasks, _ := line["task_services"].(string)
	subscriber, _ := line["subscribers"].(string)
	if !strings.HasSuffix(tasks, "tasks.nk") || !strings.HasSuffix(subscriber, "subscriber.nk") || line["nats.go"] == nil {
		t.Fatalf("hint %v", line)
	}
	for _, f := range []string{tasks, subscriber} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", f, fi, err)
		}
	}
	key, err := nats.NkeyOptionFromSeed(tasks)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("nats://"+natsAddr, key)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	svc, err := micro.AddService(nc, micro.Config{Name: "payments", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	if err := svc.AddEndpoint("charge", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond([]byte(`{"ok":true}`)) }),
		micro.WithEndpointSubject("substate.tasks.payments.charge")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the endpoint's subscription reached the server
		t.Fatal(err)
	}
	wk, _ := nats.NkeyOptionFromSeed((bus.Credentials{Dir: worker.NATSCredentialsDir(dataDir)}).SeedFile(bus.Worker))
	worker, err := nats.Connect("nats://"+natsAddr, wk)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	msg, err := worker.Request("substate.tasks.payments.charge", []byte(`{}`), 10*time.Second)
	if err != nil || string(msg.Data) != `{"ok":true}` {
		t.Fatalf("task request: %v %v", msg, err)
	}

	httpURL := ""
	workertest.Eventually(t, func() string {
		for _, l := range strings.Split(logs.String(), "\n") {
			var line map[string]any
			if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == "http listening" {
				httpURL, _ = line["url"].(string)
			}
		}
		if httpURL == "" {
			return "no http address logged"
		}
		return ""
	})
	secret := strings.Replace(fmt.Sprintf(workertest.SecretInput, "acme"), `"tenantId"`, `"owner"`, 1) // no tenant: dead-lettered
	body := strings.Replace(string(workertest.Example(t, "stepfunctions-failed.json")),
		`"{\"tenantId\": \"acme\", \"orderId\": \"ord-1\"}"`, strconv.Quote(secret), 1)
	if !strings.Contains(body, "hunter2") {
		t.Fatal("example input changed")
	}
	if code := workertest.Post(t, httpURL+"/v1/ingest/eventbridge", []byte(body), nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	workertest.Eventually(t, func() string {
		if !strings.Contains(logs.String(), "dead-lettered") {
			return "no dead letter logged"
		}
		return ""
	})
	if strings.Contains(logs.String(), "hunter2") || strings.Contains(logs.String(), "sk_live") {
		t.Errorf("the logs carry the input's secrets:\n%s", logs.String())
	}
	code, out, errOut := runCLI(t, "events", "dlq", "--json", "--nats-url", "nats://"+natsAddr, "--data-dir", dataDir)
	if code != 0 || !strings.Contains(out, `"input":"[redacted]"`) || strings.Contains(out, "hunter2") {
		t.Errorf("events dlq --json: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "events", "dlq", "--json", "--unredacted", "--nats-url", "nats://"+natsAddr, "--data-dir", dataDir)
	if code != 0 || !strings.Contains(out, "hunter2") {
		t.Errorf("events dlq --json --unredacted: %d\n%s", code, out)
	}
}
