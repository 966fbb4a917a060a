package faults_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/substatehq/substate/testkit/faults"
)

// warnings collects what a nats-server logs at warning level and above.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) add(level, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, level+" "+fmt.Sprintf(format, args...))
}

func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

func (w *warnings) Noticef(string, ...any)            {}
func (w *warnings) Debugf(string, ...any)             {}
func (w *warnings) Tracef(string, ...any)             {}
func (w *warnings) Warnf(format string, args ...any)  { w.add("WARN", format, args...) }
func (w *warnings) Errorf(format string, args ...any) { w.add("ERROR", format, args...) }
func (w *warnings) Fatalf(format string, args ...any) { w.add("FATAL", format, args...) }

// natsServer is an embedded nats-server with JetStream on a random port,
// its store in dir, and a JetStream client.
type natsServer struct {
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	logs *warnings
}

func startNATS(tb testing.TB, dir string) *natsServer {
	tb.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true})
	if err != nil {
		tb.Fatal(err)
	}
	logs := &warnings{}
	srv.SetLoggerV2(logs, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server did not start")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		tb.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	s := &natsServer{srv: srv, nc: nc, js: js, logs: logs}
	tb.Cleanup(s.stop)
	return s
}

func (s *natsServer) stop() {
	s.nc.Close()
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// fill creates stream S and publishes n messages of size bytes on it.
func (s *natsServer) fill(tb testing.TB, n, size int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		tb.Fatal(err)
	}
	body := make([]byte, size)
	for i := 1; i <= n; i++ {
		copy(body, fmt.Sprintf("message %08d ", i))
		if _, err := s.js.PublishAsync(fmt.Sprintf("s.%d", i%10), body); err != nil {
			tb.Fatal(err)
		}
		if i%1000 == 0 || i == n { // stay under the client's bound on pending publishes
			select {
			case <-s.js.PublishAsyncComplete():
			case <-ctx.Done():
				tb.Fatal("publishes not acknowledged")
			}
		}
	}
}

// state returns the stream's state with details: the fast state a plain
// StreamInfo returns has no Lost.
func (s *natsServer) state(tb testing.TB) jetstream.StreamState {
	tb.Helper()
	st, err := s.js.Stream(context.Background(), "S")
	if err != nil {
		tb.Fatal(err)
	}
	info, err := st.Info(context.Background(), jetstream.WithDeletedDetails(true))
	if err != nil {
		tb.Fatal(err)
	}
	return info.State
}

