package ingress

import (
	"testing"

	"github.com/substatehq/substate/internal/fixtures"
)

// BenchmarkEventBridgeDecode measures what the ingress does with the body
// of one EventBridge delivery before publishing it: check it and read its
// id.
func BenchmarkEventBridgeDecode(b *testing.B) {
	body := fixtures.Provider("sfn-status-failed.json")
	in := &Ingress{}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := in.eventBridge(nil, body); err != nil {
			b.Fatal(err)
		}
	}
}
