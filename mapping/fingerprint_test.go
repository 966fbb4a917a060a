package mapping_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/mapping"
)

const (
	sfn     = substate.ProviderStepFunctions
	restate = substate.ProviderRestate
	engine  = substate.ProviderEngine
)

func TestFingerprint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		provider substate.Provider
		typ, msg string
		want     string
	}{
		{"Lambda error in a JSON cause", sfn, "UpstreamUnavailable", "payment provider returned HTTP 503",
			"stepfunctions/upstreamunavailable/payment provider returned http <n>"},
		{"Lambda timeout", sfn, "States.Timeout", "Task timed out after 30.00 seconds",
			"stepfunctions/states.timeout/task timed out after <n> seconds"},
		{"Lambda log line", sfn, "States.TaskFailed", "2024-06-19T10:01:05.123Z 1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d Task timed out after 3.00 seconds",
			"stepfunctions/states.taskfailed/<time> <id> task timed out after <n> seconds"},
		{"execution ARN", sfn, "States.Runtime", "Execution arn:aws:states:us-east-1:123456789012:execution:provision:tenant-42 does not exist.",
			"stepfunctions/states.runtime/execution <arn> does not exist."},
		{"error name only", sfn, "States.Timeout", "States.Timeout", "stepfunctions/states.timeout/states.timeout"},
		{"Restate TypeScript failure", restate, "500", "downstream unavailable (attempt 2)",
			"restate/500/downstream unavailable (attempt <n>)"},
		{"Restate terminal error", restate, "402", "card declined: insufficient_funds",
			"restate/402/card declined: insufficient_funds"},
		{"Restate invocation id", restate, "500", "invocation inv_15QQc9x1S87U4ClHS47MkV9tT9WnzYV5FK not found",
			"restate/500/invocation <id> not found"},
		{"quoted values", engine, "SyntaxError", `Unexpected token 'x' in JSON at position 5`,
			"engine/syntaxerror/unexpected token <q> in json at position <n>"},
		{"apostrophes are not quotes", engine, "", `Can't reach "db-7" at 12:30:00+02:00, the pool's full`,
			"engine//can't reach <q> at <time>, the pool's full"},
		{"address and port", engine, "ServiceUnavailable", "connect ECONNREFUSED 10.0.3.17:5432",
			"engine/serviceunavailable/connect econnrefused <n>:<n>"},
		{"hex and ids", engine, "", "hash 0x7f3a2b and deadbeef0123 of user_12345 in ch_3MmlLrLkdIwHu7ix0snN0B15",
			"engine//hash <hex> and <hex> of <id> in <id>"},
		{"words with digits stay", engine, "", "sha256 of the s3 object took 1.5s, not 30s",
			"engine//sha256 of the s3 object took <n>s, not <n>s"},
		{"whitespace", engine, "  Timeout\tError ", "  lots   of\t\tspace\n\n ",
			"engine/timeout error/lots of space"},
		{"controls and bidi overrides", engine, "", "boom\x1b[31m red\u202eeulav\u200b!", "engine//boom [<n>m red eulav !"},
		{"slash in the type", engine, "a/b", "x", "engine/a_b/x"},
		{"no message", sfn, "States.Timeout", "", ""},
		{"blank message", restate, "500", " \n\t", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mapping.Fingerprint(tc.provider, tc.typ, tc.msg); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestFingerprintMapped checks the fingerprint the mapper gives the
// recorded provider payloads.
func TestFingerprintMapped(t *testing.T) {
	m := newMapper(t)
	for _, tc := range []struct {
		fixture string
		kind    substate.RawKind
		want    string
	}{
		{"sfn-status-failed.json", substate.RawEventBridge, "stepfunctions/upstreamunavailable/payment provider returned http <n>"},
		{"sfn-status-timed-out.json", substate.RawEventBridge, "stepfunctions/states.timeout/states.timeout"},
		{"sfn-status-running.json", substate.RawEventBridge, ""},
		{"restate-invocation-backing-off.json", substate.RawRestate, "restate/rt0007/downstream unavailable (attempt <n>)"},
		{"restate-invocation-paused.json", substate.RawRestate, "restate/rt0007/downstream unavailable (attempt <n>)"},
		{"restate-invocation-completed-failure.json", substate.RawRestate, "restate/402/card declined: insufficient_funds"},
		{"restate-invocation-completed-success.json", substate.RawRestate, ""},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			evs := mustMap(t, m, tc.kind, fixture(t, tc.fixture))
			for _, ev := range evs {
				if ev.ErrorFingerprint != tc.want {
					t.Errorf("got %q, want %q (message %q)", ev.ErrorFingerprint, tc.want, ev.ErrorMessage)
				}
				if want := mapping.Fingerprint(ev.Provider, ev.ErrorType, ev.ErrorMessage); ev.ErrorFingerprint != want {
					t.Errorf("event carries %q, its fields give %q", ev.ErrorFingerprint, want)
				}
			}
		})
	}
}

