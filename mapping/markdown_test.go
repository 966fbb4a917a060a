package mapping_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/substatehq/substate/mapping"
)

// TestDocUpToDate fails when docs/state-mapping.md is not what go generate
// writes from the tables.
func TestDocUpToDate(t *testing.T) {
	path := filepath.Join("..", "docs", "state-mapping.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go generate ./mapping)", err)
	}
	if want := mapping.Markdown(); !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go generate ./mapping and commit it", path)
	}
}

// TestDocListsEveryRow checks that every table row appears in the document.
func TestDocListsEveryRow(t *testing.T) {
	doc := mapping.Markdown()
	for _, r := range mapping.Table() {
		cell := []byte("| `" + r.State + "` |")
		line := []byte("`" + string(r.SubState) + "` | `" + string(r.Verb) + "` | `" + string(r.Status) + "`")
		if !bytes.Contains(doc, cell) || !bytes.Contains(doc, line) {
			t.Errorf("document misses %s %s → %s", r.Provider, r.State, r.SubState)
		}
	}
	for _, s := range []string{"## Unknown states", "## Canonical sub-states"} {
		if !bytes.Contains(doc, []byte(s)) {
			t.Errorf("document misses section %q", s)
		}
	}
}
