package httpapi

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/substatehq/substate"
)

// Scope is what a read-API key may do. Scopes nest: admin includes
// read:raw, which includes read.
type Scope string

// The scopes, least first.
const (
	// ScopeRead reads the tenant views, lists and counts, and history
	// without the providers' evidence.
	ScopeRead Scope = "read"
	// ScopeReadRaw also reads the providers' raw evidence, redacted.
	ScopeReadRaw Scope = "read:raw"
	// ScopeAdmin also reads unredacted evidence and dead-letter payloads,
	// and acts on executions.
	ScopeAdmin Scope = "admin"
)

var scopeRank = map[Scope]int{ScopeRead: 1, ScopeReadRaw: 2, ScopeAdmin: 3}

// ParseScope reads one scope name.
func ParseScope(s string) (Scope, error) {
	if _, ok := scopeRank[Scope(s)]; !ok {
		return "", substate.Errorf(substate.EINVALID, "scope %q: want read, read:raw or admin", s)
	}
	return Scope(s), nil
}

// Includes reports whether s grants want.
func (s Scope) Includes(want Scope) bool {
	return scopeRank[s] >= scopeRank[want] && scopeRank[want] > 0
}

// Key is one configured API key. Only the SHA-256 of the key is kept: a
// key is 32 random bytes or more, so its hash cannot be reversed, and a
// key file or environment that leaks does not leak the keys.
type Key struct {
	Name         string   // who holds it, for logs and messages
	Hash         [32]byte // SHA-256 of the key as sent
	Scope        Scope    // the widest scope it lists
	TenantPrefix string   // only tenants whose id starts with it; "" for every tenant
}

// HashKey returns the SHA-256 of a key, as key files hold it.
func HashKey(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// ParseKeys reads key lines: one key per line (or separated by ";", for an
// environment variable), blank lines and "#" comments ignored, each line
// four fields separated by white space:
//
//	NAME  SCOPES  TENANT-PREFIX  sha256:HEX
//
// SCOPES is a comma-separated list of read, read:raw and admin (the widest
// counts); TENANT-PREFIX is "*" for every tenant; HEX is the SHA-256 of
// the key, 64 hexadecimal digits (printf %s "$KEY" | sha256sum). Names are
// unique.
func ParseKeys(text string) ([]Key, error) {
	var keys []Key
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(text, ";", "\n")))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseKey(line)
		if err != nil {
			return nil, fmt.Errorf("key line %d: %w", n, err)
		}
		if seen[k.Name] {
			return nil, substate.Errorf(substate.EINVALID, "key line %d: name %q is used twice", n, k.Name)
		}
		seen[k.Name] = true
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "read keys: %v", err)
	}
	return keys, nil
}

func parseKey(line string) (Key, error) {
	f := strings.Fields(line)
	if len(f) != 4 {
		return Key{}, substate.Errorf(substate.EINVALID, "want NAME SCOPES TENANT-PREFIX sha256:HEX, got %d fields", len(f))
	}
	k := Key{Name: f[0]}
	for _, s := range strings.Split(f[1], ",") {
		sc, err := ParseScope(s)
		if err != nil {
			return Key{}, err
		}
		if scopeRank[sc] > scopeRank[k.Scope] {
			k.Scope = sc
		}
	}
	if f[2] != "*" {
		k.TenantPrefix = f[2]
	}
	hexHash, ok := strings.CutPrefix(f[3], "sha256:")
	b, err := hex.DecodeString(hexHash)
	if !ok || err != nil || len(b) != sha256.Size {
		return Key{}, substate.Errorf(substate.EINVALID, "key %q: hash must be sha256: and 64 hexadecimal digits, the SHA-256 of the key", k.Name)
	}
	copy(k.Hash[:], b)
	return k, nil
}

// KeySet is an immutable set of keys.
type KeySet struct {
	keys []Key
}

// NewKeySet returns a set of keys.
func NewKeySet(keys []Key) *KeySet { return &KeySet{keys: append([]Key(nil), keys...)} }

// Len returns how many keys the set holds.
func (s *KeySet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// Lookup returns the key presented, comparing its hash with every key's in
// constant time, so the answer's timing says nothing about which key is
// close to it.
func (s *KeySet) Lookup(presented string) (Key, bool) {
	if s == nil {
		return Key{}, false
	}
	h := HashKey(presented)
	found := -1
	for i := range s.keys {
		if subtle.ConstantTimeCompare(h[:], s.keys[i].Hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Key{}, false
	}
	return s.keys[found], true
}

// Keys are the read API's keys, from a file and from text (a flag or an
// environment variable), reloaded on demand: Load replaces the set at once
// or, when the new configuration is invalid, keeps the old one.
type Keys struct {
	File string // key file; "" for none
	Text string // key lines; "" for none

	set  atomic.Pointer[KeySet]
	file atomic.Pointer[[]byte] // the file's content last loaded
}

// Load reads the file and the text and replaces the key set.
func (k *Keys) Load() error {
	var data []byte
	if k.File != "" {
		b, err := os.ReadFile(k.File)
		if err != nil {
			return fmt.Errorf("read api keys: %w", err)
		}
		data = b
	}
	keys, err := ParseKeys(string(data) + "\n" + k.Text)
	if err != nil {
		return fmt.Errorf("api keys %s: %w", k.source(), err)
	}
	k.set.Store(NewKeySet(keys))
	k.file.Store(&data)
	return nil
}

// Set returns the keys in force.
func (k *Keys) Set() *KeySet {
	if k == nil {
		return nil
	}
	return k.set.Load()
}

// fileChanged reports whether the file's content differs from what was
// last loaded.
func (k *Keys) fileChanged() bool {
	if k.File == "" {
		return false
	}
	b, err := os.ReadFile(k.File)
	last := k.file.Load()
	return err != nil || last == nil || !bytes.Equal(b, *last)
}

func (k *Keys) source() string {
	switch {
	case k.File != "" && k.Text != "":
		return k.File + " and the environment"
	case k.File != "":
		return k.File
	}
	return "from the environment"
}
