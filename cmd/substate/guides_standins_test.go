package main

// ─────────────────────────────────────────────────────────────────────────
// The local stand-ins of the guides' commands: the one place where what
// README.md and deploy/README.md tell a reader to run differs from what
// TestGuides runs. Every other command runs as written, with these two
// general changes only:
//
//   - "go run ./cmd/substate" and "go run ./examples/alerting" run the
//     built programs (substate, alerting on PATH);
//   - the worker listens on free ports instead of the defaults, so the
//     addresses a guide writes (127.0.0.1:8080, localhost:8080 and :8081,
//     nats://127.0.0.1:4222) are those ports, and a command that relies
//     on the default address is pointed at them by its flag's environment
//     variable (SUBSTATE_SERVER, SUBSTATE_NATS_URL; SUBSTATE_HTTP_ADDR and
//     SUBSTATE_NATS_LISTEN for "substate run").
// ─────────────────────────────────────────────────────────────────────────

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/substatehq/substate/testkit/awstest"
	"github.com/substatehq/substate/testkit/restatetest"
	"github.com/substatehq/substate/testkit/workertest"
)

// standIn says what runs in place of the commands its pattern matches:
// nothing (skip says why), the command after prepare changed it or its
// environment, or instead.
type standIn struct {
	match   *regexp.Regexp
	skip    string
	prepare func(g *guide, text string, env []string) (string, []string)
	instead func(g *guide, c guideCommand)
}

var localStandIns = []standIn{
	// README.md
	{match: re(`^go test \./\.\.\.`), skip: "the test suite, which this test is part of"},
	{match: re(`^make `), skip: "the developer's tasks: tests, linters and benchmarks CI runs"},
	{match: re(`^substate demo\b`), prepare: demoBeside},
	{match: re(`^substate run .*--restate-admin-url http://127\.0\.0\.1:9070`), prepare: withRestate},
	{match: re(`^substate events tail --server https://substate\.example\.com`), prepare: exampleServerIsLocal},

	// deploy/README.md
	{match: re(`^docker (build|push) `), skip: "the container image: this test runs the same code as a binary"},
	{match: re(`^(kubectl create namespace|helm |kubectl -n substate rollout status )`), skip: "NATS and pods in a cluster: the local worker runs its embedded NATS server and is started ready"},
	{match: re(`^kubectl -n substate create secret generic substate-secrets`), instead: secretAsEnvironment},
	{match: re(`^kubectl apply -k deploy/kubernetes`), instead: kubernetesAsWorker},
	{match: re(`^kubectl -n substate port-forward `), skip: "port forwarding: the local worker answers at both forwarded addresses"},
	{match: re(`^kubectl -n substate exec deploy/nats-box `), skip: "the nats CLI of the cluster's nats-box"},
	{match: re(`^kubectl -n substate (scale|delete) `), skip: "scaling pods and deleting volumes of a cluster"},
	{match: re(`^substate deploy eventbridge `), prepare: awsIsLocal},
	{match: re(`^aws cloudformation `), skip: "CloudFormation in an AWS account; the same resources are made by substate deploy eventbridge, run above against the local AWS protocol server"},
	{match: re(`^(go build -o substate |install |systemctl )`), skip: "installing as root under systemd; the worker the unit runs is the one run above"},
	{match: re(`^(cd deploy/prometheus && )?promtool `), prepare: withPromtool},
}

func re(s string) *regexp.Regexp { return regexp.MustCompile(s) }

// withPromtool puts the promtool the alert rules' tests run on PATH.
// Outside CI a machine without one runs nothing in the command's place,
// as TestAlertRules skips there; in CI its absence fails the guide.
func withPromtool(g *guide, text string, env []string) (string, []string) {
	p, ok := findPromtool()
	if !ok {
		if os.Getenv("SUBSTATE_CI") == "1" {
			g.t.Fatal(noPromtool)
		}
		g.t.Logf("%s: not run: %s", text, noPromtool)
		return "true", env
	}
	return text, append(env, "PATH="+filepath.Dir(p)+":"+g.bin+":"+os.Getenv("PATH"))
}

// standInFor returns the stand-in of a command, nil when it runs as
// written.
func standInFor(text string) *standIn {
	for i := range localStandIns {
		if localStandIns[i].match.MatchString(text) {
			return &localStandIns[i]
		}
	}
	return nil
}

// demoBeside runs the demo beside the worker the guide started first: it
// starts a worker of its own, in a directory and on ports of its own (a
// reader would stop the first, or run the demo first).
func demoBeside(g *guide, text string, env []string) (string, []string) {
	if err := os.MkdirAll(filepath.Join(g.dir, "demo"), 0o755); err != nil {
		g.t.Fatal(err)
	}
	return "cd demo && " + text, append(env, "SUBSTATE_HTTP_ADDR="+workertest.FreeAddr(g.t), "SUBSTATE_NATS_LISTEN="+workertest.FreeAddr(g.t))
}

// withRestate starts a real Restate server with the Provision service the
// guide's example names and the invocations its output shows (acme
// failing and retrying, stark paused by its retry policy), and points the
// guide's admin URL at it.
func withRestate(g *guide, text string, env []string) (string, []string) {
	r := startRestate(g)
	r.Gate(g.t, "acme", "fail")
	r.Send(g.t, "Provision", "acme", "flaky", nil, 0)
	r.Send(g.t, "Provision", "stark", "stuck", nil, 0)
	return strings.ReplaceAll(text, "http://127.0.0.1:9070", r.AdminURL), env
}

