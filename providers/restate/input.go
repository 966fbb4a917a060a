package restate

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// An invocation of a keyless service has no target_service_key, so the
// tenant rule restate:key cannot place it; the tenant is often in its
// input ({"tenantId":"acme"}), which sys_invocation does not hold. The
// poller reads the input of such an invocation once from its journal
// (the Input command, the first entry of sys_journal, kept while the
// invocation runs and for its journal_retention after) and attaches it to
// each of its rows as the member "input", for input: tenant rules.
const (
	// maxInputBytes bounds an input attached to a row; a larger one is
	// not attached (its invocation's rows keep a bounded size).
	maxInputBytes = 64 << 10
	// maxInputs bounds the inputs remembered; past it, an invocation's
	// input is read again for each of its rows.
	maxInputs = 10000
	// inputQueryBytes is the longest journal entry the input query reads:
	// an input of maxInputBytes with its headers.
	inputQueryBytes = maxInputBytes + 16<<10
)

// inputQuery returns the SQL that reads the Input entry of the journals
// of ids, leaving out the entries too large to attach.
func inputQuery(ids []string) string {
	return "SELECT id, entry_json FROM sys_journal WHERE id IN (" + sqlList(ids) +
		") AND index = 0 AND entry_type = 'Command: Input' AND raw_length <= " + strconv.Itoa(inputQueryBytes)
}

// readInputs reads, in batches of BatchSize, the inputs of the keyless
// invocations among rows that the poller does not remember, and remembers
// them: the input, or nil when the journal has none that can be attached
// (it is gone, too large, or not JSON). A query that fails leaves them
// unknown, to be read again with their next row; the rows go out without
// input meanwhile.
func (p *Poller) readInputs(ctx context.Context, rows []polledRow) {
	var ids []string
	for _, row := range rows {
		f := row.facts
		if row.err == nil && f.Keyless && validInvocationID(f.ID) && !slices.Contains(ids, f.ID) {
			if _, known := p.inputs[f.ID]; !known {
				ids = append(ids, f.ID)
			}
		}
	}
	for batch := range slices.Chunk(ids, p.BatchSize) {
		if err := p.pacer.Wait(ctx, 1); err != nil {
			return
		}
		entries, err := p.Admin.Query(ctx, inputQuery(batch))
		if err != nil {
			p.logger().Warn("cannot read the input of keyless restate invocations; their rows go out without it", "invocations", len(batch), "err", err)
			continue
		}
		found := map[string]json.RawMessage{}
		for _, e := range entries {
			if id, input := inputOf(e); id != "" {
				found[id] = input
			}
		}
		for _, id := range batch {
			if len(p.inputs) < maxInputs {
				p.inputs[id] = found[id]
			}
		}
	}
}

// inputOf returns the invocation id and the input of a sys_journal Input
// entry: its payload (bytes, written as a JSON array of numbers in
// entry_json) when that is UTF-8 JSON of at most maxInputBytes, else nil.
func inputOf(entry json.RawMessage) (string, json.RawMessage) {
	var e struct {
		ID        string `json:"id"`
		EntryJSON string `json:"entry_json"`
	}
	if json.Unmarshal(entry, &e) != nil || e.ID == "" {
		return "", nil
	}
	var cmd struct {
		Command struct {
			Input *struct {
				Payload []byte `json:"payload"`
			} `json:"Input"`
		} `json:"Command"`
	}
	if json.Unmarshal([]byte(e.EntryJSON), &cmd) != nil || cmd.Command.Input == nil {
		return e.ID, nil
	}
	payload := bytes.TrimSpace(cmd.Command.Input.Payload)
	if len(payload) == 0 || len(payload) > maxInputBytes || !utf8.Valid(payload) || !json.Valid(payload) {
		return e.ID, nil
	}
	return e.ID, payload
}

// withInput returns the row of a keyless invocation with the input the
// poller remembers for it as the member "input"; other rows, and rows of
// an invocation without a known input, as they are.
func (p *Poller) withInput(f rowFacts, row json.RawMessage) json.RawMessage {
	input := p.inputs[f.ID]
	trimmed := bytes.TrimSpace(row)
	if !f.Keyless || input == nil || len(trimmed) < 2 || trimmed[len(trimmed)-1] != '}' {
		return row
	}
	out := bytes.Clone(trimmed[:len(trimmed)-1])
	out = append(out, `,"input":`...)
	out = append(out, input...)
	return append(out, '}')
}
