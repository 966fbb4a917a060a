package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
)

// keyLine returns the key file line of a key.
func keyLine(name, scopes, prefix, key string) string {
	h := sha256.Sum256([]byte(key))
	return name + " " + scopes + " " + prefix + " sha256:" + hex.EncodeToString(h[:])
}

func TestParseKeys(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		text := "# operators\n" + keyLine("ops", "admin", "*", "k-ops") + "\n\n" +
			"  " + keyLine("portal", "read,read:raw", "acme-", "k-portal") + " ; " + keyLine("dash", "read", "*", "k-dash")
		keys, err := httpapi.ParseKeys(text)
		if err != nil {
			t.Fatal(err)
		}
		want := []httpapi.Key{
			{Name: "ops", Scope: httpapi.ScopeAdmin, Hash: httpapi.HashKey("k-ops")},
			{Name: "portal", Scope: httpapi.ScopeReadRaw, TenantPrefix: "acme-", Hash: httpapi.HashKey("k-portal")},
			{Name: "dash", Scope: httpapi.ScopeRead, Hash: httpapi.HashKey("k-dash")},
		}
		if len(keys) != len(want) {
			t.Fatalf("%d keys, want %d", len(keys), len(want))
		}
		for i := range want {
			if keys[i] != want[i] {
				t.Errorf("key %d = %+v, want %+v", i, keys[i], want[i])
			}
		}
		set := httpapi.NewKeySet(keys)
		if k, ok := set.Lookup("k-portal"); !ok || k.Name != "portal" {
			t.Errorf("lookup k-portal: %+v %v", k, ok)
		}
		for _, wrong := range []string{"", "k-port", "k-portal ", "K-PORTAL"} {
			if _, ok := set.Lookup(wrong); ok {
				t.Errorf("lookup %q found a key", wrong)
			}
		}
	})
	for _, tc := range []struct{ name, text string }{
		{"TooFewFields", "ops admin sha256:00"},
		{"TooManyFields", keyLine("ops", "admin", "*", "k") + " extra"},
		{"UnknownScope", keyLine("ops", "write", "*", "k")},
		{"EmptyScope", keyLine("ops", "read,", "*", "k")},
		{"PlainKey", "ops admin * the-key-itself"},
		{"ShortHash", "ops admin * sha256:abcd"},
		{"OtherHash", "ops admin * md5:" + strings.Repeat("0", 64)},
		{"NotHex", "ops admin * sha256:" + strings.Repeat("z", 64)},
		{"DuplicateName", keyLine("ops", "admin", "*", "a") + "\n" + keyLine("ops", "read", "*", "b")},
	} {
		t.Run("Err"+tc.name, func(t *testing.T) {
			if _, err := httpapi.ParseKeys(tc.text); substate.ErrorCode(err) != substate.EINVALID {
				t.Fatalf("err %v, want EINVALID", err)
			}
		})
	}
}

func TestScopeIncludes(t *testing.T) {
	order := []httpapi.Scope{httpapi.ScopeRead, httpapi.ScopeReadRaw, httpapi.ScopeAdmin}
	for i, have := range order {
		for j, want := range order {
			if got := have.Includes(want); got != (i >= j) {
				t.Errorf("%s includes %s = %v", have, want, got)
			}
		}
		if have.Includes("") || have.Includes("write") || httpapi.Scope("").Includes(have) {
			t.Errorf("%s: an unknown scope is included or includes", have)
		}
	}
}

// FuzzParseKeys: any text either fails with EINVALID or gives keys whose
// lines parse back to the same keys.
func FuzzParseKeys(f *testing.F) {
	f.Add(keyLine("ops", "admin", "*", "k") + ";" + keyLine("p", "read", "acme-", "x"))
	f.Add("# nothing\n\n")
	f.Add("a read,read:raw,admin * sha256:" + strings.Repeat("a", 64))
	f.Fuzz(func(t *testing.T, text string) {
		keys, err := httpapi.ParseKeys(text)
		if err != nil {
			if substate.ErrorCode(err) != substate.EINVALID {
				t.Fatalf("error %v is not EINVALID", err)
			}
			return
		}
		var lines []string
		for _, k := range keys {
			prefix := k.TenantPrefix
			if prefix == "" {
				prefix = "*"
			}
			lines = append(lines, k.Name+" "+string(k.Scope)+" "+prefix+" sha256:"+hex.EncodeToString(k.Hash[:]))
		}
		again, err := httpapi.ParseKeys(strings.Join(lines, "\n"))
		if err != nil || len(again) != len(keys) {
			t.Fatalf("keys %+v do not parse back: %v", keys, err)
		}
		for i := range keys {
			if again[i] != keys[i] {
				t.Fatalf("key %+v parsed back as %+v", keys[i], again[i])
			}
		}
	})
}