// delivered returns the stream sequences an ordered consumer from the
// start delivers.
func (s *natsServer) delivered(tb testing.TB) []uint64 {
	tb.Helper()
	c, err := s.js.OrderedConsumer(context.Background(), "S", jetstream.OrderedConsumerConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	var seqs []uint64
	for {
		batch, err := c.FetchNoWait(1000)
		if err != nil {
			tb.Fatal(err)
		}
		n := len(seqs)
		for m := range batch.Messages() {
			md, _ := m.Metadata()
			seqs = append(seqs, md.Sequence.Stream)
		}
		if len(seqs) == n {
			return seqs
		}
	}
}

// gaps returns the sequences missing between the first and last of seqs.
func gaps(seqs []uint64) (missing int, first uint64) {
	for i := 1; i < len(seqs); i++ {
		if d := seqs[i] - seqs[i-1] - 1; d > 0 {
			if missing == 0 {
				first = seqs[i-1] + 1
			}
			missing += int(d)
		}
	}
	return missing, first
}

// Garbage over the records of the last (here the only) block: at start
// the server truncates the block at the first bad record and says so in
// a warning. The stream's last sequence moves backwards, State.Lost lists
// what went, and the next publish reuses the lost sequences.
func TestCorruptLastStreamBlock(t *testing.T) {
	dir := t.TempDir()
	s := startNATS(t, dir)
	s.fill(t, 1000, 100)
	s.stop()
	block, off, err := faults.CorruptStreamBlock(dir, "S", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s = startNATS(t, dir)
	st := s.state(t)
	if st.Msgs >= 1000 || st.LastSeq >= 1000 || st.LastSeq != st.Msgs || st.Lost == nil ||
		st.Lost.Msgs[0] != st.LastSeq+1 || st.Lost.Msgs[len(st.Lost.Msgs)-1] != 1000 {
		t.Fatalf("after garbage at %s:%d: state %+v, want the block cut at the garbage and the rest in Lost", block, off, st)
	}
	if !strings.Contains(s.logs.String(), "corrupt record state in "+block) {
		t.Fatalf("server warnings %q name no corrupt record in %s", s.logs, block)
	}
	t.Logf("last sequence 1000 -> %d, lost %d..%d (%d bytes)", st.LastSeq, st.Lost.Msgs[0], st.LastSeq+uint64(len(st.Lost.Msgs)), st.Lost.Bytes)
	ack, err := s.js.Publish(context.Background(), "s.1", []byte("after"))
	if err != nil || ack.Sequence != st.LastSeq+1 {
		t.Fatalf("publish after the loss: %+v, %v; want sequence %d reused", ack, err, st.LastSeq+1)
	}
}

// Garbage over the records of an inner block: the server drops the rest
// of that block at start, reports the range in State.Lost, keeps it as
// deleted messages (NumDeleted) and keeps its first and last sequence; a
// consumer skips the range without a word.
func TestCorruptInnerStreamBlock(t *testing.T) {
	dir := t.TempDir()
	s := startNATS(t, dir)
	s.fill(t, 16000, 600) // two blocks of about 8 MB
	s.stop()
	block, _, err := faults.CorruptStreamBlock(dir, "S", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s = startNATS(t, dir)
	st := s.state(t)
	if st.FirstSeq != 1 || st.LastSeq != 16000 || st.Lost == nil || st.NumDeleted != len(st.Lost.Msgs) ||
		st.Msgs != 16000-uint64(st.NumDeleted) {
		t.Fatalf("state %+v, want sequences 1 to 16000 with a lost range counted as deleted", st)
	}
	if !strings.Contains(s.logs.String(), "corrupt record state in "+block) {
		t.Fatalf("server warnings %q name no corrupt record in %s", s.logs, block)
	}
	missing, first := gaps(s.delivered(t))
	if missing != st.NumDeleted || first != st.Lost.Msgs[0] {
		t.Fatalf("consumer skipped %d from %d, want the lost %d from %d", missing, first, st.NumDeleted, st.Lost.Msgs[0])
	}
	if again := s.state(t); again.NumDeleted != st.NumDeleted {
		t.Fatalf("deleted count moved from %d to %d", st.NumDeleted, again.NumDeleted)
	}
	t.Logf("lost %d..%d (%d msgs) of 1..16000, NumDeleted %d", st.Lost.Msgs[0], st.Lost.Msgs[len(st.Lost.Msgs)-1], len(st.Lost.Msgs), st.NumDeleted)
}

// Garbage inside one record's payload of an inner block: the server
// notices nothing at start (no warning, no Lost, no deleted count); the
// record fails its checksum when read, so getting it is "message not
// found" and a consumer skips it.
func TestCorruptOneRecordInStreamBlock(t *testing.T) {
	dir := t.TempDir()
	s := startNATS(t, dir)
	s.fill(t, 1700, 10_000) // two blocks of records of one size
	s.stop()
	blocks, err := faults.StreamBlocks(dir, "S")
	if err != nil {
		t.Fatal(err)
	}
	off := recordLen(t, blocks[0])*400 + 3000 // inside the payload of the 401st record
	if err := faults.CorruptFile(blocks[0], off, 4096); err != nil {
		t.Fatal(err)
	}
	s = startNATS(t, dir)
	st := s.state(t)
	if st.Msgs != 1700 || st.Lost != nil || st.NumDeleted != 0 {
		t.Fatalf("state %+v, want nothing noticed", st)
	}
	missing, first := gaps(s.delivered(t))
	if missing != 1 || first != 401 {
		t.Fatalf("consumer skipped %d messages from %d, want the one damaged, 401", missing, first)
	}
	stream, _ := s.js.Stream(context.Background(), "S")
	if _, err := stream.GetMsg(context.Background(), first); err == nil || !strings.Contains(err.Error(), "message not found") {
		t.Fatalf("GetMsg(%d) = %v, want message not found", first, err)
	}
	if st := s.state(t); st.Msgs != 1700 || st.NumDeleted != 0 {
		t.Fatalf("after the reads: state %+v, still want nothing noticed", st)
	}
	if w := s.logs.String(); w != "" {
		t.Errorf("server warnings: %s", w)
	}
}

// recordLen returns the length of the first record of a message block:
// its first 4 bytes, little endian, with the top bit flagging headers.
func recordLen(t *testing.T, block string) int64 {
	t.Helper()
	b, err := os.ReadFile(block)
	if err != nil || len(b) < 4 {
		t.Fatalf("read %s: %v", block, err)
	}
	return int64(binary.LittleEndian.Uint32(b) &^ (1 << 31))
}

func TestStreamBlocksErrors(t *testing.T) {
	if _, err := faults.StreamBlocks(t.TempDir(), "S"); err == nil {
		t.Error("no error for a store without the stream")
	}
	dir := t.TempDir()
	s := startNATS(t, dir)
	s.fill(t, 10, 10)
	s.stop()
	if _, _, err := faults.CorruptStreamBlock(dir, "S", 1, 10); err == nil {
		t.Error("no error for a block that does not exist")
	}
}