// TestFingerprintGroups checks that one fault gives one fingerprint
// whichever tenant, execution, attempt or time it hit, and that
// different faults give different ones.
func TestFingerprintGroups(t *testing.T) {
	faults := []func(i int) (substate.Provider, string, string){
		func(i int) (substate.Provider, string, string) {
			return sfn, "States.TaskFailed", fmt.Sprintf("%s START RequestId: %08x-5f60-4a7b-8c9d-%012x Task timed out after %d.00 seconds",
				substateTime(i), i*7919, i*104729, 3+i%5)
		},
		func(i int) (substate.Provider, string, string) {
			return sfn, "States.Runtime", fmt.Sprintf("Execution arn:aws:states:eu-west-1:%012d:execution:provision:tenant-%d already exists", 100000000000+i, i)
		},
		func(i int) (substate.Provider, string, string) {
			return restate, "500", fmt.Sprintf("downstream unavailable (attempt %d)", i%9+1)
		},
		func(i int) (substate.Provider, string, string) {
			return restate, "500", fmt.Sprintf("invocation inv_1%sx%d not found", strings.Repeat("aQ", 10), i)
		},
		func(i int) (substate.Provider, string, string) {
			return engine, "ServiceUnavailable", fmt.Sprintf("no responder for 'billing.charge' after %dms, request 0x%x", 250*i, i*31337)
		},
		func(i int) (substate.Provider, string, string) {
			return engine, "ValidationError", fmt.Sprintf(`field "email" of customer "cust-%d" is not an address`, i)
		},
		func(i int) (substate.Provider, string, string) {
			return engine, "ServiceUnavailable", fmt.Sprintf("connect ECONNREFUSED 10.0.%d.%d:5432", i%250, i%7)
		},
	}
	seen := map[string]int{}
	for f, fault := range faults {
		first := mapping.Fingerprint(fault(1))
		if first == "" {
			t.Fatalf("fault %d has no fingerprint", f)
		}
		for i := 2; i < 200; i++ {
			if got := mapping.Fingerprint(fault(i)); got != first {
				p, typ, msg := fault(i)
				t.Fatalf("fault %d, occurrence %d (%s %s %q): %q, the first gave %q", f, i, p, typ, msg, got, first)
			}
		}
		if g, ok := seen[first]; ok {
			t.Errorf("faults %d and %d share the fingerprint %q", g, f, first)
		}
		seen[first] = f
	}
}

func substateTime(i int) string {
	return fmt.Sprintf("2026-%02d-%02dT%02d:%02d:%02d.%03dZ", i%12+1, i%28+1, i%24, i%60, (i*7)%60, i%1000)
}

