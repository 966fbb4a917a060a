package bench

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// memory is the process's resident memory, from /proc/self/status: anon is
// what the process allocated itself (heaps, stacks), file the pages of
// mapped files it touched (the bbolt view is memory-mapped; those pages are
// the page cache, shared and reclaimable).
type memory struct {
	rss, anon, file uint64 // bytes
}

// readMemory reads the process's resident memory; it is zero where /proc
// is not.
func readMemory() memory { return readMemoryOf("/proc/self/status") }

// readMemoryOf reads the resident memory from a /proc status file.
func readMemoryOf(status string) memory {
	data, err := os.ReadFile(status)
	if err != nil {
		return memory{}
	}
	var m memory
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var dst *uint64
		switch string(name) {
		case "VmRSS":
			dst = &m.rss
		case "RssAnon":
			dst = &m.anon
		case "RssFile":
			dst = &m.file
		default:
			continue
		}
		f := bytes.Fields(rest)
		if len(f) > 0 {
			kb, _ := strconv.ParseUint(string(f[0]), 10, 64)
			*dst = kb << 10
		}
	}
	return m
}

// memSampler follows the peak resident memory of a process while a
// scenario runs.
type memSampler struct {
	read     func() memory
	stop     chan struct{}
	wg       sync.WaitGroup
	peakAnon atomic.Uint64
	peakRSS  atomic.Uint64
}

// sampleMemory reads the memory every interval until the sampler stops.
func sampleMemory(read func() memory, every time.Duration) *memSampler {
	s := &memSampler{read: read, stop: make(chan struct{})}
	s.observe()
	s.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.observe()
			}
		}
	})
	return s
}

func (s *memSampler) observe() {
	m := s.read()
	raise(&s.peakAnon, m.anon)
	raise(&s.peakRSS, m.rss)
}

// raise sets p to v when v is larger.
func raise(p *atomic.Uint64, v uint64) {
	for old := p.Load(); v > old && !p.CompareAndSwap(old, v); old = p.Load() {
	}
}

// done stops sampling and returns the peaks.
func (s *memSampler) done() (anon, rss uint64) {
	s.observe()
	close(s.stop)
	s.wg.Wait()
	return s.peakAnon.Load(), s.peakRSS.Load()
}

// mallocs returns the heap allocations the process made so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// startProfile starts a CPU profile written to path; the returned function
// stops it and closes the file.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close() // a profile for a person: a failed close shows as a profile pprof refuses
	}, nil
}

// writeHeapProfile writes the live heap to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	err = pprof.WriteHeapProfile(f)
	return errors.Join(err, f.Close())
}
