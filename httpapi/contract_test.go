package httpapi_test

import (
	"testing"

	"github.com/substatehq/substate/testkit/contracttest"
)

// TestMain checks every response the tests fetch from a substate route
// against contract/openapi.json; /metrics and the console's routes are
// stand-in handlers here.
func TestMain(m *testing.M) {
	contracttest.Main(m, "/metrics", "/console/api/overview", "/console/api/deadletters", "/console/api/changes")
}
