package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/timex"
	"github.com/substatehq/substate/state"
	"github.com/substatehq/substate/worker"
)

// WorkerCommand returns the command that runs "substate <args>" in a
// child process: this executable, which is substate when bench or soak
// run. Tests, whose executable is the test binary, replace it.
var WorkerCommand = func(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(exe, args...), nil
}

// childWorker is "substate run" in a child process connected to the
// bench's NATS server, as a worker runs with --nats-url in a deployment:
// its memory is the worker's alone, without the server's caches.
type childWorker struct {
	cmd  *exec.Cmd
	dir  string // its data directory
	http string // its HTTP address
	js   jetstream.JetStream
}

// startChild starts the worker on the bench's NATS server srv, with its
// data under dir, and waits until its durable consumers are in place. It
// connects as the worker identity: the embedded server's, or --nats-nkey's
// on an external one.
func (b *benchRun) startChild(ctx context.Context, srv *bus.Bus, dir string, extra ...string) (*childWorker, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	f := b.Flags
	url, nkey := srv.ClientURL(), f.NATSNkey
	if creds, ok := srv.Credentials(); ok {
		nkey = creds.SeedFile(bus.Worker)
	}
	args := []string{"run", "--nats-url", url, "--data-dir", dir, "--http-addr", addr, "--sfn-reconcile", "off",
		"--batch-size", strconv.Itoa(f.BatchSize), "--batch-linger", f.BatchLinger.String(), "--batch-linger-max", f.BatchLingerMax.String(), "--log-format", f.LogFormat, "--log-level", f.LogLevel.String(),
		"--replicas", strconv.Itoa(f.NATSReplicas)}
	// The streams as the bench made them: a worker on other settings
	// would update them (the default 10m duplicate window over a shorter
	// --dedupe-window), and measure what was not asked.
	args = append(args, f.StreamFlags.Args()...)
	args = append(args, extra...)
	for _, o := range [...][2]string{{"--nats-creds", f.NATSCreds}, {"--nats-nkey", nkey}, {"--nats-tls-ca", f.NATSTLSCA}, {"--nats-tls-cert", f.NATSTLSCert}, {"--nats-tls-key", f.NATSTLSKey}} {
		if o[1] != "" {
			args = append(args, o[0], o[1])
		}
	}
	cmd, err := WorkerCommand(args...)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = b.logs, b.logs
	DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start worker: %w", err)
	}
	c := &childWorker{cmd: cmd, dir: dir, http: addr, js: srv.JetStream}
	if err := c.waitReady(ctx); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// FreeAddr returns a loopback address with a port nothing listens on.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// waitReady waits for the worker's /readyz.
func (c *childWorker) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + c.http + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := timex.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return errors.New("bench: the worker did not get ready within a minute; see bench.log")
}

// waitApplied blocks until the worker's projector has acknowledged every
// event of n published since SUBSTATE_EVENTS was empty.
func (c *childWorker) waitApplied(ctx context.Context, n uint64, idle time.Duration) error {
	return waitCount(ctx, n, idle, "the worker's view acknowledged", func() (uint64, bool, error) {
		info, err := ConsumerInfo(ctx, c.js, substate.StreamEvents, bus.ProjectorConsumer(""))
		if err != nil {
			return 0, false, err
		}
		return info.AckFloor.Stream, info.NumAckPending == 0, nil
	})
}

// ConsumerInfo reads the state of the durable consumer name of stream.
func ConsumerInfo(ctx context.Context, js jetstream.JetStream, stream, name string) (*jetstream.ConsumerInfo, error) {
	cons, err := js.Consumer(ctx, stream, name)
	if err != nil {
		return nil, err
	}
	return cons.Info(ctx)
}

// metrics reads counters of the worker's /metrics, each the sum of its
// series (the outcomes of substate_evidence_events_total, say).
func (c *childWorker) metrics(names ...string) (map[string]float64, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+c.http+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept-Encoding", "identity") // not gzip: the worker's CPU is what is measured
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("bench: read the worker's metrics: %w", err)
	}
	out := make(map[string]float64, len(names))
	for _, n := range names {
		if f, ok := families[n]; ok {
			for _, m := range f.Metric {
				out[n] += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return out, nil
}

// memory reads the worker's resident memory.
func (c *childWorker) memory() memory {
	return readMemoryOf(filepath.Join("/proc", strconv.Itoa(c.cmd.Process.Pid), "status"))
}

// stop ends the worker as SIGTERM does and opens its view, which the
// caller closes.
func (c *childWorker) stop() (*state.DB, error) {
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil, err
	}
	if err := c.cmd.Wait(); err != nil {
		return nil, fmt.Errorf("bench: worker: %w", err)
	}
	db := state.NewDB(filepath.Join(c.dir, worker.ViewFile("")))
	return db, db.Open()
}

func (c *childWorker) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}
