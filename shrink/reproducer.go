package shrink

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/report"
	"github.com/hiatus-dev/hiatus/store"
)

// Files a shrink leaves in its directory: the reproducer.
const (
	CommandFile = "command.txt"   // the `hiatus run` command line that replays it
	TestFile    = "repro_test.go" // the same as a Go test, through the library
)

// Write leaves the reproducer of r in dir: its schedule.edn, the command
// line that replays it, a Go test file that fails while the lock loses
// updates under it and passes with fencing, and the timeline of one
// failing replay. source names the run it was shrunk from.
func Write(dir, source string, r Result) error {
	run := store.Run{Dir: dir}
	if err := run.WriteFile(store.Schedule, r.Config.Plan.AppendEDN(nil)); err != nil {
		return err
	}
	if err := run.WriteFile(CommandFile, []byte(Command(r.Config, filepath.Join(dir, store.Schedule))+"\n")); err != nil {
		return err
	}
	var test bytes.Buffer
	if err := testFile.Execute(&test, testData{Source: source, R: r, Date: time.Now().UTC().Format("2006-01-02")}); err != nil {
		return fmt.Errorf("reproducer test: %w", err)
	}
	if err := run.WriteFile(TestFile, test.Bytes()); err != nil {
		return err
	}
	if r.Verdict.Dir == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(r.Verdict.Dir, report.TimelineFile))
	if err != nil {
		return nil // the replay drew none: nothing to keep
	}
	defer f.Close()
	return run.WriteWith(report.TimelineFile, func(w io.Writer) error { _, err := io.Copy(w, f); return err })
}

// Command is the `hiatus run` command line of cfg, its schedule in the
// file schedule.
func Command(cfg harness.Config, schedule string) string {
	d := harness.DefaultConfig()
	args := []string{"hiatus", "run", "--lock", quote(cfg.Lock), "--workers", fmt.Sprint(cfg.Workers),
		"--time-limit", cfg.TimeLimit.String(), "--lease", cfg.Lease.String(), "--work", cfg.Work.String()}
	if cfg.Retry != d.Retry {
		args = append(args, "--retry", cfg.Retry.String())
	}
	if cfg.OpTimeout != d.OpTimeout {
		args = append(args, "--op-timeout", cfg.OpTimeout.String())
	}
	if cfg.InjectEvery > 0 {
		args = append(args, "--inject-every", fmt.Sprint(cfg.InjectEvery), "--pause", cfg.Pause.String(), "--pause-kind", cfg.PauseKind)
	}
	if cfg.Fenced {
		args = append(args, "--fenced")
	}
	return strings.Join(append(args, "--nemesis", cfg.Nemesis, "--schedule", quote(schedule)), " ")
}

// quote quotes s for a shell when it needs it.
func quote(s string) string {
	if strings.ContainsAny(s, " '\"$`\\*?;&|<>(){}") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}

type testData struct {
	Source, Date string
	R            Result
}

func (d testData) Ms(t time.Duration) int64 { return t.Milliseconds() }

var testFile = template.Must(template.New("repro").Parse(`// Reproduces the violation of {{.Source}},
// as ` + "`hiatus shrink`" + ` left it on {{.Date}}: {{len .R.Config.Plan}} faults, a {{.R.Config.TimeLimit}} run,
// {{.R.Config.Workers}} workers; it recurred in {{.R.Verdict.Failed}} of {{.R.Verdict.Runs}} replays.
//
// Put it in a package of its own in a module that requires
// github.com/hiatus-dev/hiatus, and run go test. TestUnsafe fails while the lock
// loses updates under this schedule; TestFenced replays the same schedule
// with a fencing token on the write and passes. Each replay starts its own
// throwaway redis-server and PostgreSQL.
package repro_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// TestMain lets the test binary serve as the runs' workers.
func TestMain(m *testing.M) {
	harness.ServeWorker(nil)
	os.Exit(m.Run())
}

func config(t *testing.T) harness.Config {
	cfg := harness.DefaultConfig()
	cfg.Store = t.TempDir()
	cfg.Lock = {{printf "%q" .R.Config.Lock}}
	cfg.Workers = {{.R.Config.Workers}}
	cfg.TimeLimit = {{.Ms .R.Config.TimeLimit}} * time.Millisecond
	cfg.Lease = {{.Ms .R.Config.Lease}} * time.Millisecond
	cfg.Work = {{.Ms .R.Config.Work}} * time.Millisecond
	cfg.Retry = {{.Ms .R.Config.Retry}} * time.Millisecond
	cfg.OpTimeout = {{.Ms .R.Config.OpTimeout}} * time.Millisecond
	cfg.Pause = {{.Ms .R.Config.Pause}} * time.Millisecond
	cfg.InjectEvery, cfg.PauseKind = {{.R.Config.InjectEvery}}, {{printf "%q" .R.Config.PauseKind}}
	cfg.Fenced = {{.R.Config.Fenced}}
	cfg.Nemesis = {{printf "%q" .R.Config.Nemesis}}
	cfg.Plan = nemesis.Plan{
{{- range .R.Config.Plan}}
		{Kind: {{printf "%q" .Kind}}, Worker: {{.Worker}}, At: {{$.Ms .At}} * time.Millisecond, Length: {{$.Ms .Length}} * time.Millisecond},
{{- end}}
	}
	return cfg
}

// TestUnsafe replays the schedule up to three times and fails at the
// first replay that loses an update.
func TestUnsafe(t *testing.T) {
	for i := 1; i <= 3; i++ {
		res, err := harness.Run(context.Background(), config(t))
		if err != nil {
			t.Fatal(err)
		}
		if f, _ := res.Results.LockCounter(); f.LostMin > 0 {
			why, _ := res.Results.Check("lock-counter")
			t.Fatalf("replay %d lost %d updates (%s): %s", i, f.LostMin, res.Dir, why.Explanation)
		}
	}
}

// TestFenced replays the schedule with a fencing token on the write:
// nothing is lost.
func TestFenced(t *testing.T) {
	cfg := config(t)
	cfg.Fenced = true
	res, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := res.Results.LockCounter(); f.LostMin > 0 {
		t.Errorf("fenced, %d updates lost (%s)", f.LostMin, res.Dir)
	}
}
`))
