package worker

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/lmittmann/tint"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate/bus"
	"github.com/substatehq/substate/internal/ratelog"
	"github.com/substatehq/substate/internal/termtext"
)

// DefaultFlags returns the flags of "substate run" given no option: every
// default its command line declares, for a worker built without one (a
// test, a program embedding substate). TestDefaultFlags holds the two
// equal.
func DefaultFlags() Flags {
	return Flags{
		DataDir: "./data", HTTPAddr: "127.0.0.1:8080", HTTPMaxConns: 4096, HTTPMaxConnsPerIP: 256,
		BatchSize: 512, BatchLinger: 2 * time.Millisecond, BatchLingerMax: 2 * time.Millisecond, MaxDeliveries: 10, AckWait: 30 * time.Second,
		IngestMaxBacklog: 100000, IngestMaxInFlight: 4096,
		OnStreamLoss: "rebuild", StreamCheckEvery: 5 * time.Second, ViewFailureTimeout: 2 * time.Minute,
		ReadAPIFlags: ReadAPIFlags{EvidenceCheckInterval: time.Minute, EvidenceCheckBudget: 0.5},
		RoleFlags:    RoleFlags{Role: RoleAll, ChangeFeed: true},
		LogFlags:     LogFlags{LogFormat: "text", LogLevel: slog.LevelInfo, LogRate: 1000},
		NATSFlags: NATSFlags{NATSListen: "127.0.0.1:4222", NATSSync: "default", NATSReplicas: 1,
			SubscriberConsumers: slices.Clone(bus.DefaultSubscriberConsumers)},
		StreamFlags: StreamFlags{
			RawMaxAge: 720 * time.Hour, EventsMaxAge: 720 * time.Hour, DLQMaxAge: 2160 * time.Hour,
			ChangesMaxAge: 720 * time.Hour, DedupeWindow: 10 * time.Minute, StreamCompression: "s2",
		},
		ReconcileFlags: ReconcileFlags{
			ReconcileInterval: 15 * time.Second, ReconcileQPS: 10, SFNReconcile: "auto",
			SFNHistoryInterval: 15 * time.Second, SFNAPIBudget: 4, SFNRedriveCheck: time.Hour,
			RestatePollEvery: 15 * time.Second,
		},
		ActionFlags:   ActionFlags{ActionJobs: 4},
		DeadlineFlags: DeadlineFlags{StuckMetricTypes: 50},
	}
}

// LogFlags choose how logs look.
type LogFlags struct {
	LogFormat string     `enum:"text,json" default:"text" help:"Log format: text for humans (colored on a terminal, key=value elsewhere), json for machines."`
	LogLevel  slog.Level `default:"info" help:"Lowest level logged: debug, info, warn or error."`
	LogRate   int        `default:"1000" placeholder:"LINES" help:"Most log lines of one message per second at info and warn (0: no limit); the rest of that second are counted in one 'log lines suppressed' line. Debug and error lines always pass."`
}

// Logger returns the logger the flags describe, writing to stderr.
func (f LogFlags) Logger() *slog.Logger { return f.LoggerTo(os.Stderr) }

// LoggerTo returns the logger the flags describe, writing to w. Text on a
// terminal is tint's, colored; text written anywhere else is slog's own
// key=value text, which costs a third of tint's without colors (tint
// scans every value for color codes to strip, allocating as it goes) and
// reads as well in a file or a log collector.
func (f LogFlags) LoggerTo(w *os.File) *slog.Logger {
	return slog.New(ratelog.New(f.handler(w), f.LogRate))
}

// handler is the handler of the format the flags name, writing to w.
func (f LogFlags) handler(w *os.File) slog.Handler {
	opts := &slog.HandlerOptions{Level: f.LogLevel}
	switch {
	case f.LogFormat == "json":
		opts.ReplaceAttr = millisecondTime
		return slog.NewJSONHandler(w, opts)
	case termtext.Terminal(w):
		return tint.NewTextHandler(w, &tint.Options{Level: f.LogLevel, TimeFormat: time.TimeOnly})
	}
	return slog.NewTextHandler(w, opts)
}