// FuzzFingerprint checks what holds for every message: Fingerprint never
// panics, is at most MaxFingerprint bytes of valid, lower-case UTF-8 with
// single spaces and no other whitespace or control character, is "" exactly
// when the message is blank, and starts with the provider and the type;
// templating a template changes nothing; and a number, UUID, hex string,
// timestamp or quoted value standing alone between spaces can be swapped
// for another of its kind without changing the template.
func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{
		"payment provider returned HTTP 503", "Task timed out after 30.00 seconds",
		"[500 Internal] downstream unavailable (attempt 2)", `Table "x" can't be 'read'`,
		"arn:aws:states:us-east-1:123456789012:execution:sm:x.", "2024-06-19T10:01:05.123+02:00",
		"5'a' ", "1.5abcdef12 0xff", "x" + strings.Repeat("ab1", 100), "\x00\xff\u00a0K",
	} {
		f.Add(s, "Type", s, uint64(len(s)), uint64(7))
	}
	f.Fuzz(func(t *testing.T, msg, typ, rest string, x, y uint64) {
		got := mapping.Fingerprint(sfn, typ, msg)
		checkFingerprint(t, got, typ, msg)
		tpl := mapping.Template(msg)
		checkTemplate(t, tpl)
		if again := mapping.Template(tpl); again != tpl {
			t.Fatalf("template of %q is %q, its template %q", msg, tpl, again)
		}
		for _, pair := range swaps(x, y) {
			a, b := mapping.Template(msg+" "+pair[0]+" "+rest), mapping.Template(msg+" "+pair[1]+" "+rest)
			if a != b {
				t.Fatalf("%q and %q between %q and %q: %q, %q", pair[0], pair[1], msg, rest, a, b)
			}
		}
	})
}

func checkFingerprint(t *testing.T, got, typ, msg string) {
	t.Helper()
	switch {
	case strings.TrimSpace(msg) == "":
		if got != "" {
			t.Fatalf("blank message %q has fingerprint %q", msg, got)
		}
		return
	case len(got) > mapping.MaxFingerprint || !utf8.ValidString(got):
		t.Fatalf("fingerprint %q: %d bytes or not UTF-8", got, len(got))
	case !strings.HasPrefix(got, "stepfunctions/") || strings.Count(got, "/") < 2:
		t.Fatalf("fingerprint %q of type %q has no provider/type/ head", got, typ)
	}
}

func checkTemplate(t *testing.T, tpl string) {
	t.Helper()
	switch {
	case len(tpl) > mapping.MaxFingerprint || !utf8.ValidString(tpl):
		t.Fatalf("template %q: %d bytes or not UTF-8", tpl, len(tpl))
	case strings.ToLower(tpl) != tpl:
		t.Fatalf("template %q is not lower-case", tpl)
	case strings.TrimSpace(tpl) != tpl || strings.Contains(tpl, "  "):
		t.Fatalf("template %q has spaces at an end or two in a row", tpl)
	case strings.IndexFunc(tpl, func(r rune) bool {
		return r != ' ' && (unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r))
	}) >= 0:
		t.Fatalf("template %q has whitespace, a control or a format character", tpl)
	}
}

// swaps are pairs of tokens of one kind that a template must not tell
// apart, made from two numbers.
func swaps(x, y uint64) [][2]string {
	uuid := func(n uint64) string {
		return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(n), uint16(n>>8), n%4096, n>>52, n&(1<<48-1))
	}
	ts := func(n uint64) string {
		return fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d.%dZ", 1970+n%100, n%12+1, n%28+1, n%24, n%60, n/7%60, n%1000)
	}
	q := func(n uint64) string { b, _ := json.Marshal(strconv.FormatUint(n, 36)); return string(b) }
	return [][2]string{
		{strconv.FormatUint(x, 10), strconv.FormatUint(y, 10)},
		{uuid(x), uuid(y)},
		{"0x" + strconv.FormatUint(x, 16), "0x" + strconv.FormatUint(y, 16)},
		{ts(x), ts(y)},
		{q(x), q(y)},
		{"arn:aws:states:us-east-1:" + strconv.FormatUint(x, 10) + ":execution:sm:t-" + strconv.FormatUint(y, 10),
			"arn:aws:states:us-east-1:" + strconv.FormatUint(y, 10) + ":execution:sm:t-" + strconv.FormatUint(x, 10)},
	}
}

func BenchmarkFingerprint(b *testing.B) {
	msg := "2024-06-19T10:01:05.123Z 1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d payment provider returned HTTP 503 for 'charge-42'"
	b.ReportAllocs()
	for b.Loop() {
		mapping.Fingerprint(sfn, "States.TaskFailed", msg)
	}
}
