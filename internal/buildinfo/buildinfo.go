// Package buildinfo says which build of substate is running: its module
// version, the commit it was built from and the Go toolchain, as the Go
// linker recorded them in the binary (runtime/debug.ReadBuildInfo).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// What a build that does not know a value says.
const (
	// Devel is the version of a build from a source checkout: go build
	// and go run record no module version for the main module unless the
	// checkout is at a version tag.
	Devel = "devel"
	// Unknown is the commit of a build without version-control stamps:
	// built with -buildvcs=false, or outside a checkout.
	Unknown = "unknown"
)

// version, when set at link time, is the version a release reports:
//
//	go build -ldflags "-X github.com/substatehq/substate/internal/buildinfo.version=v1.4.0" ./cmd/substate
var version string

// Info is what the binary says about its build.
type Info struct {
	Version    string `json:"version"`              // v1.4.0, a pseudo-version, or "devel"
	Commit     string `json:"commit"`               // the full revision, or "unknown"
	CommitTime string `json:"commitTime,omitempty"` // RFC 3339, when stamped
	Modified   bool   `json:"modified"`             // built from a work tree with uncommitted changes
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"` // GOOS/GOARCH
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	return from(bi, ok, version)
}

// from reads bi (ok false when the binary carries none), with linked as
// the version set at link time.
func from(bi *debug.BuildInfo, ok bool, linked string) Info {
	i := Info{Version: Devel, Commit: Unknown, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			i.Version = v
		}
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Commit = s.Value
			case "vcs.time":
				i.CommitTime = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if linked != "" {
		i.Version = linked
	}
	return i
}

// ShortCommit is the commit's first 12 characters, "unknown" when not
// stamped, with "+modified" for a work tree with changes.
func (i Info) ShortCommit() string {
	c := i.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if i.Modified {
		c += "+modified"
	}
	return c
}

// String is the build on one line: "substate v1.4.0 (commit 0123456789ab,
// go1.26.0 linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("substate %s (commit %s, %s %s)", i.Version, i.ShortCommit(), i.GoVersion, i.Platform)
}
