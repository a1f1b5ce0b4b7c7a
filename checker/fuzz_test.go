package checker

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
)

// FuzzProcessesAndIndexes checks what a history's names cannot change: a
// generated lock-counter history, with one of its processes written as
// another EDN value (a string, a keyword, a negative number, a vector) and
// one op's :index set to another's, keeps every check's verdict and every
// figure, in both analyzers. A check that dropped the renamed process's ops
// would find the counter higher than the writes explain.
//
//	go test ./checker -run '^$' -fuzz FuzzProcessesAndIndexes -fuzztime 10m
func FuzzProcessesAndIndexes(f *testing.F) {
	f.Add(uint64(1), uint8(12), uint8(0), uint8(0), uint8(1), uint8(0), "工人", uint16(0), uint16(0))
	f.Add(uint64(2), uint8(30), uint8(1), uint8(2), uint8(2), uint8(1), "wörker", uint16(7), uint16(5))
	f.Add(uint64(3), uint8(40), uint8(2), uint8(1), uint8(0), uint8(2), "7", uint16(3), uint16(90))
	f.Add(uint64(4), uint8(20), uint8(1), uint8(1), uint8(1), uint8(3), `a "quoted" \ name`, uint16(1), uint16(2))
	f.Fuzz(func(t *testing.T, seed uint64, sections, lost, info, proc, shape uint8, name string, from, to uint16) {
		cfg := gen.Config{Sections: 4 + int(sections)%60, Workers: 3, Lost: int(lost) % 3, Info: int(info) % 3, Seed: int64(seed)}
		var buf bytes.Buffer
		if _, err := gen.Write(&buf, cfg); err != nil {
			t.Skip(err) // a configuration gen refuses: not this test's
		}
		original := buf.String()
		value, ok := processValue(shape, name, int(from))
		if !ok {
			t.Skip()
		}
		renamed := renameProcess(original, int(proc)%cfg.Workers, value)
		renamed = reindex(renamed, int(from), int(to))
		for _, analyzer := range []string{AnalyzerCounterWalk, AnalyzerPorcupine} {
			want := figures(t, original, analyzer)
			if got := figures(t, renamed, analyzer); got != want {
				t.Fatalf("%s: process %d written as %s, op %d's :index as op %d's:\n got %s\nwant %s\nhistory:\n%s",
					analyzer, int(proc)%cfg.Workers, value, from, to, got, want, renamed)
			}
		}
	})
}

// processValue is the EDN of a process, of the shape shape, from name and n;
// ok is false for a value that is no other client (the nemesis).
func processValue(shape uint8, name string, n int) (string, bool) {
	switch shape % 4 {
	case 0:
		return string(history.AppendValue(nil, name)), true
	case 1:
		kw := strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' {
				return r
			}
			return -1
		}, strings.ToValidUTF8(name, ""))
		if kw == "" || kw == "nemesis" || kw[0] >= '0' && kw[0] <= '9' {
			return "", false
		}
		return ":" + kw, true
	case 2:
		return strconv.Itoa(-1 - n), true
	}
	return "[" + strconv.Itoa(n) + " " + string(history.AppendValue(nil, name)) + "]", true
}

// renameProcess writes process p of the history's ops as value; the
// nemesis's events still name it by number (a pause of process p is of no
// process now, as it would be in a history whose processes have names).
func renameProcess(h string, p int, value string) string {
	re := regexp.MustCompile(fmt.Sprintf(`(:type :[a-z]+, ):process %d,`, p))
	return re.ReplaceAllStringFunc(h, func(m string) string {
		return m[:strings.Index(m, ":process")] + ":process " + value + ","
	})
}

var indexRE = regexp.MustCompile(`(?m)^\{:index \d+,`)

// reindex gives the op at position from the :index of the op at position
// to (both taken modulo the history's length).
func reindex(h string, from, to int) string {
	lines := strings.SplitAfter(h, "\n")
	n := len(lines) - 1 // the last is empty
	if n <= 0 {
		return h
	}
	from, to = from%n, to%n
	lines[from] = indexRE.ReplaceAllString(lines[from], fmt.Sprintf("{:index %d,", to))
	return strings.Join(lines, "")
}

// figures is every check's verdict and scalar figures, but the process
// numbers, of a check of the history h.
func figures(t *testing.T, h, analyzer string) string {
	t.Helper()
	file, err := Read(context.Background(), strings.NewReader(h), "h.edn", Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, h)
	}
	rs, err := file.Check(context.Background(), Options{Model: ModelLockCounter, Analyzer: analyzer})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "valid? %v", rs.Valid)
	for _, r := range rs.Checks {
		if r.Name == "history" && r.Valid == Valid {
			continue // a warning of the :index changed, nothing the verdict rests on
		}
		fmt.Fprintf(&b, "; %s %v", r.Name, r.Valid)
		for _, fl := range r.Fields {
			switch fl.Value.(type) {
			case bool, int, int64:
				if fl.Key != "process" && fl.Key != "op" {
					fmt.Fprintf(&b, " %s %v", fl.Key, fl.Value)
				}
			}
		}
	}
	return b.String()
}
