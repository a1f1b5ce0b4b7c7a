package lockserver

import (
	"errors"
	"slices"
	"testing"
)

// TestParseMonitor: MONITOR's lines as Redis writes them — a client's, a
// script's inner command, a Unix socket's, arguments escaped as
// sdscatrepr escapes them — read back to the command; what is not such a
// line is refused.
func TestParseMonitor(t *testing.T) {
	for _, c := range []struct {
		line string
		want monitorLine
	}{
		{`1796540870.068979 [0 127.0.0.1:44838] "set" "lock" "abc" "NX" "PX" "500"`,
			monitorLine{us: 1796540870068979, db: 0, addr: "127.0.0.1:44838", args: []string{"set", "lock", "abc", "NX", "PX", "500"}}},
		{`1796540870.072094 [3 lua] "DEL" "lock"`, monitorLine{us: 1796540870072094, db: 3, addr: "lua", args: []string{"DEL", "lock"}}},
		{`1796540870.000001 [0 unix:/tmp/r.sock] "get" "a b\"c\\d\n\r\t\a\b\x00\xff"`,
			monitorLine{us: 1796540870000001, addr: "unix:/tmp/r.sock", args: []string{"get", "a b\"c\\d\n\r\t\a\b\x00\xff"}}},
		{`1796540870.000002 [0 [::1]:6000] "ping"`, monitorLine{us: 1796540870000002, addr: "[::1]:6000", args: []string{"ping"}}},
		{`1796540870.000003 [0 127.0.0.1:1] "set" "" "x"`, monitorLine{us: 1796540870000003, addr: "127.0.0.1:1", args: []string{"set", "", "x"}}},
	} {
		got, err := parseMonitor(c.line)
		if err != nil || got.us != c.want.us || got.db != c.want.db || got.addr != c.want.addr || !slices.Equal(got.args, c.want.args) {
			t.Errorf("%s: %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
	for _, bad := range []string{
		``, `OK`, `1796540870 [0 lua] "get" "a"`, `1796540870.1 [0 lua] "get"`, `x.000001 [0 lua] "get"`,
		`1796540870.000001 [x lua] "get"`, `1796540870.000001 [0 lua] get`, `1796540870.000001 [0 lua] "get`,
		`1796540870.000001 [0 lua] "g\q"`, `1796540870.000001 [0 lua] "g\x4"`, `1796540870.000001 [0 lua] "g\xzz"`,
	} {
		if _, err := parseMonitor(bad); !errors.Is(err, errLine) {
			t.Errorf("%q: %v, want errLine", bad, err)
		}
	}
}

// TestCommandText: an event's :command is the command in one line, its
// name upper-cased, what needs quotes quoted, a script's body cut short.
func TestCommandText(t *testing.T) {
	for _, c := range []struct {
		args []string
		lua  bool
		want string
	}{
		{[]string{"set", "lock", "a9f3", "px", "500", "nx"}, false, "SET lock a9f3 px 500 nx"},
		{[]string{"DEL", "lock"}, true, "[lua] DEL lock"},
		{[]string{"set", "a b", "", "x\n"}, false, `SET "a b" "" "x\n"`},
		{[]string{"eval", "local v = redis.call('GET', KEYS[1]) if v == ARGV[1] then", "1"}, false, `EVAL "local v = redis.call('GET', KEYS[1]) if "… 1`},
	} {
		if got := commandText(c.args, c.lua); got != c.want {
			t.Errorf("%q: %s, want %s", c.args, got, c.want)
		}
	}
}

// TestQuoteArg: an argument quoted as MONITOR quotes it reads back as
// itself, so that a line names a key exactly when its quoted form is in
// the line.
func TestQuoteArg(t *testing.T) {
	for _, a := range []string{"hiatus:lock:x", "", `a "b" \c`, "tab\tnl\nbell\a\x00\xff é"} {
		args, err := unquoteArgs(quoteArg(a))
		if err != nil || len(args) != 1 || args[0] != a {
			t.Errorf("%q quoted %s reads back as %q, %v", a, quoteArg(a), args, err)
		}
	}
	if quoteArg("a\x00é") != `"a\x00\xc3\xa9"` {
		t.Errorf("quoteArg: %s, want Redis's \\x escapes", quoteArg("a\x00é"))
	}
}
