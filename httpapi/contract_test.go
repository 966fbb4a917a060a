package httpapi_test

import (
	"testing"

	"github.com/substatehq/substate/testkit/contracttest"
)

// TestMain checks every response the tests fetch from a substate route
// against contract/openapi.json; /metrics is a stand-in handler here.
func TestMain(m *testing.M) { contracttest.Main(m, "/metrics") }
