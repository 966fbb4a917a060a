package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/testkit/workertest"
	"github.com/substatehq/substate/tools/bench"
	"github.com/substatehq/substate/worker"
)

// natsNode is one nats-server of a three-node JetStream cluster, run in a
// child process (this test binary in its nats-server mode, see
// runNATSNode) so it can be killed with SIGKILL.
type natsNode struct {
	name, client, route, store string
	routes                     []string
	cmd                        *exec.Cmd
}

// runNATSNode is the child-process side of natsNode: a clustered
// nats-server configured from the environment, until it is killed.
func runNATSNode() {
	port, _ := strconv.Atoi(os.Getenv("NODE_PORT"))
	cport, _ := strconv.Atoi(os.Getenv("NODE_CLUSTER_PORT"))
	opts := &server.Options{
		ServerName: os.Getenv("NODE_NAME"), Host: "127.0.0.1", Port: port, JetStream: true,
		StoreDir: os.Getenv("NODE_STORE"), NoSigs: true, MaxPayload: 2 << 20,
		Cluster: server.ClusterOpts{Name: "substate-test", Host: "127.0.0.1", Port: cport},
		Routes:  server.RoutesFromStr(os.Getenv("NODE_ROUTES")),
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv.Start()
	srv.WaitForShutdown()
}

func (n *natsNode) start(tb testing.TB) {
	tb.Helper()
	_, port, _ := strings.Cut(n.client, ":")
	_, cport, _ := strings.Cut(n.route, ":")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SUBSTATE_TEST_NATS=1", "NODE_NAME="+n.name, "NODE_PORT="+port,
		"NODE_CLUSTER_PORT="+cport, "NODE_STORE="+n.store, "NODE_ROUTES="+strings.Join(n.routes, ","))
	bench.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	n.cmd = cmd
}

func (n *natsNode) kill() {
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}

// startCluster starts three clustered nats-servers and waits until
// JetStream has a meta leader.
func startCluster(tb testing.TB) ([]*natsNode, string) {
	tb.Helper()
	nodes := make([]*natsNode, 3)
	var routes, urls []string
	for i := range nodes {
		nodes[i] = &natsNode{name: fmt.Sprintf("n%d", i+1), client: workertest.FreeAddr(tb), route: workertest.FreeAddr(tb), store: tb.TempDir()}
		routes = append(routes, "nats://"+nodes[i].route)
		urls = append(urls, "nats://"+nodes[i].client)
	}
	for _, n := range nodes {
		n.routes = routes
		n.start(tb)
		tb.Cleanup(n.kill)
	}
	url := strings.Join(urls, ",")
	workertest.Eventually(tb, func() string {
		b, err := bus.Open(bus.Config{URL: url})
		if err != nil {
			return err.Error()
		}
		defer b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := b.JetStream.AccountInfo(ctx); err != nil {
			return "jetstream cluster not ready: " + err.Error()
		}
		return ""
	})
	return nodes, url
}

// clusterWorker is a worker process on the cluster with its own view.
type clusterWorker struct {
	dir, http, instance string
	p                   *process
}

func (w *clusterWorker) start(tb testing.TB, natsURL string) {
	w.p = startProcess(tb, w.dir, w.http, "", "--nats-url", natsURL, "--replicas", "3", "--instance", w.instance, "--ack-wait", "3s")
}

// TestCluster runs two workers on a three-node JetStream cluster with
// three replicas, kills the NATS node leading SUBSTATE_RAW and a worker
// during a steady stream of new events, restarts them, and checks that both
// views equal the reference fold, that every acknowledged event reached
// both streams, and that each tenant shows its newest stored status.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS cluster and worker processes")
	}
	nodes, url := startCluster(t)
	workers := []*clusterWorker{
		{dir: t.TempDir(), http: workertest.FreeAddr(t), instance: "w1"},
		{dir: t.TempDir(), http: workertest.FreeAddr(t), instance: "w2"},
	}
	for _, w := range workers {
		w.start(t, url)
	}
	var acked sync.Map // webhook ids answered with 202
	var sent atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); steadyStream(ctx, workers, &acked, &sent) }()

	waitSent(t, &sent, 100)
	leader := rawLeader(t, url, nodes)
	leader.kill() // the node the ingress writes through dies mid-stream
	waitSent(t, &sent, 250)
	leader.start(t)
	waitSent(t, &sent, 400)
	workers[1].p.kill(t) // a worker dies mid-batch
	waitSent(t, &sent, 550)
	workers[1].start(t, url)
	waitSent(t, &sent, 700)
	stop()
	<-done

	for _, w := range workers {
		waitSettledOn(t, url, bus.ProjectorConsumer(w.instance))
	}
	for _, w := range workers {
		w.p.terminate(t)
	}
	if n := sent.Load(); n < 700 {
		t.Fatalf("only %d events sent", n)
	}
	checkAcked(t, url, &acked)
	checkReplicas(t, url)
	want := referenceFoldURL(t, url)
	checkNewest(t, url, want)
	for _, w := range workers {
		live := readView(t, filepath.Join(w.dir, worker.ViewFile(w.instance)))
		if len(live) != len(want) {
			t.Errorf("%s: %d tenants, reference has %d", w.instance, len(live), len(want))
		}
		for id, v := range want {
			got := live[id]
			got.UpdatedAt, v.UpdatedAt = time.Time{}, time.Time{}
			if got != v {
				t.Errorf("%s tenant %s:\n live %+v\n want %+v", w.instance, id, got, v)
			}
		}
	}
}

