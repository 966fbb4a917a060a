package worker_test

import (
	"strings"
	"testing"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/worker"
)

func TestTraceUIURL(t *testing.T) {
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"", true},
		{"http://jaeger:16686/trace/{traceId}", true},
		{"https://grafana.example.com/explore?left={\"queries\":[{\"query\":\"{traceId}\"}]}", true},
		{"http://jaeger:16686/trace/", false},
		{"jaeger:16686/trace/{traceId}", false},
		{"ftp://jaeger/{traceId}", false},
		{"/trace/{traceId}", false},
	} {
		t.Run(tt.url, func(t *testing.T) {
			err := worker.TraceFlags{TraceUIURL: tt.url}.Check()
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || substate.ErrorCode(err) != substate.EINVALID || !strings.Contains(err.Error(), "--trace-ui-url") {
				t.Errorf("err = %v, want EINVALID naming the flag", err)
			}
		})
	}
}
