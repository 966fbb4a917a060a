package e2e_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/substatehq/substate/contract"
	"github.com/substatehq/substate/testkit/workertest"
)

// TestContractServed asks a running worker for its contracts and for a
// response of every documented GET route (TestMain checks each against
// contract/openapi.json), after a tenant was ingested.
func TestContractServed(t *testing.T) {
	w := workertest.Start(t)
	if err := workertest.DeliverRow(w.HTTP.URL(), "contract-0", workertest.RestateRow("contract", 0)); err != nil {
		t.Fatal(err)
	}
	workertest.Eventually(t, func() string {
		if code, _ := workertest.Get(t, w.HTTP.URL()+"/v1/tenants/contract"); code != http.StatusOK {
			return fmt.Sprintf("tenant not in the view yet: %d", code)
		}
		return ""
	})
	for _, doc := range []string{contract.OpenAPIFile, contract.AsyncAPIFile} {
		want, _ := contract.Document(doc)
		resp, err := http.Get(w.HTTP.URL() + "/v1/" + doc)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("GET /v1/%s: %d, %d bytes; want the %d bytes of contract/%s", doc, resp.StatusCode, len(got), len(want), doc)
		}
	}
	for path, want := range map[string]int{
		"/v1/tenants/contract": 200, "/v1/tenants/nobody": 404, "/v1/tenants?subState=running": 200, "/v1/tenants?subState=x": 400,
		"/v1/tenants/contract/history": 200, "/v1/view/checkpoint": 200, "/v1/schemas/event.json": 200,
		"/v1/schemas/change.json": 200, "/v1/schemas/x.json": 404, "/healthz": 200, "/readyz": 200, "/metrics": 200,
	} {
		if code, body := workertest.Get(t, w.HTTP.URL()+path); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
}
