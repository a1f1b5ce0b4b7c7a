package lockserver

import (
	"strings"
	"testing"
)

// TestModelGuesses: read from the commands alone, a write of the key near
// its deadline is the model's guess, and so is all it reads after it,
// until the key's state is sure again whatever the server read: a DEL, a
// SET without NX (nor KEEPTTL), or every deadline a key might have passed
// (never, when a key may have none). Lines far from a deadline are read
// surely; a line that is no write of the key (a read, a script's, another
// key's) does not expire it near its deadline, so that the write after it
// is a guess. The lease is 100 ms; the first key's deadline is 1100 ms.
func TestModelGuesses(t *testing.T) {
	type line struct {
		ms     float64 // the line's stamp, ms
		client string
		args   string
	}
	grant := line{1000, "worker-0", "SET k a NX PX 100"}
	for _, c := range []struct {
		name  string
		lines []line
		want  string // each event: act, and "?" when a guess
	}{
		{"far before", []line{grant, {1098.5, "worker-1", "SET k b NX PX 100"}}, "grant refuse"},
		{"far after", []line{grant, {1103.2, "worker-1", "SET k b NX PX 100"}}, "grant expire grant"},
		{"in the deadline's millisecond", []line{grant, {1100.4, "worker-1", "SET k b NX PX 100"}}, "grant refuse?"},
		{"the millisecond after", []line{grant, {1101.7, "worker-1", "SET k b NX PX 100"}}, "grant expire? grant?"},
		{"a read is no guess", []line{grant, {1100.4, "worker-1", "GET k"}, {1150, "worker-1", "SET k b NX PX 100"}}, "grant expire grant"},
		{"until a DEL", []line{grant, {1100.4, "worker-1", "SET k b NX PX 100"},
			{1120, "worker-2", "SET k c NX PX 100"}, {1130, "worker-1", "DEL k"}, {1140, "worker-2", "SET k c NX PX 100"}},
			"grant refuse? expire? grant? delete? grant"},
		{"until a plain SET", []line{grant, {1101.7, "worker-1", "SET k b NX PX 100"},
			{1130, "worker-2", "SET k c PX 100"}, {1140, "worker-1", "SET k d NX PX 100"}},
			"grant expire? grant? overwrite? refuse"},
		{"until every deadline passed", []line{grant, {1100.4, "worker-1", "SET k b NX PX 100"},
			{1150, "worker-2", "SET k c NX PX 100"}, {1249, "worker-0", "SET k d NX PX 100"}, {1253, "worker-1", "SET k e NX PX 100"},
			{1360, "worker-2", "SET k f NX PX 100"}},
			// d's refusal may have been a grant (b's key may have
			// held from 1100 ms until 1200, c refused), and held until
			// 1349 ms; e's grant, until 1353.
			"grant refuse? expire? grant? refuse? expire? grant? expire? grant"},
		{"a read first", []line{grant, {1101.2, "worker-2", "GET k"}, {1101.5, "worker-1", "SET k b NX PX 100"}}, "grant expire? grant?"},
		{"another key first", []line{grant, {1101.2, "worker-2", "INCR f"}, {1101.5, "worker-1", "SET k b NX PX 100"}}, "grant expire? grant?"},
		{"a release's script", []line{grant, {1101.1, "worker-0", "EVALSHA 9f0 1 k a"}, {1101.1, "worker-0", "GET k"},
			{1101.2, "worker-0", "DEL k"}, {1120, "worker-1", "SET k b NX PX 100"}}, "grant expire? grant"},
		{"a key that may never expire", []line{grant, {1100.4, "worker-1", "SET k b NX"},
			{1150, "worker-2", "SET k c NX PX 100"}, {5000, "worker-2", "SET k d NX PX 100"}},
			"grant refuse? expire? grant? expire? grant?"},
		{"PERSIST", []line{grant, {1101.4, "worker-0", "PERSIST k"}, {1150, "worker-2", "SET k c NX PX 100"}, {5000, "worker-2", "SET k d NX PX 100"}},
			"grant expire? grant? expire? grant?"},
		{"KEEPTTL", []line{grant, {1100.4, "worker-0", "SET k a2 KEEPTTL"}, {1150, "worker-2", "SET k c NX PX 100"}, {5000, "worker-2", "SET k d NX PX 100"}},
			"grant overwrite? expire? grant? expire? grant?"},
		{"a renewal widens the doubt", []line{grant, {1100.4, "worker-0", "PEXPIRE k 100"},
			{1150, "worker-2", "SET k c NX PX 100"}, {1203, "worker-2", "SET k c NX PX 100"}},
			"grant renew? refuse? expire? grant?"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			m := model{lock: "k", emit: func(e event) {
				s := string(e.act)
				if e.guess {
					s += "?"
				}
				got = append(got, s)
			}}
			for _, l := range c.lines {
				m.line(monitorLine{us: int64(l.ms * 1000), args: strings.Fields(l.args)}, l.client)
			}
			if g := strings.Join(got, " "); g != c.want {
				t.Errorf("read %s, want %s", g, c.want)
			}
		})
	}
}
