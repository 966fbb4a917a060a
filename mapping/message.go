package mapping

import "strings"

// firstLine returns the first line of s that is not blank, trimmed: the
// human message of an error text whose next lines are a stack trace or a
// dump. The whole text stays in the raw event, as evidence.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}
