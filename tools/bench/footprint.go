package bench

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/substatehq/substate"
)

// Footprint is what a scenario leaves behind besides the view: the bytes
// of log it wrote at the configured level, and the disk its streams take.
type Footprint struct {
	// LogBytesPerEvent is the log the workers wrote during the scenario,
	// per event sent; LogErrorLines counts its ERROR lines (substate's
	// own faults: none in a healthy run).
	LogBytesPerEvent float64 `json:"logBytesPerEvent"`
	LogErrorLines    int     `json:"logErrorLines"`
	// The disk each stream takes in the embedded server's store, per
	// event sent (its message blocks and indexes, as the file system
	// counts them); zero with --nats-url.
	RawDiskBytes     float64 `json:"rawDiskBytesPerEvent,omitzero"`
	EventsDiskBytes  float64 `json:"eventsDiskBytesPerEvent,omitzero"`
	ChangesDiskBytes float64 `json:"changesDiskBytesPerEvent,omitzero"`
}

// logMark returns where the bench's log file ends now.
func (b *benchRun) logMark() int64 {
	if b.logs == nil {
		return 0
	}
	st, err := b.logs.Stat()
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince returns the bytes written to the log file after mark, and
// the ERROR lines among them.
func (b *benchRun) logSince(mark int64) (int64, int) {
	end := b.logMark()
	if end <= mark {
		return 0, 0
	}
	f, err := os.Open(b.logs.Name())
	if err != nil {
		return end - mark, 0
	}
	defer func() { _ = f.Close() }() // read only
	return end - mark, errorLines(io.NewSectionReader(f, mark, end-mark))
}

// errorLines counts the ERROR lines of a log, in slog's text or JSON.
func errorLines(r io.Reader) int {
	n := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.Contains(l, " level=ERROR ") || strings.Contains(l, `"level":"ERROR"`) {
			n++
		}
	}
	return n
}

// streamDisk returns the bytes each stream's directory takes under the
// embedded NATS server's store in dataDir (nats/jetstream/<account>/
// streams/<name>), by stream name.
func streamDisk(dataDir string) map[string]int64 {
	out := map[string]int64{}
	root := filepath.Join(dataDir, "nats", "jetstream")
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		parts := strings.Split(rel, string(filepath.Separator))
		if len(parts) < 4 || parts[1] != "streams" {
			return nil
		}
		if info, err := d.Info(); err == nil {
			out[parts[2]] += info.Size()
		}
		return nil
	})
	return out
}

// footprint measures the scenario's log since mark and its streams'
// disk, per event of n sent.
func (b *benchRun) footprint(p *benchPipeline, mark int64, n float64) Footprint {
	logBytes, errs := b.logSince(mark)
	f := Footprint{LogBytesPerEvent: float64(logBytes) / n, LogErrorLines: errs}
	if p.w.Bus.Embedded() {
		disk := streamDisk(p.dir)
		f.RawDiskBytes = float64(disk[substate.StreamRaw]) / n
		f.EventsDiskBytes = float64(disk[substate.StreamEvents]) / n
		f.ChangesDiskBytes = float64(disk[substate.StreamChanges]) / n
	}
	return f
}