// steadyStream posts Restate rows, alternating between the workers, until
// ctx is done. Every row is a new event: send i is round i/30 of tenant
// i%30, with its own webhook id and a later modified_at, so the stream keeps
// changing views through every failure. A row a worker does not acknowledge
// is posted again, with the same id, to the other one, as a load balancer
// would.
func steadyStream(ctx context.Context, workers []*clusterWorker, acked *sync.Map, sent *atomic.Int64) {
	for i := 0; ctx.Err() == nil; i++ {
		id, body := clusterRow(i)
		for try := 0; ctx.Err() == nil; try++ {
			w := workers[(i+try)%len(workers)]
			if workertest.DeliverRow("http://"+w.http, id, body) == nil {
				acked.Store(id, true)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		sent.Add(1)
		time.Sleep(2 * time.Millisecond)
	}
}

// clusterBase is the modified_at of the first row of the cluster test.
var clusterBase = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// clusterRow returns the webhook id and the body of send i: tenant i%30 in
// round i/30, running in even rounds and backing off in odd ones, so the
// view counts a retry at every backing-off → running transition.
func clusterRow(i int) (id string, body []byte) {
	tenant, round := fmt.Sprintf("t%02d", i%30), i/30
	row := map[string]any{"id": "inv_" + tenant, "target_service_key": tenant, "status": "running",
		"created_at":  clusterBase.Format(time.RFC3339Nano),
		"modified_at": clusterBase.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)}
	if round%2 == 1 {
		row["status"], row["last_failure"] = "backing-off", fmt.Sprintf("[503] round %d failed", round)
	}
	body, _ = json.Marshal(row)
	return fmt.Sprintf("%s-%d", tenant, i), body
}

// rawLeader returns the node that leads SUBSTATE_RAW.
func rawLeader(tb testing.TB, url string, nodes []*natsNode) *natsNode {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	s, err := b.JetStream.Stream(context.Background(), substate.StreamRaw)
	if err != nil {
		tb.Fatal(err)
	}
	if c := s.CachedInfo().Cluster; c != nil {
		for _, n := range nodes {
			if n.name == c.Leader {
				return n
			}
		}
	}
	tb.Fatalf("%s has no leader among the nodes: %+v", substate.StreamRaw, s.CachedInfo().Cluster)
	return nil
}

func waitSent(tb testing.TB, sent *atomic.Int64, n int64) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for sent.Load() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("only %d of %d events delivered", sent.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitSettledOn(tb testing.TB, url, projector string) {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		// The cluster may still be electing leaders after the node restart:
		// an API error is retried like a pending message.
		msg := unsettled(b, substate.StreamRaw, bus.ConsumerNormalizer) + unsettled(b, substate.StreamEvents, projector)
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not settled: %s", msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unsettled describes what a consumer still has to do, "" when nothing.
func unsettled(b *bus.Bus, stream, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := b.JetStream.Consumer(ctx, stream, name)
	if err != nil {
		return fmt.Sprintf("%s: %v; ", name, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Sprintf("%s: %v; ", name, err)
	}
	if info.NumPending+uint64(info.NumAckPending) > 0 {
		return fmt.Sprintf("%s: %d pending, %d unacked; ", name, info.NumPending, info.NumAckPending)
	}
	return ""
}

// checkAcked checks that every acknowledged delivery is in SUBSTATE_RAW and
// was normalized into SUBSTATE_EVENTS (whose messages name their raw event
// in the Substate-Raw-Id header).
func checkAcked(tb testing.TB, url string, acked *sync.Map) {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	raw, events := map[string]bool{}, map[string]bool{}
	for _, m := range allMsgs(tb, b, substate.StreamRaw) {
		raw[m.Header.Get(substate.HeaderMsgID)] = true
	}
	for _, m := range allMsgs(tb, b, substate.StreamEvents) {
		events[m.Header.Get(substate.HeaderRawID)] = true
	}
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if id := k.(string); !raw[id] {
			tb.Errorf("acknowledged delivery %s is not in %s", id, substate.StreamRaw)
		} else if !events[id] {
			tb.Errorf("acknowledged delivery %s has no event in %s", id, substate.StreamEvents)
		}
		return true
	})
	if n == 0 {
		tb.Error("no delivery was acknowledged")
	}
}

// checkNewest checks the reference fold against the raw evidence: every
// tenant shows the status of its newest row stored in SUBSTATE_RAW.
func checkNewest(tb testing.TB, url string, fold map[string]substate.TenantView) {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	type row struct {
		Key        string    `json:"target_service_key"`
		Status     string    `json:"status"`
		ModifiedAt time.Time `json:"modified_at"`
	}
	newest := map[string]row{}
	for _, m := range allMsgs(tb, b, substate.StreamRaw) {
		var r row
		if err := json.Unmarshal(m.Data, &r); err != nil {
			tb.Fatal(err)
		}
		if r.ModifiedAt.After(newest[r.Key].ModifiedAt) {
			newest[r.Key] = r
		}
	}
	if len(newest) != 30 || len(fold) != 30 {
		tb.Errorf("%d tenants in %s, %d in the fold, want 30", len(newest), substate.StreamRaw, len(fold))
	}
	for tenant, r := range newest {
		if got := string(fold[tenant].WorkflowSubState); got != r.Status {
			tb.Errorf("tenant %s is %s, its newest row says %s", tenant, got, r.Status)
		}
	}
}

// checkReplicas checks that every stream has three replicas on the cluster.
func checkReplicas(tb testing.TB, url string) {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	for _, name := range []string{substate.StreamRaw, substate.StreamEvents, substate.StreamDLQ} {
		s, err := b.JetStream.Stream(context.Background(), name)
		if err != nil {
			tb.Fatal(err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			tb.Errorf("stream %s: %d replicas configured, cluster %+v", name, info.Config.Replicas, info.Cluster)
		}
	}
}
