package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The groups scenario builds its view, asks every query over HTTP and
// reports what each matched and read; it prints figures, and no figure is
// judged here.
func TestGroupsScenario(t *testing.T) {
	b := &benchRun{Config: &Config{Groups: 3000}, root: t.TempDir()}
	rep, err := b.groups(context.Background(), func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Queries) != len(groupQueries) || rep.Fingerprints < 50 {
		t.Fatalf("%d queries, %d fingerprints: %+v", len(rep.Queries), rep.Fingerprints, rep)
	}
	for i, q := range rep.Queries {
		walk := strings.Contains(q.Query, "fingerprint=") || strings.Contains(q.Query, "tenantPrefix=")
		switch {
		case q.Latency.Samples != groupRequests:
			t.Errorf("%s: %d samples", q.Query, q.Latency.Samples)
		case q.Total == 0 || q.Groups == 0:
			t.Errorf("%s matched nothing: %+v", q.Query, q)
		case walk != (q.Scanned > 0):
			t.Errorf("%s read %d tenants", q.Query, q.Scanned)
		case i == 0 && q.Total != 3000:
			t.Errorf("%s: %d tenants, want every one", q.Query, q.Total)
		}
	}
	var out bytes.Buffer
	rep.print(&out)
	if !strings.Contains(out.String(), "groups: 3000 tenants") || !strings.Contains(out.String(), "by=fingerprint&provider=restate") ||
		!strings.Contains(out.String(), "not judged") {
		t.Errorf("report:\n%s", out.String())
	}
}
