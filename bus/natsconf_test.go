package bus_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/substatehq/substate/bus"
)

var update = flag.Bool("update", false, "rewrite deploy/nats/auth.conf from the permissions in code")

// authConf is the permission model for a NATS cluster, written from
// bus.Permissions; the projector instances are the pods of
// deploy/kubernetes/projector.yaml and one more.
const authConf = "../deploy/nats/auth.conf"

var clusterInstances = []string{"substate-projector-0", "substate-projector-1", "substate-projector-2"}

// TestDeployAuthConfig checks that deploy/nats/auth.conf is the
// permission model of the embedded server (run with -update to rewrite
// it), and that nats-server parses it into exactly those permissions.
func TestDeployAuthConfig(t *testing.T) {
	consumers := bus.Consumers{Worker: bus.WorkerConsumers(clusterInstances...)}
	want := renderAuthConf(consumers)
	if *update {
		if err := os.WriteFile(authConf, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(authConf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./bus -run TestDeployAuthConfig -update", authConf)
	}

	keys := map[bus.Identity]string{}
	for _, id := range bus.Identities {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		keys[id], _ = kp.PublicKey()
		t.Setenv(envName(id), keys[id])
	}
	opts, err := server.ProcessConfigFile(authConf)
	if err != nil {
		t.Fatalf("nats-server does not parse %s: %v", authConf, err)
	}
	if len(opts.Nkeys) != len(bus.Identities) {
		t.Fatalf("%d nkey users, want %d", len(opts.Nkeys), len(bus.Identities))
	}
	for _, u := range opts.Nkeys {
		id := identityOf(keys, u.Nkey)
		if want := bus.Permissions(id, consumers); !reflect.DeepEqual(u.Permissions, want) {
			t.Errorf("%s: parsed permissions\n%+v\nwant\n%+v", id, describe(u.Permissions), describe(want))
		}
		if u.Account == nil || u.Account.Name != "SUBSTATE" {
			t.Errorf("%s: account %v, want SUBSTATE", id, u.Account)
		}
	}
}

func identityOf(keys map[bus.Identity]string, nkey string) bus.Identity {
	for id, k := range keys {
		if k == nkey {
			return id
		}
	}
	return ""
}

func envName(id bus.Identity) string { return "SUBSTATE_" + strings.ToUpper(string(id)) + "_NKEY" }

// renderAuthConf writes the permissions of every identity as a NATS
// server configuration: account SUBSTATE with JetStream, one nkey user per
// identity, its public key from the environment.
func renderAuthConf(consumers bus.Consumers) []byte {
	var b bytes.Buffer
	b.WriteString(`# substate's permission model for an existing NATS server or cluster:
# the same identities and permissions as the embedded server (generated
# from the code by go test ./bus -run TestDeployAuthConfig -update; do not
# edit by hand). See docs/security.md.
#
# Each identity is an nkey user. Create a seed per identity, give the seed
# to its program and the public key to the servers:
#
#   nk -gen user > worker.nk;     nk -inkey worker.nk -pubout
#   nk -gen user > tasks.nk;      nk -inkey tasks.nk -pubout
#   nk -gen user > subscriber.nk; nk -inkey subscriber.nk -pubout
#
# The servers read the public keys from their environment
# (SUBSTATE_WORKER_NKEY, SUBSTATE_TASKS_NKEY, SUBSTATE_SUBSCRIBER_NKEY), or
# define them as variables above the include. substate connects with
# --nats-nkey worker.nk; task services and subscribers with
# nats.NkeyOptionFromSeed, subscribers also with
# nats.CustomInboxPrefix("_INBOX_subscriber").
#
# Subscribers may not touch the worker's durable consumers, which are denied
# by name: substate-eventbridge, substate-projector, and
# substate-projector-<instance> for the --instance of each projector (the
# pods of deploy/kubernetes/projector.yaml). Add a projector's name to every
# deny list before you run more replicas.
#
# Subscribers may create consumers only under the names listed for them
# (subscriber-1 to subscriber-4 here, as --subscriber-consumers on the
# embedded server): at most that many of theirs exist on a stream, so they
# never use up its consumers. Replace them with your services' names, one
# line per rule each.

accounts {
  SUBSTATE {
    jetstream: enabled
    users: [
`)
	for _, id := range bus.Identities {
		fmt.Fprintf(&b, "      # %s\n      {\n        nkey: $%s\n        permissions: {\n", id, envName(id))
		p := bus.Permissions(id, consumers)
		if p.Publish != nil && len(p.Publish.Allow) > 0 {
			writePerm(&b, "publish", p.Publish)
		}
		writePerm(&b, "subscribe", p.Subscribe)
		if r := p.Response; r != nil {
			fmt.Fprintf(&b, "          # the one reply each request asks for, within %s\n", r.Expires)
			fmt.Fprintf(&b, "          allow_responses: { max: %d, expires: %q }\n", r.MaxMsgs, r.Expires.String())
		}
		b.WriteString("        }\n      }\n")
	}
	b.WriteString("    ]\n  }\n}\n")
	return b.Bytes()
}

func writePerm(b *bytes.Buffer, name string, p *server.SubjectPermission) {
	fmt.Fprintf(b, "          %s: {\n", name)
	for _, list := range []struct {
		name     string
		subjects []string
	}{{"allow", p.Allow}, {"deny", p.Deny}} {
		if len(list.subjects) == 0 {
			continue
		}
		fmt.Fprintf(b, "            %s: [\n", list.name)
		for _, s := range list.subjects {
			fmt.Fprintf(b, "              %q\n", s)
		}
		b.WriteString("            ]\n")
	}
	b.WriteString("          }\n")
}

func describe(p *server.Permissions) string {
	if p == nil {
		return "<nil>"
	}
	s := ""
	if p.Publish != nil {
		s += fmt.Sprintf("publish allow %q deny %q; ", p.Publish.Allow, p.Publish.Deny)
	}
	if p.Subscribe != nil {
		s += fmt.Sprintf("subscribe allow %q deny %q; ", p.Subscribe.Allow, p.Subscribe.Deny)
	}
	if p.Response != nil {
		s += fmt.Sprintf("responses %+v", *p.Response)
	}
	return s
}
