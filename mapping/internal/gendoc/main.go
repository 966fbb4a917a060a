// Command gendoc writes docs/state-mapping.md from the mapping tables. It is
// run by go generate in the mapping package.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/substatehq/substate/mapping"
)

func main() {
	out := flag.String("o", "../docs/state-mapping.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, mapping.Markdown(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
