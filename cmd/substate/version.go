package main

import (
	"context"

	"github.com/substatehq/substate/internal/buildinfo"
	"github.com/substatehq/substate/internal/termtext"
)

// VersionCmd is "substate version".
type VersionCmd struct {
	OutputFlags `embed:""`
}

// Run prints the build: version, commit, Go toolchain.
func (c *VersionCmd) Run(ctx context.Context, m *Main) error {
	i := buildinfo.Read()
	return c.Printer(m.Stdout).PrintTable(i, func(bool) termtext.Table {
		commit := i.Commit
		if i.Modified {
			commit += " (modified)"
		}
		return termtext.Table{Rows: [][]string{
			{"version", i.Version},
			{"commit", commit},
			{"committed", termtext.Dash(i.CommitTime)},
			{"go", i.GoVersion + " " + i.Platform},
		}}
	})
}

// versionLine is what --version prints.
func versionLine() string { return buildinfo.Read().String() }
