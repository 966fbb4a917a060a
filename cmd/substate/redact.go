package main

import (
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/worker"
)

// RedactFlags choose how a command shows the providers' execution input
// and output it reads from the streams: redacted as the read API shows
// them to read:raw callers, unless asked otherwise.
type RedactFlags struct {
	Unredacted  bool     `help:"Show the providers' execution input and output as received, secrets included, instead of redacted."`
	RedactAllow []string `name:"redact-allow" sep:"none" placeholder:"JSONPATH" help:"Field of the execution input and output to show (RFC 9535 JSONPath), repeatable; the tenant rule's fields are always shown."`
	TenantRule  []string `sep:"none" placeholder:"RULE" help:"The worker's tenant rules (its --tenant-rule): their input fields are shown."`
}

// redactor returns what redacts a raw payload for output: nil with
// --unredacted.
func (f RedactFlags) redactor() (func([]byte) []byte, error) {
	if f.Unredacted {
		return nil, nil
	}
	p, err := worker.RedactionPolicy(f.TenantRule, f.RedactAllow)
	if err != nil {
		return nil, err
	}
	return func(b []byte) []byte { return httpapi.RedactEvidence(b, p) }, nil
}
