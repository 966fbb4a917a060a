package worker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Logs written to a file are slog's key=value text, or JSON lines with
// --log-format json; tint's colored text is for terminals only.
func TestLoggerToFile(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"text", `level=INFO msg="workflow sub-state changed" tenant=acme`},
		{"json", `"level":"INFO","msg":"workflow sub-state changed","tenant":"acme"`},
	} {
		t.Run(tc.format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			LogFlags{LogFormat: tc.format}.LoggerTo(f).Info("workflow sub-state changed", "tenant", "acme")
			f.Close()
			got, _ := os.ReadFile(path)
			if !strings.Contains(string(got), tc.want) || strings.Contains(string(got), "\x1b[") {
				t.Fatalf("log line %q, want one with %q and no color codes", got, tc.want)
			}
			if tc.format == "json" && !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}
