package checker

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// serialRegister returns n sequential writes of 1..n, each followed by a
// read of what was written, except the read at bad (if in range), which
// reads 0.
func serialRegister(n, bad int) []history.Op {
	var ops []history.Op
	for i := 1; i <= n; i++ {
		v, read := int64(i), int64(i)
		if i == bad {
			read = 0
		}
		ops = append(ops, inv(0, "write", v), ok(0, "write", v), inv(1, "read", nil), ok(1, "read", read))
	}
	return h(ops...)
}

func TestCheckHTML(t *testing.T) {
	paused := build(sec(0, 10, 901, 0, history.Ok, 0), pause(0, 20, 900),
		sec(1, 520, 560, 0, history.Ok, 0), sec(2, 570, 600, 1, history.Ok, 0), finalRead(1000, 1))
	_, lost := generated(t, gen.Config{Sections: 6000, Workers: 8, Lost: 1, Info: 50, Seed: 4})
	_, valid := generated(t, gen.Config{Sections: 3000, Workers: 8, Info: 50, Seed: 5})
	for _, tc := range []struct {
		name   string
		ops    []history.Op
		opts   Options
		valid  Validity
		drawn  int      // ops drawn
		note   string   // a phrase the note must hold; "" for no note
		output []string // phrases the HTML must hold
	}{
		{
			name: "small invalid", ops: serialRegister(3, 2), opts: Options{Model: ModelRegister},
			valid: Invalid, drawn: 6, output: []string{"<html", "read 0"},
		},
		{
			name: "lock-counter annotated", ops: paused, opts: Options{},
			valid: Invalid, drawn: 7,
			output: []string{"write 0 → 1", "lease 500 ms", "pause p0", "nemesis op 4: sigstop of process 0 for 880 ms"},
		},
		{
			name: "large invalid: the window around the violation", ops: serialRegister(HTMLLimit, HTMLLimit*3/4),
			opts: Options{Model: ModelRegister}, valid: Invalid, drawn: HTMLLimit,
			note: "around the first violation (op 5999)",
		},
		{
			name: "large lock-counter invalid: the window the counter walk points to", ops: lost,
			valid: Invalid, drawn: HTMLLimit, note: "around the first violation",
			output: []string{"write ", " → ", "lease 500 ms", "pause p"},
		},
		{
			name: "large lock-counter valid: the start of the walk's linearization", ops: valid,
			valid: Valid, drawn: HTMLLimit, note: "the first 2000",
		},
		{
			name: "large valid: the start", ops: serialRegister(HTMLLimit, 0),
			opts: Options{Model: ModelRegister}, valid: Valid, drawn: HTMLLimit,
			note: "the first 2000",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			rs, vis, err := CheckHTML(context.Background(), &buf, tc.ops, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if rs.Valid != tc.valid {
				t.Errorf("valid? %v, want %v\n%s", rs.Valid, tc.valid, rs.AppendEDN(nil))
			}
			if vis.Ops != tc.drawn {
				t.Errorf("drew %d ops, want %d (%+v)", vis.Ops, tc.drawn, vis)
			}
			if (tc.note == "") != (vis.Note == "") || !strings.Contains(vis.Note, tc.note) {
				t.Errorf("note %q, want one with %q", vis.Note, tc.note)
			}
			for _, want := range tc.output {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("the HTML lacks %q", want)
				}
			}
			plain, _ := Check(context.Background(), tc.ops, tc.opts)
			if got, want := string(rs.AppendEDN(nil)), string(plain.AppendEDN(nil)); got != want {
				t.Errorf("CheckHTML's results differ from Check's:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestCheckHTMLCounter(t *testing.T) {
	ops := h(inv(0, "add", int64(1)), ok(0, "add", int64(1)))
	rs, _, err := CheckHTML(context.Background(), new(bytes.Buffer), ops, Options{})
	if !errors.Is(err, ErrNoVisualization) {
		t.Errorf("err = %v, want ErrNoVisualization", err)
	}
	if _, ok := rs.Check("counter"); !ok || rs.Valid != Valid {
		t.Errorf("results %s, want the counter check, valid", rs.AppendEDN(nil))
	}
}
