package bus

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Identity names one kind of client of the embedded NATS server. Each has
// its own nkey and its own permissions (see Permissions).
type Identity string

// The identities of the embedded server.
const (
	// Worker is substate itself: its streams, consumers and the engine.
	Worker Identity = "worker"
	// Tasks is a task service of the built-in engine: it may only answer
	// requests on substate.tasks.>.
	Tasks Identity = "tasks"
	// Subscriber is a downstream reader of the canonical events and the
	// change feed: it may read, never publish on substate's subjects or
	// administer its streams.
	Subscriber Identity = "subscriber"
)

// Identities lists every identity, in the order they are described.
var Identities = []Identity{Worker, Tasks, Subscriber}

// SubscriberInboxPrefix is the inbox prefix a Subscriber connects with
// (nats.CustomInboxPrefix): replies to its JetStream API requests and
// messages of its pull consumers arrive there, apart from the worker's
// inboxes, which carry raw evidence and task results.
const SubscriberInboxPrefix = "_INBOX_subscriber"

// seedSuffix is the file name suffix of a seed file: "<identity>.nk".
const seedSuffix = ".nk"

// Credentials are the nkey seed files of the embedded server's identities,
// one file per identity in Dir, each holding one user seed ("SU…").
//
// nkeys rather than passwords: the server keeps only public keys, a client
// proves it holds the seed by signing a nonce, so nothing secret crosses
// the wire even without TLS, and a seed file is what nats.go
// (nats.NkeyOptionFromSeed) and the nats CLI (--nkey) read.
type Credentials struct {
	Dir string
}

// EnsureCredentials returns the credentials in dir, creating the directory
// (mode 0700) and a seed file (mode 0600) for each identity that has none.
// An existing seed file that others than its owner may read is refused:
// whoever reads it is that identity.
func EnsureCredentials(dir string) (Credentials, error) {
	c := Credentials{Dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return c, fmt.Errorf("create nats credentials dir: %w", err)
	}
	for _, id := range Identities {
		if err := c.ensure(id); err != nil {
			return c, err
		}
	}
	return c, nil
}

// SeedFile returns the path of an identity's seed file.
func (c Credentials) SeedFile(id Identity) string {
	return filepath.Join(c.Dir, string(id)+seedSuffix)
}

// PublicKey returns the public nkey ("U…") of an identity.
func (c Credentials) PublicKey(id Identity) (string, error) {
	kp, err := c.keyPair(id)
	if err != nil {
		return "", err
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// Options returns the nats.go options that connect as id: its nkey and,
// for a Subscriber, its inbox prefix.
func (c Credentials) Options(id Identity) ([]nats.Option, error) {
	opt, err := nats.NkeyOptionFromSeed(c.SeedFile(id))
	if err != nil {
		return nil, fmt.Errorf("read nats %s credentials: %w", id, err)
	}
	opts := []nats.Option{opt}
	if id == Subscriber {
		opts = append(opts, nats.CustomInboxPrefix(SubscriberInboxPrefix))
	}
	return opts, nil
}

func (c Credentials) keyPair(id Identity) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(c.SeedFile(id))
	if err != nil {
		return nil, fmt.Errorf("read nats %s credentials: %w", id, err)
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return nil, fmt.Errorf("read nats %s credentials %s: %w", id, c.SeedFile(id), err)
	}
	return kp, nil
}

// ensure creates the seed file of id unless it exists, and checks it.
func (c Credentials) ensure(id Identity) error {
	path := c.SeedFile(id)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return writeSeed(path)
	case err != nil:
		return fmt.Errorf("nats %s credentials: %w", id, err)
	case runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("nats %s credentials %s may be read by others (mode %04o): chmod 600 %s", id, path, fi.Mode().Perm(), path)
	}
	kp, err := c.keyPair(id)
	if err != nil {
		return err
	}
	kp.Wipe()
	return nil
}

// writeSeed writes a new user seed to path, through a temporary file so a
// crash never leaves half a seed.
func writeSeed(path string) error {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return fmt.Errorf("create nkey: %w", err)
	}
	defer kp.Wipe()
	seed, err := kp.Seed()
	if err != nil {
		return fmt.Errorf("create nkey: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".seed-*")
	if err != nil {
		return fmt.Errorf("write nats credentials: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(append(seed, '\n'))
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write nats credentials %s: %w", path, err)
	}
	return nil
}

// Hint returns log attributes that tell how other programs connect: the
// seed files of task services and subscribers and the nats.go options
// that read them.
func (c Credentials) Hint() []any {
	return []any{
		"task_services", c.SeedFile(Tasks), "subscribers", c.SeedFile(Subscriber),
		"nats.go", fmt.Sprintf("nats.NkeyOptionFromSeed(file); subscribers also nats.CustomInboxPrefix(%q)", SubscriberInboxPrefix),
		"nats_cli", "--nkey file",
	}
}
