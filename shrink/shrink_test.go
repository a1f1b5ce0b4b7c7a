package shrink_test

import (
	"bytes"
	"context"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/shrink"
	"github.com/hiatus-dev/hiatus/store"
)

// TestMain lets the test binary serve as the workers of the runs it makes.
func TestMain(m *testing.M) {
	harness.ServeWorker()
	os.Exit(m.Run())
}

const ms = time.Millisecond

// TestShrinkConverges shrinks against a synthetic failure, with no servers:
// the case fails when a SIGSTOP of at least 300 ms ends 200 ms or more
// before the run does, with two workers or more and 5 ms of work or more.
// From seven faults in 10 s it must find that fault alone, as short and as
// early as the rules allow, in the shortest run the passes can reach.
func TestShrinkConverges(t *testing.T) {
	fails := func(c harness.Config) bool {
		for _, f := range c.Plan {
			if f.Kind == "sigstop" && f.Length >= 300*ms && f.At+f.Length+200*ms <= c.TimeLimit && c.Workers >= 2 && c.Work >= 5*ms {
				return true
			}
		}
		return false
	}
	judge := func(_ context.Context, c harness.Config) (shrink.Verdict, error) {
		if fails(c) {
			return shrink.Verdict{Failed: 3, Runs: 3}, nil
		}
		return shrink.Verdict{Runs: 3}, nil
	}
	cfg := harness.DefaultConfig()
	cfg.Plan = nemesis.Plan{}
	for i := range 7 {
		length := 100 * ms
		if i == 4 {
			length = 800 * ms // the one that matters
		}
		cfg.Plan = append(cfg.Plan, nemesis.Planned{Kind: "sigstop", Worker: nemesis.On(i % 3), At: time.Duration(i+1) * 1200 * ms, Length: length})
	}
	var steps []shrink.Step
	res, err := shrink.Shrink(context.Background(), cfg, shrink.Verdict{Failed: 3, Runs: 3},
		shrink.Options{Judge: judge, Need: 2, Budget: time.Minute, Step: func(s shrink.Step) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	got := res.Config
	want := nemesis.Planned{Kind: "sigstop", Worker: nemesis.On(1 % 2), At: 500 * ms, Length: 400 * ms}
	if len(got.Plan) != 1 || !reflect.DeepEqual(got.Plan[0], want) {
		t.Errorf("plan %+v, want [%+v]", got.Plan, want)
	}
	if got.TimeLimit != 1900*ms || got.Workers != 2 || got.Work != 5*ms {
		t.Errorf("time limit %v, %d workers, work %v; want 1.9s, 2, 5ms", got.TimeLimit, got.Workers, got.Work)
	}
	if !fails(got) || res.Tried != len(steps)-1 || !steps[len(steps)-1].Confirm || !res.Confirmed {
		t.Errorf("the result does not fail, or %d tried against %d steps", res.Tried, len(steps))
	}
}

// TestShrinkConfirms: a candidate kept on one lucky judgement (less work
// than the window needs, which fails the first time it is judged and
// never again) does not stand: the result, judged again, gives way to the
// candidates kept before it until one fails again.
func TestShrinkConfirms(t *testing.T) {
	judged := map[time.Duration]int{}
	judge := func(_ context.Context, c harness.Config) (shrink.Verdict, error) {
		judged[c.Work]++
		if c.Work >= 3*ms || judged[c.Work] == 1 {
			return shrink.Verdict{Failed: 3, Runs: 3}, nil
		}
		return shrink.Verdict{Runs: 3}, nil
	}
	cfg := harness.DefaultConfig()
	cfg.Plan, cfg.Work = nemesis.Plan{}, 20*ms
	var steps []shrink.Step
	res, err := shrink.Shrink(context.Background(), cfg, shrink.Verdict{Failed: 3, Runs: 3},
		shrink.Options{Judge: judge, Need: 2, Budget: time.Minute, Step: func(s shrink.Step) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Config.Work != 3*ms || !res.Confirmed || res.Verdict.Failed != 6 || res.Verdict.Runs != 6 {
		t.Errorf("work %v, confirmed %v, failed %d of %d: want 3ms, confirmed, 6 of 6", res.Config.Work, res.Confirmed, res.Verdict.Failed, res.Verdict.Runs)
	}
	confirms := 0
	for _, s := range steps {
		if s.Confirm {
			confirms++
		}
	}
	if confirms != 3 {
		t.Errorf("%d confirmations, want 3: 1ms and 2ms given up, 3ms held", confirms)
	}
}

// TestShrinkBudget: when the budget runs out the smallest case so far is
// the result, and no error.
func TestShrinkBudget(t *testing.T) {
	judge := func(ctx context.Context, c harness.Config) (shrink.Verdict, error) {
		select {
		case <-ctx.Done():
			return shrink.Verdict{}, ctx.Err()
		case <-time.After(50 * ms):
		}
		return shrink.Verdict{Failed: 1, Runs: 1}, nil // everything fails
	}
	cfg := harness.DefaultConfig()
	cfg.Plan = nemesis.Plan{{Kind: "sigstop", At: 5 * time.Second, Length: 800 * ms}, {Kind: "sigstop", At: 7 * time.Second, Length: 800 * ms}}
	res, err := shrink.Shrink(context.Background(), cfg, shrink.Verdict{Failed: 1, Runs: 1}, shrink.Options{Judge: judge, Need: 1, Budget: 120 * ms})
	if err != nil {
		t.Fatal(err)
	}
	// Every candidate fails, so each kept one dropped a fault: the result
	// is as small as the candidates judged in 120 ms made it.
	if res.Tried < 1 || res.Tried > 3 || len(res.Config.Plan) != max(0, 2-res.Tried) {
		t.Errorf("tried %d, plan %+v: want one to three candidates in 120 ms of 50 ms each, each dropping a fault", res.Tried, res.Config.Plan)
	}
}

// TestShrinkRealRun: a short SIGSTOP run that lost updates, shrunk on real
// servers within a minute, still fails and is no larger; its reproducer's
// Go test builds.
func TestShrinkRealRun(t *testing.T) {
	ctx := context.Background()
	cfg := harness.DefaultConfig()
	cfg.Store, cfg.Workers = t.TempDir(), 3
	cfg.TimeLimit, cfg.Lease, cfg.Pause, cfg.Interval, cfg.Work = 3*time.Second, 100*ms, 400*ms, 300*ms, 10*ms
	stop, err := harness.StartServers(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var failed harness.Result
	for range 5 { // SIGSTOP at random moments: a run may miss every holder
		if failed, err = harness.Run(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if f, _ := failed.Results.LockFigures(); f.LostMin > 0 {
			break
		}
	}
	violated, err := harness.Violated(failed.Dir)
	if err != nil || len(violated) == 0 {
		t.Fatalf("no run of 5 lost an update (%v)", err)
	}
	replay, err := harness.ReplayConfig(failed.Dir)
	if err != nil {
		t.Fatal(err)
	}
	replay.RedisURL, replay.PostgresURL = cfg.RedisURL, cfg.PostgresURL
	if len(replay.Plan) == 0 || replay.Workers != cfg.Workers || replay.Lease != cfg.Lease {
		t.Fatalf("replay config %+v does not match the run's", replay)
	}
	judge := shrink.Replays(violated, 2, 1, nil)
	res, err := shrink.Shrink(ctx, replay, shrink.Verdict{Failed: 1, Runs: 1}, shrink.Options{Judge: judge, Need: 1, Budget: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Failed < 1 || len(res.Config.Plan) > len(replay.Plan) || res.Config.TimeLimit > replay.TimeLimit {
		t.Errorf("shrunk to %d faults in %v (from %d in %v), failing %d of %d", len(res.Config.Plan), res.Config.TimeLimit,
			len(replay.Plan), replay.TimeLimit, res.Verdict.Failed, res.Verdict.Runs)
	}
	// The reproducer, as `hiatus shrink` leaves it, in a package of the
	// module so that its Go test builds against this tree.
	dir, err := os.MkdirTemp(".", "repro-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	res.Config.RedisURL, res.Config.PostgresURL = "", ""
	if err := shrink.Write(dir, failed.Dir, violated, res); err != nil {
		t.Fatal(err)
	}
	cmd, _ := os.ReadFile(filepath.Join(dir, shrink.CommandFile))
	if !strings.Contains(string(cmd), "--schedule") || !strings.Contains(string(cmd), "--time-limit") {
		t.Errorf("command.txt %q", cmd)
	}
	for _, f := range []string{store.Schedule, shrink.TestFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the reproducer lacks %s", f)
		}
	}
	// Built, not run: what its tests find is timing's (even fenced, a
	// pause between a grant and its INCR'd token loses an update:
	// docs/comparisons.md), and it was once seen to.
	out, err := exec.Command("go", "test", "-count=1", "-run", "^$", "./"+dir).CombinedOutput()
	if err != nil {
		t.Errorf("the reproducer's test does not build: %v\n%s", err, out)
	}
}

// TestReproducerFiles: the reproducer of cases that stretch its templates
// (no fault left, an adapter's command with quotes, a fenced run, a pause
// longer than the default) is Go that parses, as gofmt would leave it, and
// a command line a shell reads back as the same words.
func TestReproducerFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*harness.Config)
		want []string // in command.txt
	}{
		{"no faults", func(c *harness.Config) { c.Plan = nemesis.Plan{} }, []string{"--nemesis sigstop --seed"}},
		{"exec lock", func(c *harness.Config) { c.Lock = `exec:node "my lock.js" --it's` }, []string{`--lock 'exec:node "my lock.js" --it'\''s'`}},
		{"fenced", func(c *harness.Config) { c.Guard = client.GuardFence }, []string{"--guard fence"}},
		{"long pause", func(c *harness.Config) { c.Pause, c.Nemesis = 2*time.Second, "sigstop, kill-worker" }, []string{"--pause 2s", "--nemesis 'sigstop, kill-worker'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := harness.DefaultConfig()
			cfg.Plan = nemesis.Plan{{Kind: "sigstop", Worker: nemesis.On(1), At: 500 * ms, Length: 800 * ms, Holder: true}}
			tc.edit(&cfg)
			dir := t.TempDir()
			r := shrink.Result{Config: cfg, Verdict: shrink.Verdict{Failed: 3, Runs: 3}}
			if err := shrink.Write(dir, "/runs/x", []string{"linear", "lock-counter"}, r); err != nil {
				t.Fatal(err)
			}
			src, err := os.ReadFile(filepath.Join(dir, shrink.TestFile))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parser.ParseFile(token.NewFileSet(), shrink.TestFile, src, 0); err != nil {
				t.Errorf("repro_test.go does not parse: %v\n%s", err, src)
			}
			if formatted, err := format.Source(src); err != nil || !bytes.Equal(formatted, src) {
				t.Errorf("repro_test.go is not as gofmt would leave it (%v):\n%s", err, src)
			}
			if has, fenced := strings.Contains(string(src), "func TestFenced"), cfg.Guard == client.GuardFence; has == fenced {
				t.Errorf("TestFenced there: %v, for a run fenced: %v", has, fenced)
			}
			cmd, _ := os.ReadFile(filepath.Join(dir, shrink.CommandFile))
			for _, w := range tc.want {
				if !strings.Contains(string(cmd), w) {
					t.Errorf("command.txt %q lacks %q", cmd, w)
				}
			}
			// The shell reads the lock back whole.
			out, err := exec.Command("sh", "-c", `printf '%s\0' `+strings.TrimSpace(string(cmd))).Output()
			words := strings.Split(string(out), "\x00")
			lock := cfg.Lock
			if i := slices.Index(words, "--lock"); i >= 0 {
				lock = words[i+1]
			}
			if err != nil || lock != cfg.Lock {
				t.Errorf("the shell reads --lock back as %q (%v), want %q", lock, err, cfg.Lock)
			}
		})
	}
}

// TestMinimise: a case judged within its budget is shrunk, and its
// reproducer written; the budget stops only a judgement it cuts short.
func TestMinimise(t *testing.T) {
	cfg := harness.DefaultConfig()
	cfg.Store = t.TempDir()
	cfg.Plan = nemesis.Plan{{Kind: "sigstop", Worker: nemesis.On(1), At: 2 * time.Second, Length: 800 * ms}}
	c := shrink.Case{Dir: "store/lock-counter/x", Config: cfg, Violated: []string{"linear"}}
	judged := 0
	judge := func(context.Context, harness.Config) (shrink.Verdict, error) {
		judged++
		return shrink.Verdict{Failed: 2, Runs: 2}, nil // everything fails
	}
	res, dir, err := c.Minimise(context.Background(), 2, shrink.Options{Judge: judge, Need: 2, Budget: time.Minute}, nil)
	if err != nil || dir == "" || !res.Done || judged < 2 {
		t.Fatalf("Minimise: %v, reproducer %q, done %v, %d judgements", err, dir, res.Done, judged)
	}
	if _, err := os.Stat(filepath.Join(dir, shrink.CommandFile)); err != nil {
		t.Errorf("no %s: %v", shrink.CommandFile, err)
	}
	if len(res.Config.Plan) != 0 || res.Config.Workers != 2 {
		t.Errorf("shrunk to %d faults, %d workers: want no fault and two workers, as every candidate fails", len(res.Config.Plan), res.Config.Workers)
	}
}

// TestReproducerComments: a run directory's path and its results.edn's
// check names reach the comments of repro_test.go, which go test compiles:
// one holding a newline, and Go after it, stays in its comment (quoted):
// the reproducer is written, parses, and holds no code from the names.
// (The newline used to end the comment: gofmt refused what followed, and
// Write failed at the end of the whole shrink.)
func TestReproducerComments(t *testing.T) {
	inject := "\nfunc init() { panic(\"ran\") }\n//"
	cfg := harness.DefaultConfig()
	cfg.Plan = nemesis.Plan{{Kind: "sigstop", Worker: nemesis.On(1), At: 500 * ms, Length: 800 * ms}}
	for _, tc := range []struct {
		name, source string
		violated     []string
	}{
		{"path", "/runs/x" + inject, []string{"linear"}},
		{"check", "/runs/x", []string{"linear)" + inject}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := shrink.Result{Config: cfg, Verdict: shrink.Verdict{Failed: 3, Runs: 3}}
			if err := shrink.Write(dir, tc.source, tc.violated, r); err != nil {
				t.Fatal(err)
			}
			src, err := os.ReadFile(filepath.Join(dir, shrink.TestFile))
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(token.NewFileSet(), shrink.TestFile, src, 0)
			if err != nil {
				t.Fatalf("repro_test.go does not parse: %v\n%s", err, src)
			}
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "init" {
					t.Fatalf("repro_test.go has code from the run directory's names:\n%s", src)
				}
			}
		})
	}
}

// TestMinimiseLinkPlanted: a link planted in a shared store where the
// reproducer's directory goes (STORE/NAME-shrink) is not followed: the
// reproducer is refused, and nothing is written where the link points.
func TestMinimiseLinkPlanted(t *testing.T) {
	cfg := harness.DefaultConfig()
	cfg.Store, cfg.Name = t.TempDir(), "lock-counter-replay"
	cfg.Plan = nemesis.Plan{{Kind: "sigstop", Worker: nemesis.On(1), At: 2 * time.Second, Length: 800 * ms}}
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(cfg.Store, "lock-counter-shrink")); err != nil {
		t.Fatal(err)
	}
	c := shrink.Case{Dir: "store/lock-counter/x", Config: cfg, Violated: []string{"linear"}}
	judge := func(context.Context, harness.Config) (shrink.Verdict, error) {
		return shrink.Verdict{Failed: 2, Runs: 2}, nil
	}
	_, dir, err := c.Minimise(context.Background(), 2, shrink.Options{Judge: judge, Need: 2, Budget: time.Minute}, nil)
	if err == nil || dir != "" {
		t.Errorf("Minimise through a planted link: %v, reproducer %q; want an error", err, dir)
	}
	if left, _ := os.ReadDir(elsewhere); len(left) > 0 {
		t.Errorf("written where the link points: %v", left)
	}
}
