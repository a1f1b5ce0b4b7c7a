package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/configgen"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/shrink"
	"github.com/urfave/cli/v2"
	"pgregory.net/rapid"
)

// TestConfigThroughCommandLine: any valid Config, written as the `hiatus
// run` command line a reproducer prints (Config.CommandLine), read by a
// shell and then by run's own flags, is the same configuration, resolved.
// Only what a replay does not take differs: the servers, and the store,
// which the command line gives only when it is not the default.
func TestConfigThroughCommandLine(t *testing.T) {
	root := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		c := configgen.Config(rt)
		schedule := ""
		if c.Plan != nil {
			f, err := os.CreateTemp(root, "schedule-*.edn")
			if err != nil {
				rt.Fatal(err)
			}
			f.Write(c.Plan.AppendEDN(nil))
			f.Close()
			schedule = f.Name()
		}
		line := c.CommandLine(schedule)
		got, err := parseRun(shellWords(rt, line))
		if err != nil {
			rt.Fatalf("%s: %v", line, err)
		}
		want := c.Resolved()
		want.Store = harness.DefaultStore
		if got.Plan != nil && len(got.Plan) == 0 && len(want.Plan) == 0 {
			got.Plan = want.Plan // nemesis.Plan{} and nil print alike; both are "no fault"
		}
		if !reflect.DeepEqual(got.Resolved(), want) {
			rt.Fatalf("%s\nread back\n%#v\nwant\n%#v", line, got.Resolved(), want)
		}
	})
}

// shellWords splits line as a shell reads it.
func shellWords(t *rapid.T, line string) []string {
	out, err := exec.Command("sh", "-c", `printf '%s\0' `+line).Output()
	if err != nil {
		t.Fatalf("sh: %s: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// parseRun reads args ("hiatus", "run", flags...) with run's own flags,
// and returns the Config they set, running nothing.
func parseRun(args []string) (harness.Config, error) {
	var out, errOut bytes.Buffer
	app := newApp(&out, &errOut)
	var cfg harness.Config
	var perr error
	app.Command("run").Action = func(c *cli.Context) error {
		cfg, perr = runConfig(c)
		return nil
	}
	if code := exitCode(app.Run(args), &errOut); code != 0 {
		return cfg, &exitError{code: code, err: errorString(errOut.String())}
	}
	return cfg, perr
}

type errorString string

func (e errorString) Error() string { return string(e) }

// TestReproducerReplaysTheRun: the reproducer `hiatus shrink` leaves for a
// run of every kind of setting a replay must keep (redlock's nodes, a
// guard, hosts, a backward clock jump, faults aimed at workers, nodes and
// none) replays exactly that run: its command.txt, read by a shell and
// run's flags, and its repro_test.go's config, compiled and run, each give
// test.edn's settings field for field as the run's own.
func TestReproducerReplaysTheRun(t *testing.T) {
	cfg := harness.DefaultConfig()
	cfg.Lock, cfg.Nodes, cfg.Guard, cfg.Hosts, cfg.ClockJump = "redlock", 5, "cas", "netns", -2*time.Second
	cfg.Nemesis, cfg.Workers, cfg.TimeLimit, cfg.Seed = "clock,sigstop,partition-redis+clock", 4, 6*time.Second, 42
	cfg.Plan = nemesis.Plan{
		{Kind: "clock", Node: nemesis.On(3), At: 800 * time.Millisecond, Length: 700 * time.Millisecond},
		{Kind: "clock", At: 2 * time.Second, Length: 700 * time.Millisecond}, // any node: a replay draws one
		{Kind: "sigstop", Worker: nemesis.On(2), At: 3 * time.Second, Length: 900 * time.Millisecond, Holder: true},
		{Kind: "partition-redis+clock", Worker: nemesis.On(0), Nodes: []int{1, 4}, At: 4 * time.Second, Length: 800 * time.Millisecond},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	want := settingsOf(t, cfg.AppendEDN(nil))

	dir, err := os.MkdirTemp(".", "repro-") // in the module, so that its test builds against this tree
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r := shrink.Result{Config: cfg, Verdict: shrink.Verdict{Failed: 3, Runs: 3}}
	if err := shrink.Write(dir, "store/lock-counter/x", []string{"linear"}, r); err != nil {
		t.Fatal(err)
	}

	line, err := os.ReadFile(filepath.Join(dir, shrink.CommandFile))
	if err != nil {
		t.Fatal(err)
	}
	fromLine, err := parseRun(shellWordsT(t, strings.TrimSpace(string(line))))
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	sameSettings(t, "command.txt", settingsOf(t, fromLine.AppendEDN(nil)), want)
	if !reflect.DeepEqual(fromLine.Plan, cfg.Plan) {
		t.Errorf("command.txt's schedule\n%#v\nwant\n%#v", fromLine.Plan, cfg.Plan)
	}

	// The reproducer's own config, as its test builds it.
	dump := `package repro_test

import (
	"os"
	"testing"
)

func TestDumpConfig(t *testing.T) {
	c := config(t)
	if err := os.WriteFile(os.Getenv("HIATUS_DUMP"), c.Plan.AppendEDN(append(c.AppendEDN(nil), '\n')), 0o644); err != nil {
		t.Fatal(err)
	}
}
`
	if err := os.WriteFile(filepath.Join(dir, "dump_test.go"), []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "config.edn")
	cmd := exec.Command("go", "test", "-count=1", "-run", "TestDumpConfig", "./"+dir)
	cmd.Env = append(os.Environ(), "HIATUS_DUMP="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the reproducer's test: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	settings, plan, _ := strings.Cut(string(b), "\n")
	sameSettings(t, "repro_test.go", settingsOf(t, []byte(settings)), want)
	if string(cfg.Plan.AppendEDN(nil)) != plan {
		t.Errorf("repro_test.go's schedule\n%s\nwant\n%s", plan, cfg.Plan.AppendEDN(nil))
	}
}

// settingsOf reads a test.edn's settings.
func settingsOf(t *testing.T, edn []byte) map[history.Keyword]any {
	t.Helper()
	v, err := history.ParseValue(string(edn))
	m, ok := v.(map[history.Keyword]any)
	if err != nil || !ok {
		t.Fatalf("%s: %v", edn, err)
	}
	return m
}

// sameSettings compares two test.edn's settings field by field.
func sameSettings(t *testing.T, what string, got, want map[history.Keyword]any) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: :%s %s, want %s", what, k, history.AppendValue(nil, g), history.AppendValue(nil, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: :%s %s, which the run has not", what, k, history.AppendValue(nil, g))
		}
	}
}

// shellWordsT splits line as a shell reads it.
func shellWordsT(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", `printf '%s\0' `+line).Output()
	if err != nil {
		t.Fatalf("sh: %s: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}
