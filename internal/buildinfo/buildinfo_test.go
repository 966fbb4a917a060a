package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/substatehq/substate", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-03-01T09:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		name   string
		bi     *debug.BuildInfo
		ok     bool
		linked string
		want   string
	}{
		{"Stamped", stamped, true, "", "substate v1.4.0 (commit 0123456789ab+modified, go1.26.0 " + platform + ")"},
		{"Linked", stamped, true, "v1.5.0-rc.1", "substate v1.5.0-rc.1 (commit 0123456789ab+modified, go1.26.0 " + platform + ")"},
		// go build -buildvcs=false from a checkout: no stamps, "(devel)".
		{"NoVCS", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, true, "", "substate devel (commit unknown, go1.26.0 " + platform + ")"},
		{"NoBuildInfo", nil, false, "", "substate devel (commit unknown, " + runtime.Version() + " " + platform + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := from(tc.bi, tc.ok, tc.linked).String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestRead: the test binary has build information, whatever its stamps.
func TestRead(t *testing.T) {
	i := Read()
	if i.Version == "" || i.Commit == "" || i.GoVersion != runtime.Version() {
		t.Errorf("Read() = %+v", i)
	}
}
