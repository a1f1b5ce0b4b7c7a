// Package printable makes what others supply safe to show on a terminal:
// an adapter's hello and stderr, a history's values, a reason an answer
// gives. A terminal acts on what it is sent: an escape sequence can clear
// the screen or move the cursor, a carriage return overwrite a line, a
// bidi override reorder what follows, and a supplied "\nvalid? true" would
// read as a verdict. Escape writes each such character as a visible escape
// instead, as Go's %q does, and leaves the rest as it is (no quotes are
// added, and no backslash doubled: the text reads as it was written).
package printable

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape returns s with every character that is not printable written as
// an escape: C0 and C1 controls (ESC as \x1b, CR as \r, newline as \n,
// BEL as \a), DEL, format characters such as the bidi overrides (U+202E
// as \u202e), separators other than the space, unassigned code points,
// and each byte of invalid UTF-8 (\xff). What remains is one line of
// printable text.
func Escape(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !strconv.IsPrint(r) })
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for len(s[i:]) > 0 {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, `\x`...)
			b = appendHex(b, uint32(s[i]), 2)
		case strconv.IsPrint(r):
			b = append(b, s[i:i+n]...)
		default:
			b = appendEscape(b, r)
		}
		i += n
	}
	return string(b)
}

// Lines is Escape of each line of s, the newlines between them kept: for a
// block of text, such as what an adapter wrote on its standard error.
func Lines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}

// appendEscape writes the escape of the rune r, which is not printable.
func appendEscape(b []byte, r rune) []byte {
	switch r {
	case '\a':
		return append(b, `\a`...)
	case '\b':
		return append(b, `\b`...)
	case '\f':
		return append(b, `\f`...)
	case '\n':
		return append(b, `\n`...)
	case '\r':
		return append(b, `\r`...)
	case '\t':
		return append(b, `\t`...)
	case '\v':
		return append(b, `\v`...)
	}
	switch {
	case r < utf8.RuneSelf:
		return appendHex(append(b, `\x`...), uint32(r), 2)
	case r <= 0xffff:
		return appendHex(append(b, `\u`...), uint32(r), 4)
	}
	return appendHex(append(b, `\U`...), uint32(r), 8)
}

func appendHex(b []byte, v uint32, digits int) []byte {
	const hex = "0123456789abcdef"
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b = append(b, hex[v>>uint(shift)&0xf])
	}
	return b
}
