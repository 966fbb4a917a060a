// Package soak kills a worker with SIGKILL under load, again and again,
// then checks that no event it acknowledged was lost and that its view
// equals its stream. "substate soak" runs it.
package soak

import (
	"bytes"
	"context"
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

	"github.com/substatehq/substate/internal/termtext"
	"github.com/substatehq/substate/tools/bench"
)

// Config is one soak: how often and when the worker is killed and the
// load it is under.
type Config struct {
	Cycles   int           // how many times the worker is killed with SIGKILL under load and started again
	Tenants  int           // tenants the load spreads over, each one's events posted in order
	Clients  int           // concurrent HTTP clients posting events, retrying on any answer but 202
	MinUp    time.Duration // shortest time the worker runs under load before it is killed
	MaxUp    time.Duration // longest time the worker runs under load before it is killed
	DataDir  string        // data directory of the worker; "" for a new temporary one, removed afterwards
	Seed     uint64        // seed of the kill times
	JSON     bool          // print the figures as JSON
	NATSSync string        // the worker's --nats-sync
}

// ErrLost is returned by Run when an acknowledged event is missing from
// the view, or the view differs from the stream. Run has printed the
// figures that say which.
var ErrLost = errors.New("soak: an acknowledged event was lost or the view differs from the stream")

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

// Run soaks the worker, prints its progress to stderr and the figures to
// stdout; a lost event or a view that differs from the stream is
// ErrLost.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	dir := c.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "substate-soak-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	s, err := newSoak(&c, dir)
	if err != nil {
		return err
	}
	res, err := s.run(ctx, stderr)
	if err != nil {
		return err
	}
	printSoak(stdout, res, c.JSON)
	if res.Lost > 0 || !res.VerifyEqual {
		return ErrLost
	}
	return nil
}

// soak is one soak run.
type soak struct {
	cfg       *Config
	dir       string
	http      string         // the worker's HTTP address, the same across restarts
	nats      string         // its embedded NATS address
	acked     []atomic.Int64 // per tenant: the last step answered 202 (0: none)
	nAcked    atomic.Int64
	nRefused  atomic.Int64
	restarts  []float64
	worker    *exec.Cmd
	exited    chan struct{} // closed when the worker exited, with exitErr set
	exitErr   error         // how the worker exited
	workerLog *termtext.SyncBuffer
}

func newSoak(c *Config, dir string) (*soak, error) {
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
	s.workerLog = &termtext.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, s.workerLog
	bench.DieWithParent(cmd)
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	s.worker, s.exited = cmd, make(chan struct{})
	go func() { s.exitErr = cmd.Wait(); close(s.exited) }()
	for {
		if ok, _ := s.ready(ctx); ok {
			s.restarts = append(s.restarts, time.Since(began).Seconds())
			return nil
		}
		select {
		case <-s.exited:
			s.worker = nil
			return fmt.Errorf("worker exited before it was ready: %v: %s", s.exitErr, lastLines(s.workerLog.String(), 5))
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
		<-s.exited // killed: the exit status says only that
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

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	return string(bytes.Join(lines[max(len(lines)-n, 0):], []byte("\n")))
}