// millisecondTime writes a JSON line's time in UTC to the millisecond,
// as the text format does (slog's JSON default is to the nanosecond: ten
// bytes more on every line).
func millisecondTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 && a.Value.Kind() == slog.KindTime {
		return slog.String(slog.TimeKey, a.Value.Time().UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	return a
}

// OpenLogFile opens a log file for appending, creating its directory: the
// worker's log when a command (bench, demo) keeps the terminal for itself.
func OpenLogFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// NATSFlags say where NATS is and how to reach it.
type NATSFlags struct {
	NATSURL      string `name:"nats-url" help:"Existing NATS server URL; without it an embedded server runs."`
	NATSListen   string `name:"nats-listen" default:"127.0.0.1:4222" help:"Client address of the embedded NATS server."`
	NATSCreds    string `name:"nats-creds" type:"existingfile" help:"NATS credentials file (JWT and seed) for --nats-url."`
	NATSNkey     string `name:"nats-nkey" type:"existingfile" help:"NATS nkey seed file for --nats-url."`
	NATSTLSCA    string `name:"nats-tls-ca" type:"existingfile" help:"CA certificate to verify the NATS server with."`
	NATSTLSCert  string `name:"nats-tls-cert" type:"existingfile" help:"Client certificate for NATS (with --nats-tls-key)."`
	NATSTLSKey   string `name:"nats-tls-key" type:"existingfile" help:"Client key for NATS."`
	NATSSync     string `name:"nats-sync" enum:"default,always" default:"default" help:"Embedded server's disk sync: default flushes every 2 minutes (a process crash loses nothing, a power loss can lose the last interval); always flushes each write before acknowledging it (slower)."`
	NATSReplicas int    `name:"replicas" default:"1" help:"Stream replicas on a NATS cluster (use 3 there)."`
	// SubscriberConsumers: see bus.Consumers.
	SubscriberConsumers []string `name:"subscriber-consumers" sep:"," default:"subscriber-1,subscriber-2,subscriber-3,subscriber-4" help:"The only names under which the embedded server's subscriber identity may create consumers on SUBSTATE_EVENTS and SUBSTATE_CHANGES (comma-separated; durable or not): give each downstream service its own. At most that many consumers of subscribers exist on a stream, so they can never use up the stream's consumers the worker needs."`

	NATSServerTLSCert     string `name:"nats-server-tls-cert" type:"existingfile" help:"Certificate of the embedded NATS server (with --nats-server-tls-key); required when --nats-listen is not a loopback address."`
	NATSServerTLSKey      string `name:"nats-server-tls-key" type:"existingfile" help:"Key of the embedded NATS server's certificate."`
	NATSServerTLSClientCA string `name:"nats-server-tls-client-ca" type:"existingfile" help:"CA that must have signed a certificate every client of the embedded NATS server presents (besides its nkey)."`
}

// NATSCredentialsDir is where the embedded NATS server keeps the seed
// files of its identities: worker.nk, tasks.nk, subscriber.nk.
func NATSCredentialsDir(dataDir string) string { return filepath.Join(dataDir, "nats", "credentials") }

// StreamFlags set the retention of substate's streams.
type StreamFlags struct {
	RawMaxAge         time.Duration `default:"720h" help:"How long SUBSTATE_RAW keeps provider payloads (0 = no limit)."`
	RawMaxBytes       int64         `default:"0" help:"Size cap of SUBSTATE_RAW in bytes, oldest discarded first (0 = no limit)."`
	EventsMaxAge      time.Duration `default:"720h" help:"How long SUBSTATE_EVENTS keeps canonical events (0 = no limit)."`
	EventsMaxBytes    int64         `default:"0" help:"Size cap of SUBSTATE_EVENTS in bytes (0 = no limit)."`
	DLQMaxAge         time.Duration `name:"dlq-max-age" default:"2160h" help:"How long SUBSTATE_DLQ keeps dead letters."`
	ChangesMaxAge     time.Duration `default:"720h" help:"How long SUBSTATE_CHANGES (the change feed) keeps changes (0 = no limit)."`
	ChangesMaxBytes   int64         `default:"0" help:"Size cap of SUBSTATE_CHANGES in bytes, oldest discarded first (0 = no limit)."`
	DedupeWindow      time.Duration `default:"10m" help:"Window in which JetStream drops a repeated source event id or change-feed sequence, and a reused source id with another body is answered 409. JetStream keeps every id of the window in memory (about 220 bytes each): at 1,000 events/s, 10m holds about 130 MB. A repeat after the window changes nothing in the view."`
	StreamCompression string        `enum:"s2,none" default:"s2" help:"How JetStream stores SUBSTATE_RAW, SUBSTATE_EVENTS and SUBSTATE_CHANGES on disk: s2 (compressed, a fraction of the disk for a little CPU) or none. Changing it on existing streams is allowed: blocks already written stay as they are and stay readable."`
}

// Args returns the command-line flags that give another worker process
// these stream settings: one that declares the streams otherwise would
// update them to its own.
func (f StreamFlags) Args() []string {
	return []string{
		"--raw-max-age", f.RawMaxAge.String(), "--raw-max-bytes", strconv.FormatInt(f.RawMaxBytes, 10),
		"--events-max-age", f.EventsMaxAge.String(), "--events-max-bytes", strconv.FormatInt(f.EventsMaxBytes, 10),
		"--dlq-max-age", f.DLQMaxAge.String(),
		"--changes-max-age", f.ChangesMaxAge.String(), "--changes-max-bytes", strconv.FormatInt(f.ChangesMaxBytes, 10),
		"--dedupe-window", f.DedupeWindow.String(), "--stream-compression", f.StreamCompression,
	}
}

// BusConfig says where the flags put NATS.
func (f Flags) BusConfig(log *slog.Logger) bus.Config {
	return bus.Config{
		URL: f.NATSURL, Listen: f.NATSListen, StoreDir: filepath.Join(f.DataDir, "nats"), Sync: f.NATSSync,
		CredsFile: f.NATSCreds, NkeyFile: f.NATSNkey, TLSCA: f.NATSTLSCA, TLSCert: f.NATSTLSCert, TLSKey: f.NATSTLSKey,
		Name: "substate", Logger: log, CredentialsDir: NATSCredentialsDir(f.DataDir), Instances: []string{f.Instance},
		SubscriberConsumers: f.SubscriberConsumers,
		ServerTLS:           bus.ServerTLS{Cert: f.NATSServerTLSCert, Key: f.NATSServerTLSKey, ClientCA: f.NATSServerTLSClientCA},
	}
}

// Topology is the configuration of the streams the flags ask for.
func (f Flags) Topology() bus.Topology {
	return bus.Topology{
		Raw:         bus.Retention{MaxAge: f.RawMaxAge, MaxBytes: f.RawMaxBytes},
		Events:      bus.Retention{MaxAge: f.EventsMaxAge, MaxBytes: f.EventsMaxBytes},
		DLQ:         bus.Retention{MaxAge: f.DLQMaxAge},
		Changes:     bus.Retention{MaxAge: f.ChangesMaxAge, MaxBytes: f.ChangesMaxBytes},
		Duplicates:  f.DedupeWindow,
		Replicas:    f.NATSReplicas,
		Compression: streamCompression(f.StreamCompression),
	}
}

// streamCompression is the JetStream compression --stream-compression
// names.
func streamCompression(name string) jetstream.StoreCompression {
	if name == "none" {
		return jetstream.NoCompression
	}
	return jetstream.S2Compression
}
