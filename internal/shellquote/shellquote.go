// Package shellquote writes a word as a POSIX shell reads it back: the
// command lines hiatus prints (a reproducer's, a comparison's) can be
// pasted into a shell as they are, and the scripts it runs on a node over
// SSH take paths and arguments as they are.
package shellquote

import "strings"

// Quote returns s as one shell word: as it is when it holds nothing the
// shell would read otherwise, else in single quotes.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:=,@%+-", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
