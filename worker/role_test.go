package worker

import (
	"testing"
)

// TestCheckExposureByRole: on 0.0.0.0 a role that ingests needs ingest
// credentials and one that serves reads (the view, or /metrics when no
// --metrics-addr takes it) needs read-API keys.
func TestCheckExposureByRole(t *testing.T) {
	for _, tc := range []struct {
		role, metricsAddr string
		wantErr           bool
	}{
		{RoleAll, "", true}, {RoleIngest, "", true}, {RoleProject, "", true}, {RoleEngine, "", true},
		{RoleAll, ":9090", true}, {RoleIngest, ":9090", true}, {RoleProject, ":9090", true}, {RoleEngine, ":9090", false},
	} {
		f := Flags{HTTPAddr: "0.0.0.0:8080", RoleFlags: RoleFlags{Role: tc.role}, ReadAPIFlags: ReadAPIFlags{MetricsAddr: tc.metricsAddr}}
		if err := f.CheckExposure(); (err != nil) != tc.wantErr {
			t.Errorf("role %s (metrics on %q) without credentials on 0.0.0.0: err = %v, want error %t", tc.role, tc.metricsAddr, err, tc.wantErr)
		}
	}
}
