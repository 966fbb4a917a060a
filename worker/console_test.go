package worker_test

import (
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/worker"
)

func TestRestateUIURL(t *testing.T) {
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"", true},
		{"http://restate:9070/ui/invocations/{invocationId}", true},
		{"https://restate.example.com/ui/invocations?id={invocationId}", true},
		{"http://restate:9070/ui/invocations/", false},
		{"restate:9070/ui/{invocationId}", false},
		{"ftp://restate/{invocationId}", false},
		{"/ui/{invocationId}", false},
	} {
		t.Run(tt.url, func(t *testing.T) {
			err := worker.ConsoleFlags{RestateUIURL: tt.url}.Check()
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || substate.ErrorCode(err) != substate.EINVALID || !strings.Contains(err.Error(), "--restate-ui-url") {
				t.Errorf("err = %v, want EINVALID naming the flag", err)
			}
		})
	}
}
