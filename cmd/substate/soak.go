package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/internal/bench"
	"github.com/substatehq/substate/worker"
)

// SoakCmd is "substate soak": kill -9 under load, again and again, then
// check that nothing acknowledged was lost.
type SoakCmd struct {
	Cycles   int           `default:"200" help:"How many times the worker is killed with SIGKILL under load and started again."`
	Tenants  int           `default:"200" help:"Tenants the load spreads over; each tenant's events are posted in order, one after the other is acknowledged."`
	Clients  int           `default:"16" help:"Concurrent HTTP clients posting events, as providers retrying on any answer but 202."`
	MinUp    time.Duration `default:"300ms" help:"Shortest time the worker runs under load before it is killed."`
	MaxUp    time.Duration `default:"2s" help:"Longest time the worker runs under load before it is killed."`
	DataDir  string        `help:"Data directory of the worker (default: a new temporary one, removed afterwards)." type:"path"`
	Seed     uint64        `default:"1" help:"Seed of the kill times."`
	JSON     bool          `help:"Print the figures as JSON."`
	NATSSync string        `name:"nats-sync" enum:"default,always" default:"default" help:"The worker's --nats-sync."`
}

// soakResult is what a soak measured.
type soakResult struct {
	Cycles          int     `json:"cycles"`
	Seconds         float64 `json:"seconds"`
	Acked           int64   `json:"acked"`           // events answered 202
	Refused         int64   `json:"refused"`         // posts answered otherwise or not at all (retried)
	AckedPerSecond  float64 `json:"ackedPerSecond"`  // over the whole soak, restarts included
	RestartP50      float64 `json:"restartP50"`      // seconds from start to /readyz 200
	RestartMax      float64 `json:"restartMax"`      // seconds
	Lost            int     `json:"lost"`            // tenants whose view misses an acknowledged event
	Tenants         int     `json:"tenants"`         // tenants in the view
	VerifyEqual     bool    `json:"verifyEqual"`     // substate verify found the view equal to the stream
	EventsInStream  uint64  `json:"eventsInStream"`  // canonical events stored
	DuplicatesFound uint64  `json:"duplicatesFound"` // canonical events stored more than once for one acknowledged step
}

// Run soaks the worker and prints the figures; a lost event or a view
// that differs from the stream is exit status 1.
func (c *SoakCmd) Run(ctx context.Context, m *Main) error {
	dir := c.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "substate-soak-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	s, err := newSoak(c, dir)
	if err != nil {
		return err
	}
	res, err := s.run(ctx, m.Stderr)
	if err != nil {
		return err
	}
	printSoak(m.Stdout, res, c.JSON)
	if res.Lost > 0 || !res.VerifyEqual {
		return exitError{1}
	}
	return nil
}

// soak is one soak run.
type soak struct {
	cfg       *SoakCmd
	dir       string
	http      string         // the worker's HTTP address, the same across restarts
	nats      string         // its embedded NATS address
	acked     []atomic.Int64 // per tenant: the last step answered 202 (0: none)
	nAcked    atomic.Int64
	nRefused  atomic.Int64
	restarts  []float64
	worker    *exec.Cmd
	exited    chan error // the worker's exit
	workerLog *syncBuffer
}

func newSoak(c *SoakCmd, dir string) (*soak, error) {
	httpAddr, err := bench.FreeAddr()
	if err != nil {
		return nil, err
	}
	natsAddr, err := bench.FreeAddr()
	if err != nil {
		return nil, err
	}
	return &soak{cfg: c, dir: dir, http: httpAddr, nats: natsAddr, acked: make([]atomic.Int64, max(c.Tenants, 1))}, nil
}

// run starts the worker, posts load from the clients, kills and restarts
// the worker Cycles times, then lets it settle and checks the view.
func (s *soak) run(ctx context.Context, progress io.Writer) (soakResult, error) {
	start := time.Now()
	if err := s.startWorker(ctx); err != nil {
		return soakResult{}, err
	}
	defer s.stopWorker()
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range max(s.cfg.Clients, 1) {
		wg.Go(func() { s.client(loadCtx, i) })
	}
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0x50a6))
	err := s.cycles(ctx, rng, progress)
	stopLoad()
	wg.Wait()
	if err != nil {
		return soakResult{}, err
	}
	res := soakResult{Cycles: s.cfg.Cycles, Seconds: time.Since(start).Seconds(), Acked: s.nAcked.Load(), Refused: s.nRefused.Load()}
	res.AckedPerSecond = float64(res.Acked) / res.Seconds
	if len(s.restarts) > 0 {
		sorted := slices.Sorted(slices.Values(s.restarts))
		res.RestartP50, res.RestartMax = sorted[len(sorted)/2], sorted[len(sorted)-1]
	}
	return res, s.check(ctx, &res)
}

