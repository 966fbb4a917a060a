package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// StreamBlocks returns the message block files of stream in a JetStream
// store directory (the server's StoreDir) in block order: the file store
// keeps a stream's messages in <StoreDir>/jetstream/<account>/streams/
// <stream>/msgs/<n>.blk, about 8 MB each by default, beside an index.db of
// the stream's state. A change to a block matters only to a server that
// starts after it: a running one serves what it has loaded.
func StreamBlocks(storeDir, stream string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(storeDir, "jetstream", "*", "streams", stream, "msgs", "*.blk"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no message blocks of stream %s under %s", stream, storeDir)
	}
	slices.SortFunc(files, func(a, b string) int { return blockIndex(a) - blockIndex(b) })
	return files, nil
}

// blockIndex returns n of a block file n.blk.
func blockIndex(path string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(path), ".blk"))
	return n
}

// CorruptStreamBlock writes n bytes of garbage into the middle of the
// block-th message block of stream (0 is the first) and returns the block
// file and the offset written at. Stop the server first.
func CorruptStreamBlock(storeDir, stream string, block, n int) (string, int64, error) {
	blocks, err := StreamBlocks(storeDir, stream)
	if err != nil {
		return "", 0, err
	}
	if block < 0 || block >= len(blocks) {
		return "", 0, fmt.Errorf("stream %s has %d blocks, no block %d", stream, len(blocks), block)
	}
	st, err := os.Stat(blocks[block])
	if err != nil {
		return "", 0, err
	}
	off := max(st.Size()/2-int64(n)/2, 0)
	return blocks[block], off, CorruptFile(blocks[block], off, n)
}

// CorruptFile overwrites n bytes of the file at path from offset with
// garbage (seeded by the offset) and fsyncs it.
func CorruptFile(path string, offset int64, n int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(Garbage(n, uint64(offset)), offset); err != nil {
		return fmt.Errorf("corrupt %s at %d: %w", path, offset, err)
	}
	return f.Sync()
}
