package shellcomplete

import "strings"

// Split reads a command line as a shell splits it into words: at
// unquoted blanks, with single quotes, double quotes and backslashes
// removed as a POSIX shell removes them. A line that ends in a blank ends
// in an empty word, the one being completed; so does a line ending in an
// empty pair of quotes.
func Split(line string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote byte // ' or ", while inside quotes
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\\' && i+1 < len(line) && (quote == 0 || strings.IndexByte(`"\$`+"`", line[i+1]) >= 0):
			i++
			w.WriteByte(line[i])
			inWord = true
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord || len(line) == 0 || strings.ContainsAny(line[len(line)-1:], " \t\n") {
		words = append(words, w.String())
	}
	return words
}
