package main

import (
	"context"
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
	dieWithParent(cmd)
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
		nodes[i] = &natsNode{name: fmt.Sprintf("n%d", i+1), client: freePort(tb), route: freePort(tb), store: tb.TempDir()}
		routes = append(routes, "nats://"+nodes[i].route)
		urls = append(urls, "nats://"+nodes[i].client)
	}
	for _, n := range nodes {
		n.routes = routes
		n.start(tb)
		tb.Cleanup(n.kill)
	}
	url := strings.Join(urls, ",")
	eventually(tb, func() string {
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
// three replicas, kills a NATS node and a worker during a steady stream of
// events, restarts them, and checks that both views equal the reference
// fold and that every acknowledged event is in the streams.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS cluster and worker processes")
	}
	nodes, url := startCluster(t)
	workers := []*clusterWorker{
		{dir: t.TempDir(), http: freePort(t), instance: "w1"},
		{dir: t.TempDir(), http: freePort(t), instance: "w2"},
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
	nodes[1].kill() // a NATS node dies mid-stream
	waitSent(t, &sent, 250)
	nodes[1].start(t)
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
	checkAcked(t, url, &acked)
	checkReplicas(t, url)
	want := referenceFoldURL(t, url)
	for _, w := range workers {
		live := readView(t, filepath.Join(w.dir, viewFile(w.instance)))
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
// ctx is done; a row a worker does not acknowledge is posted again to the
// other one, as a load balancer would.
func steadyStream(ctx context.Context, workers []*clusterWorker, acked *sync.Map, sent *atomic.Int64) {
	for i := 0; ctx.Err() == nil; i++ {
		tenant, step := fmt.Sprintf("t%02d", i%30), (i/30)%6
		for try := 0; ctx.Err() == nil; try++ {
			w := workers[(i+try)%len(workers)]
			if deliver("http://"+w.http, tenant, step) == nil {
				acked.Store(fmt.Sprintf("%s-%d", tenant, step), true)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		sent.Add(1)
		time.Sleep(2 * time.Millisecond)
	}
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

// checkAcked checks that every acknowledged delivery is in SUBSTATE_RAW.
func checkAcked(tb testing.TB, url string, acked *sync.Map) {
	tb.Helper()
	b, err := bus.Open(bus.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	stored := map[string]bool{}
	for _, m := range allMsgs(tb, b, substate.StreamRaw) {
		stored[m.Header.Get(substate.HeaderMsgID)] = true
	}
	acked.Range(func(k, _ any) bool {
		if !stored[k.(string)] {
			tb.Errorf("acknowledged delivery %s is not in %s", k, substate.StreamRaw)
		}
		return true
	})
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