// startRestate starts a Restate server for the guide, once.
func startRestate(g *guide) *restatetest.Server {
	if g.restate == nil {
		g.restate = restatetest.Start(g.t)
	}
	return g.restate
}

// exampleServerIsLocal points the guide's example worker URL at the local
// worker, started again with a read-API key (the example's worker has
// keys), and gives the command that key as SUBSTATE_API_KEY.
func exampleServerIsLocal(g *guide, text string, env []string) (string, []string) {
	const key = "guide-read-key"
	sum := sha256.Sum256([]byte(key))
	c := guideCommand{where: "the example worker with a read key", text: "substate run"}
	g.startWorker(c, "substate run", append(g.envWith(), "SUBSTATE_API_KEYS=guide read * sha256:"+hex.EncodeToString(sum[:])))
	return strings.ReplaceAll(text, "https://substate.example.com", "http://"+g.http), append(env, "SUBSTATE_API_KEY="+key)
}

// secretAsEnvironment gives the keys the Secret would hold to the workers
// the guide starts next, as the pods' envFrom does.
func secretAsEnvironment(g *guide, c guideCommand) {
	for _, kv := range regexp.MustCompile(`--from-file=(\w+)=(\S+)`).FindAllStringSubmatch(c.text, -1) {
		b, err := os.ReadFile(filepath.Join(g.dir, kv[2]))
		if err != nil {
			g.t.Fatalf("%s: the secret's file: %v", c.where, err)
		}
		g.secrets = append(g.secrets, kv[1]+"="+string(b))
	}
	if len(g.secrets) != 2 {
		g.t.Fatalf("%s: %d secret values, want the ingest key and the read-API keys", c.where, len(g.secrets))
	}
}

// kubernetesAsWorker runs one worker with the ConfigMap's settings and the
// Secret's keys, as each pod has them, but for what only a cluster has
// (its NATS servers and replicas, the pods' interfaces and volume); with
// the Restate poller that the section "Polling Step Functions and Restate
// in a cluster" turns on by uncommenting the ConfigMap's lines, against a
// real Restate server, and no webhook: the guide ends with a check that
// the poller found an invocation by itself.
func kubernetesAsWorker(g *guide, c guideCommand) {
	env := append(g.envWith(), g.secrets...)
	for k, v := range configMap(g.t, filepath.Join(g.dir, "deploy", "kubernetes", "config.yaml")) {
		switch k {
		case "SUBSTATE_NATS_URL", "SUBSTATE_REPLICAS", "SUBSTATE_HTTP_ADDR", "SUBSTATE_METRICS_ADDR", "SUBSTATE_DATA_DIR":
			continue // the cluster's: the local worker runs embedded NATS, on loopback, in the guide's directory
		case "SUBSTATE_RESTATE_ADMIN_URL":
			v = startRestate(g).AdminURL
		}
		env = append(env, k+"="+v)
	}
	r := startRestate(g)
	id := r.Send(g.t, "Provision", "globex", "flaky", map[string]int{"failures": 2}, 0)
	g.startWorker(c, "substate run", env)
	g.finally = append(g.finally, func() { restateFound(g, c, "globex", id) })
}

// restateFound checks that the worker's view holds the tenant of a
// Restate invocation that no webhook reported.
func restateFound(g *guide, c guideCommand, tenant, id string) {
	key, err := os.ReadFile(filepath.Join(g.dir, "read-api-key"))
	if err != nil {
		g.t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		// The tenant's history names the invocation: its view does not once
		// the invocation succeeded (a succeeded view keeps no execution id),
		// which it may have done before the first poll.
		req, _ := http.NewRequest(http.MethodGet, "http://"+g.http+"/v1/tenants/"+tenant+"/history", nil)
		req.Header.Set("Authorization", "Bearer "+string(key))
		resp, err := http.DefaultClient.Do(req)
		var body []byte
		if err == nil {
			body = readAll(resp)
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), id) {
				return
			}
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: the worker with the ConfigMap's Restate settings did not find invocation %s of %s without a webhook: %v %s",
				c.where, id, tenant, err, body)
		}
		time.Sleep(time.Second)
	}
}

// configMap returns the data of deploy/kubernetes/config.yaml, with the
// SUBSTATE_RESTATE_ settings its comments offer uncommented.
func configMap(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	restate := regexp.MustCompile(`(?m)^\s*#\s*(SUBSTATE_RESTATE_[A-Z_]+):\s*(\S+)`)
	for _, m := range restate.FindAllStringSubmatch(string(b), -1) {
		cm.Data[m[1]] = m[2]
	}
	for _, k := range []string{"SUBSTATE_RESTATE_ADMIN_URL", "SUBSTATE_RESTATE_SERVICES"} {
		if cm.Data[k] == "" {
			t.Fatalf("%s offers no %s to turn the Restate poller on with", path, k)
		}
	}
	return cm.Data
}

// awsIsLocal points the AWS SDK at the local AWS protocol server.
func awsIsLocal(g *guide, text string, env []string) (string, []string) {
	srv := awstest.New(g.t)
	awstest.Env(g.t, srv.URL, awstest.Region)
	return text, g.envWith()
}