// cycles kills the worker Cycles times after a random time under load
// and starts it again.
func (s *soak) cycles(ctx context.Context, rng *rand.Rand, progress io.Writer) error {
	span := max(s.cfg.MaxUp-s.cfg.MinUp, 0)
	for i := range s.cfg.Cycles {
		up := s.cfg.MinUp + time.Duration(rng.Int64N(int64(span)+1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(up):
		}
		s.kill()
		if err := s.startWorker(ctx); err != nil {
			return fmt.Errorf("cycle %d: %w", i+1, err)
		}
		if (i+1)%10 == 0 || i+1 == s.cfg.Cycles {
			fmt.Fprintf(progress, "soak: %d/%d kill -9 cycles, %d events acknowledged\n", i+1, s.cfg.Cycles, s.nAcked.Load())
		}
	}
	return nil
}

// startWorker starts "substate run" and waits for its /readyz.
func (s *soak) startWorker(ctx context.Context) error {
	cmd, err := bench.WorkerCommand("run", "--data-dir", s.dir, "--http-addr", s.http, "--nats-listen", s.nats,
		"--ack-wait", "2s", "--batch-size", "64", "--nats-sync", s.cfg.NATSSync, "--log-format", "json", "--log-level", "warn")
	if err != nil {
		return err
	}
	s.workerLog = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, s.workerLog
	bench.DieWithParent(cmd)
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	s.worker, s.exited = cmd, make(chan error, 1)
	go func() { s.exited <- cmd.Wait() }()
	for {
		if ok, _ := s.ready(ctx); ok {
			s.restarts = append(s.restarts, time.Since(began).Seconds())
			return nil
		}
		select {
		case err := <-s.exited:
			s.worker = nil
			return fmt.Errorf("worker exited before it was ready: %v: %s", err, lastLines(s.workerLog.String(), 5))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(began) > 2*time.Minute {
			return fmt.Errorf("worker not ready after 2 minutes: %s", lastLines(s.workerLog.String(), 5))
		}
	}
}

// kill kills the worker with SIGKILL and waits for it.
func (s *soak) kill() {
	if s.worker != nil {
		_ = s.worker.Process.Signal(syscall.SIGKILL)
		<-s.exited
		s.worker = nil
	}
}

// stopWorker stops the last worker with SIGTERM and waits for it.
func (s *soak) stopWorker() {
	if s.worker != nil {
		_ = s.worker.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(time.Minute):
			s.kill()
		}
		s.worker = nil
	}
}

// ready reports whether the worker answers /readyz with 200.
func (s *soak) ready(ctx context.Context) (bool, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.http+"/readyz", nil)
	resp, err := soakClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

var soakClient = &http.Client{Timeout: 5 * time.Second}

// client posts the next step of its tenants (every Clients-th tenant from
// i) until ctx is done, each step again until it is answered 202.
func (s *soak) client(ctx context.Context, i int) {
	for ctx.Err() == nil {
		for t := i; t < len(s.acked) && ctx.Err() == nil; t += max(s.cfg.Clients, 1) {
			step := s.acked[t].Load() + 1
			if s.post(ctx, t, step) {
				s.acked[t].Store(step)
				s.nAcked.Add(1)
			} else {
				s.nRefused.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// soakTenant is the id of tenant t.
func soakTenant(t int) string { return fmt.Sprintf("soak-%04d", t) }

// soakBase is the modified_at of every tenant's step 0.
var soakBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// post delivers step of tenant t as a Restate webhook would, and reports
// whether it was answered 202.
func (s *soak) post(ctx context.Context, t int, step int64) bool {
	tenant := soakTenant(t)
	status := "running"
	if step%3 == 0 {
		status = "suspended"
	}
	body, _ := json.Marshal(map[string]any{"id": "inv_" + tenant, "target_service_key": tenant, "status": status,
		"created_at": soakBase.Format(time.RFC3339Nano), "modified_at": soakBase.Add(time.Duration(step) * time.Millisecond).Format(time.RFC3339Nano)})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.http+"/v1/ingest/restate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", fmt.Sprintf("%s-%d", tenant, step))
	resp, err := soakClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusAccepted
}

// check waits for the last worker to settle, then compares every
// tenant's view with its last acknowledged step and runs verify.
func (s *soak) check(ctx context.Context, res *soakResult) error {
	nkey := (bus.Credentials{Dir: worker.NATSCredentialsDir(s.dir)}).SeedFile(bus.Worker)
	b, err := bus.Open(bus.Config{URL: "nats://" + s.nats, NkeyFile: nkey})
	if err != nil {
		return err
	}
	defer b.Close()
	if err := waitIdle(ctx, b, 2*time.Minute); err != nil {
		return err
	}
	for t := range s.acked {
		want := s.acked[t].Load()
		if want == 0 {
			continue
		}
		v, err := s.tenant(ctx, soakTenant(t))
		if err != nil || v.LastEventAt.Before(soakBase.Add(time.Duration(want)*time.Millisecond)) {
			res.Lost++
		}
	}
	info, err := b.JetStream.Stream(ctx, substate.StreamEvents)
	if err != nil {
		return err
	}
	res.EventsInStream = info.CachedInfo().State.Msgs
	if n := uint64(res.Acked); res.EventsInStream > n {
		res.DuplicatesFound = res.EventsInStream - n // posts stored but not answered 202 count here too
	}
	var out, errOut bytes.Buffer
	v := &VerifyCmd{Server: "http://" + s.http, BatchSize: 512, Evidence: true, ClientFlags: ClientFlags{NATSURL: "nats://" + s.nats, NATSNkey: nkey, DataDir: s.dir}}
	verr := v.Run(ctx, &Main{Stdout: &out, Stderr: &errOut})
	res.VerifyEqual = verr == nil
	if verr != nil && !errors.As(verr, new(exitError)) {
		return fmt.Errorf("verify: %w", verr)
	}
	res.Tenants = len(s.acked)
	return nil
}

// tenant reads one tenant's view from the worker.
func (s *soak) tenant(ctx context.Context, id string) (substate.TenantView, error) {
	ctx, cancel := context.WithTimeout(ctx, soakClient.Timeout)
	defer cancel()
	return (&httpapi.Client{URL: "http://" + s.http}).Tenant(ctx, id)
}

// waitIdle waits until the normalizer and the projector have nothing
// pending and nothing unacknowledged, and the view has applied the last
// event of the stream.
func waitIdle(ctx context.Context, b *bus.Bus, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		busy, err := pipelineBusy(ctx, b.JetStream)
		if err != nil {
			busy = err.Error()
		} else if busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the worker did not settle: %s", busy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// pipelineBusy says what the normalizer or the projector still has to do
// (messages pending or unacknowledged); "" when nothing.
func pipelineBusy(ctx context.Context, js jetstream.JetStream) (string, error) {
	for _, c := range []struct{ stream, name string }{{substate.StreamRaw, bus.ConsumerNormalizer}, {substate.StreamEvents, bus.ProjectorConsumer("")}} {
		info, err := bench.ConsumerInfo(ctx, js, c.stream, c.name)
		if err != nil {
			return "", err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Sprintf("%s: %d pending, %d unacknowledged", c.name, info.NumPending, info.NumAckPending), nil
		}
	}
	return "", nil
}

// printSoak prints the figures.
func printSoak(w io.Writer, r soakResult, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return
	}
	verdict := "equal"
	if !r.VerifyEqual {
		verdict = "DIFFERENT"
	}
	fmt.Fprintf(w, "kill -9 cycles          %d in %.0f s\n", r.Cycles, r.Seconds)
	fmt.Fprintf(w, "events acknowledged     %d (%.0f/s, restarts included); %d posts refused or unanswered and retried\n", r.Acked, r.AckedPerSecond, r.Refused)
	fmt.Fprintf(w, "restart to ready        p50 %.2f s, max %.2f s\n", r.RestartP50, r.RestartMax)
	fmt.Fprintf(w, "lost                    %d of %d tenants miss an acknowledged event\n", r.Lost, r.Tenants)
	fmt.Fprintf(w, "canonical events        %d stored for %d acknowledged (%d more: posts stored but unanswered, retried)\n", r.EventsInStream, r.Acked, r.DuplicatesFound)
	fmt.Fprintf(w, "verify                  %s\n", verdict)
}

// syncBuffer is a bytes.Buffer safe to read while another goroutine
// writes to it: a child worker's output, or a command's under test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	return string(bytes.Join(lines[max(len(lines)-n, 0):], []byte("\n")))
}
