package lockserver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A monitorLine is one line of Redis's MONITOR: a command as the server
// received it, stamped with the server's clock when it fed the line.
//
//	1796540870.072024 [0 127.0.0.1:44854] "set" "lock" "a9f3" "NX" "PX" "500"
//	1796540870.072094 [0 lua] "DEL" "lock"
type monitorLine struct {
	us   int64  // the node's clock, microseconds since the epoch
	db   int    // the database it ran in
	addr string // the client's address ("127.0.0.1:44854"), "lua" inside a script, "unix:PATH"
	args []string
}

// errLine marks a MONITOR line that cannot be read.
var errLine = errors.New("not a MONITOR line")

// parseMonitor reads one MONITOR line.
func parseMonitor(s string) (monitorLine, error) {
	var l monitorLine
	ts, rest, ok := strings.Cut(s, " [")
	if !ok {
		return l, fmt.Errorf("%w: %q", errLine, clip(s))
	}
	sec, frac, ok := strings.Cut(ts, ".")
	secs, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt(frac, 10, 64)
	if !ok || err1 != nil || err2 != nil || len(frac) != 6 {
		return l, fmt.Errorf("%w: timestamp %q", errLine, clip(ts))
	}
	l.us = secs*1_000_000 + us
	where, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return l, fmt.Errorf("%w: %q", errLine, clip(s))
	}
	db, addr, ok := strings.Cut(where, " ")
	if l.db, err1 = strconv.Atoi(db); !ok || err1 != nil {
		return l, fmt.Errorf("%w: client %q", errLine, clip(where))
	}
	l.addr = addr
	if l.args, err1 = unquoteArgs(rest); err1 != nil {
		return l, err1
	}
	return l, nil
}

// unquoteArgs reads the arguments of a MONITOR line: each in double
// quotes, escaped as Redis's sdscatrepr escapes them (\" \\ \n \r \t \a
// \b and \xHH), separated by spaces.
func unquoteArgs(s string) ([]string, error) {
	var args []string
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == ' ' {
			i++
			continue
		}
		if s[i] != '"' {
			return nil, fmt.Errorf("%w: an argument not quoted at %q", errLine, clip(s[i:]))
		}
		b.Reset()
		i++
		for {
			if i >= len(s) {
				return nil, fmt.Errorf("%w: an unterminated argument", errLine)
			}
			c := s[i]
			if c == '"' {
				i++
				break
			}
			if c != '\\' {
				b.WriteByte(c)
				i++
				continue
			}
			n, err := unescape(&b, s[i:])
			if err != nil {
				return nil, err
			}
			i += n
		}
		args = append(args, b.String())
	}
	return args, nil
}

// unescape writes the character the escape at the start of s stands for
// and returns the escape's length.
func unescape(b *strings.Builder, s string) (int, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("%w: an escape at the end", errLine)
	}
	switch s[1] {
	case '\\', '"':
		b.WriteByte(s[1])
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'a':
		b.WriteByte('\a')
	case 'b':
		b.WriteByte('\b')
	case 'x':
		if len(s) < 4 {
			return 0, fmt.Errorf("%w: a short \\x escape", errLine)
		}
		n, err := strconv.ParseUint(s[2:4], 16, 8)
		if err != nil {
			return 0, fmt.Errorf("%w: escape %q", errLine, s[:4])
		}
		b.WriteByte(byte(n))
		return 4, nil
	default:
		return 0, fmt.Errorf("%w: escape %q", errLine, s[:2])
	}
	return 2, nil
}

// clip shortens s for a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// commandText writes a command back as one line, for an event's :command:
// its name upper-cased, arguments as they are unless they need quotes,
// a script's body shortened.
func commandText(args []string, lua bool) string {
	var b strings.Builder
	if lua {
		b.WriteString("[lua] ")
	}
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch {
		case i == 0:
			b.WriteString(strings.ToUpper(a))
		case len(a) > 40:
			b.WriteString(strconv.Quote(a[:40]) + "…")
		case a == "" || strings.ContainsAny(a, " \"\\") || !strconv.CanBackquote(a):
			b.WriteString(strconv.Quote(a))
		default:
			b.WriteString(a)
		}
	}
	return b.String()
}

// quoteArg writes an argument as MONITOR quotes it (Redis's sdscatrepr):
// in double quotes, \ " and the control characters it names escaped, other
// bytes that are not printable ASCII as \xHH.
func quoteArg(a string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(a); i++ {
		switch c := a[i]; c {
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\x%02x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
