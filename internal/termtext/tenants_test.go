package termtext

import (
	"bytes"
	"testing"

	"github.com/substatehq/substate"
)

func TestWriteTenants(t *testing.T) {
	var b bytes.Buffer
	views := []substate.TenantView{
		{TenantID: "acme", WorkflowSubState: substate.StateBackingOff, WorkflowRetryCount: 2, WorkflowErrorMessage: "dns\nprovider down"},
		{TenantID: "globex"},
	}
	if err := WriteTenants(&b, views); err != nil {
		t.Fatal(err)
	}
	want := "TENANT  SUB-STATE    VERB  STEP  RETRIES  PROVIDER  EXECUTION  UPDATED  ERROR\n" +
		"acme    backing-off  -     -     2        -         -          -        dns provider down\n" +
		"globex  -            -     -     0        -         -          -        -\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
