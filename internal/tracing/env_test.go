package tracing

import (
	"context"
	"strings"
	"testing"

	"github.com/substatehq/substate"
)

// env is a fake environment.
type env map[string]string

func (e env) get(k string) string { return e[k] }

func TestEnabled(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  env
		want bool
		err  string
	}{
		{"Nothing set: off", env{}, false, ""},
		{"Endpoint: on", env{envEndpoint: "http://127.0.0.1:4318"}, true, ""},
		{"Traces endpoint: on", env{envTracesEndpoint: "http://127.0.0.1:4318/v1/traces"}, true, ""},
		{"Exporter otlp: on", env{envExporter: "otlp"}, true, ""},
		{"Exporter none wins", env{envExporter: "none", envEndpoint: "http://127.0.0.1:4318"}, false, ""},
		{"SDK disabled wins", env{envSDKDisabled: "TRUE", envExporter: "otlp"}, false, ""},
		{"SDK not disabled", env{envSDKDisabled: "false", envEndpoint: "http://127.0.0.1:4318"}, true, ""},
		{"Other exporter refused", env{envExporter: "zipkin"}, false, "OTEL_TRACES_EXPORTER=zipkin"},
		{"A list refused", env{envExporter: "otlp,console"}, false, "OTLP only"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := enabled(tt.env.get)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || substate.ErrorCode(err) != substate.EINVALID {
					t.Fatalf("err = %v, want EINVALID naming %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("enabled = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewExporter(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		env  env
		err  string
	}{
		{"Default http/protobuf", env{}, ""},
		{"grpc", env{envProtocol: "grpc"}, ""},
		{"Traces protocol wins", env{envProtocol: "http/json", envTracesProtocol: "grpc"}, ""},
		{"http/json refused", env{envProtocol: "http/json"}, `"http/json"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			exp, err := newExporter(ctx, tt.env.get)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one naming %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = exp.Shutdown(ctx)
		})
	}
}

func TestDescribeHidesCredentials(t *testing.T) {
	got := Describe(env{envEndpoint: "https://user:secret@collector.example:4318/otlp"}.get)
	if strings.Contains(got, "secret") || !strings.Contains(got, "https://collector.example:4318/otlp") {
		t.Errorf("Describe = %q", got)
	}
	if got := Describe(env{envProtocol: "grpc"}.get); !strings.Contains(got, "grpc") || !strings.Contains(got, "default endpoint") {
		t.Errorf("Describe = %q", got)
	}
}
