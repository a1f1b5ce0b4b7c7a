package shrink

import (
	"bytes"
	"fmt"
	"go/format"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/report"
	"github.com/hiatus-dev/hiatus/store"
)

// Files a shrink leaves in its directory: the reproducer.
const (
	CommandFile = "command.txt"   // the `hiatus run` command line that replays it
	TestFile    = "repro_test.go" // the same as a Go test, through the library
)

// Write leaves the reproducer of r, shrunk from the run source that
// violated the checks named, in dir: its schedule.edn, the command line
// that replays it, a Go test file that fails while a replay shows the
// violation again (and, for an unfenced run, passes with fencing), and the
// timeline of one failing replay.
func Write(dir, source string, violated []string, r Result) error {
	d, err := files.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return write(d, source, violated, r)
}

// write is Write into d, whose names are written by temporary file and
// rename, through no link planted there.
func write(d *files.Dir, source string, violated []string, r Result) error {
	if err := d.WriteFile(store.Schedule, r.Config.Plan.AppendEDN(nil)); err != nil {
		return err
	}
	schedule, err := filepath.Abs(d.Join(store.Schedule))
	if err != nil {
		return err
	}
	if err := d.WriteFile(CommandFile, []byte(Command(r.Config, schedule)+"\n")); err != nil {
		return err
	}
	var test bytes.Buffer
	data := testData{Source: source, Violated: violated, R: r, Date: time.Now().UTC().Format("2006-01-02")}
	if err := testFile.Execute(&test, data); err != nil {
		return fmt.Errorf("reproducer test: %w", err)
	}
	// As gofmt would leave it: an empty plan, say, on one line.
	src, err := format.Source(test.Bytes())
	if err != nil {
		return fmt.Errorf("reproducer test: %w", err)
	}
	if err := d.WriteFile(TestFile, src); err != nil {
		return err
	}
	if r.Verdict.Dir == "" {
		return nil
	}
	vd, err := files.OpenDir(r.Verdict.Dir)
	if err != nil {
		return nil // the replay is gone: nothing to keep
	}
	defer vd.Close()
	f, err := vd.Open(report.TimelineFile)
	if err != nil {
		return nil // the replay drew none: nothing to keep
	}
	defer f.Close()
	return d.WriteWith(report.TimelineFile, func(w io.Writer) error { _, err := io.Copy(w, f); return err })
}

// Command is the `hiatus run` command line of cfg, its schedule in the
// file schedule.
func Command(cfg harness.Config, schedule string) string { return cfg.CommandLine(schedule) }

type testData struct {
	Source, Date string
	Violated     []string
	R            Result
}

// Guarded says the run's writes were guarded: a TestFenced would add nothing.
func (d testData) Guarded() bool { return d.R.Config.Resolved().Guard != client.GuardNone }

// UsesTime says the config sets a duration: the test imports time.
func (d testData) UsesTime() bool {
	return len(d.R.Config.Plan) > 0 || strings.Contains(strings.Join(d.R.Config.GoStatements(), "\n"), "time.")
}

// inComment is s as the text of a Go line comment: as it is, or in Go's
// quotes when it holds a character that is not printable. A newline in
// the run directory's path or in a check's name (results.edn's keys)
// would otherwise end the comment, and what follows it would be Go that
// go test compiles and runs.
func inComment(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

var testFile = template.Must(template.New("repro").Funcs(template.FuncMap{"comment": inComment}).Parse(
	`// Reproduces the violation ({{range $i, $v := .Violated}}{{if $i}}, {{end}}{{comment $v}}{{end}} invalid) of {{comment .Source}},
// as ` + "`hiatus shrink`" + ` left it on {{.Date}}: {{len .R.Config.Plan}} faults, a {{.R.Config.TimeLimit}} run,
// {{.R.Config.Workers}} workers; it recurred in {{.R.Verdict.Failed}} of {{.R.Verdict.Runs}} replays.
//
// Put it in a package of its own in a module that requires
// github.com/hiatus-dev/hiatus, and run go test from the directory the run
// was made in (an exec: lock's command is run from there). TestUnsafe fails
// while a replay shows the violation again{{if not .Guarded}}; TestFenced replays the
// same schedule with a fencing token on the write and fails if an update
// is lost{{end}}. Each
// replay starts its own throwaway redis-server and PostgreSQL. A lock of a
// Go program's own needs its harness.Lab: its ServeWorker and Run in place
// of harness's.
package repro_test

import (
	"context"
	"os"
	"testing"
{{- if .UsesTime}}
	"time"
{{- end}}

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// violated are the checks the run found invalid.
var violated = []string{ {{- range $i, $v := .Violated}}{{if $i}}, {{end}}{{printf "%q" $v}}{{end -}} }

// TestMain lets the test binary serve as the runs' workers.
func TestMain(m *testing.M) {
	harness.ServeWorker()
	os.Exit(m.Run())
}

func config(t *testing.T) harness.Config {
	cfg := harness.DefaultConfig()
	cfg.Store = t.TempDir()
{{- range .R.Config.GoStatements}}
	{{.}}
{{- end}}
	cfg.Plan = nemesis.Plan{
{{- range .R.Config.Plan}}
		{{printf "%#v" .}},
{{- end}}
	}
	return cfg
}

// TestUnsafe replays the schedule up to three times and fails at the
// first replay that shows the violation again.
func TestUnsafe(t *testing.T) {
	for i := 1; i <= 3; i++ {
		res, err := harness.Run(context.Background(), config(t))
		if err != nil {
			t.Fatal(err)
		}
		if harness.Recurs(violated, res.Results) {
			for _, c := range res.Results.Checks {
				if c.Explanation != "" {
					t.Errorf("%s: %s", c.Name, c.Explanation)
				}
			}
			t.Fatalf("replay %d shows the violation again (%s)", i, res.Dir)
		}
	}
}
{{if not .Guarded}}
// TestFenced replays the schedule with a fencing token on the write:
// nothing is lost.
func TestFenced(t *testing.T) {
	cfg := config(t)
	cfg.Guard = "fence"
	res, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := res.Results.LockFigures(); f.LostMin > 0 {
		t.Errorf("fenced, %d updates lost (%s)", f.LostMin, res.Dir)
	}
}
{{end -}}
`))
