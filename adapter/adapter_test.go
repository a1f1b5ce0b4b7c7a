package adapter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/internal/adaptertest"
	"github.com/hiatus-dev/hiatus/internal/servers"
)

var redisURL string

// TestMain lets the test binary serve as the adapters the tests start, and
// starts a throwaway redis-server for their locks.
func TestMain(m *testing.M) {
	adaptertest.Serve()
	r, err := servers.StartRedis(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "adapter tests need redis-server (scripts/setup installs it): %v\n", err)
		os.Exit(1)
	}
	redisURL = r.URL
	code := m.Run()
	r.Stop()
	os.Exit(code)
}

// setup is a lock of the test's own.
func setup(t *testing.T) adapter.Setup {
	return adapter.Setup{RedisURL: redisURL, Lock: "lock:" + t.Name(), Lease: time.Second, Retry: time.Millisecond}
}

// gone says whether the process pid no longer exists.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// TestStartFailures: an adapter that cannot start, or says no hello, is an
// error that names it and says what it did, with what it wrote on stderr.
func TestStartFailures(t *testing.T) {
	for _, tc := range []struct {
		name, command string
		want          []string // in the error, or in what it wrote
	}{
		{"exits", adaptertest.Command("exit"), []string{"did not say hello", "the adapter is gone: it exited (status 3)", "exiting at start, as asked"}},
		{"not found", "/nonexistent/adapter --flag", []string{"exited (status 127)", "not found"}},
		{"silent", adaptertest.Command("hang"), []string{"did not say hello", "context deadline exceeded"}},
		{"garbage", adaptertest.Command("garbage-hello"), []string{`hiatus stopped the adapter: it wrote "hello there", which is no answer`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var stderr adapter.Tail
			p, err := adapter.Start(ctx, tc.command, setup(t), &stderr)
			if err == nil {
				p.Close()
				t.Fatalf("Start of %q succeeded", tc.command)
			}
			said := err.Error() + "\n" + stderr.String()
			for _, w := range tc.want {
				if !strings.Contains(said, w) {
					t.Errorf("Start of %q: %q lacks %q", tc.command, said, w)
				}
			}
			if !strings.Contains(err.Error(), tc.command) {
				t.Errorf("the error %q does not name the adapter", err)
			}
		})
	}
}

// TestMisbehaviourMidRun: what each request's caller learns when an
// adapter that started well goes wrong, whether its outcome is unknown
// (the request was sent) or certainly nothing (it was not), and that no
// process is left once it is closed.
func TestMisbehaviourMidRun(t *testing.T) {
	for _, tc := range []struct {
		mode     string
		want     string // in the error of the first acquire
		gone     bool   // the adapter is gone after it
		complain string // logged, for an adapter that goes on
	}{
		{mode: "garbage-after=1", want: `wrote "{not json", which is no answer`, gone: true},
		{mode: "die-after=1", want: "exited (status 4)", gone: true},
		{mode: "mute-after=1", want: "no answer in time"},
		{mode: "twice", complain: "answered acquire request 1 twice"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var stderr adapter.Tail
			p, err := adapter.Start(ctx, adaptertest.Command(tc.mode), setup(t), &stderr)
			if err != nil {
				t.Fatal(err)
			}
			pid := p.PID()
			acquire := adapter.Request{Type: "acquire", Lock: "lock:" + t.Name(), LeaseMS: 1000, WaitMS: 100}
			a, err := p.Request(ctx, acquire, 500*time.Millisecond)
			var ae *adapter.Error
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("acquire: %v", err)
			case tc.want == "" && a.Type != adapter.TypeOK:
				t.Fatalf("acquire answered %+v", a)
			case tc.want != "" && !errors.As(err, &ae):
				t.Fatalf("acquire: %v (%+v), want an *adapter.Error", err, a)
			case tc.want != "":
				if !strings.Contains(err.Error(), tc.want) || !ae.Sent {
					t.Errorf("acquire: %v (sent %v), want %q of a request sent, whose outcome is unknown", err, ae.Sent, tc.want)
				}
			}
			if tc.gone {
				_, err := p.Request(ctx, acquire, 500*time.Millisecond)
				if !errors.As(err, &ae) || ae.Sent || !errors.Is(err, adapter.ErrGone) {
					t.Errorf("a request to an adapter gone: %v, want ErrGone, not sent", err)
				}
			}
			if tc.complain != "" {
				// The second answer follows the first at once; the next
				// request's answer comes after it.
				if _, err := p.Request(ctx, adapter.Request{Type: "frobnicate", Lock: "x"}, time.Second); err != nil {
					t.Fatal(err)
				}
				if cs := p.Complaints(); len(cs) != 1 || p.Complained() != 1 || !strings.Contains(cs[0], tc.complain) {
					t.Errorf("complaints %q, want one of %q", cs, tc.complain)
				}
				if !strings.Contains(stderr.String(), tc.complain) {
					t.Errorf("the log %q lacks %q", stderr.String(), tc.complain)
				}
			}
			p.Close()
			if !gone(pid) {
				t.Errorf("adapter pid %d still there after Close", pid)
			}
		})
	}
}

// TestConform: the well-behaved adapter passes the conformance check; one
// that answers twice, or breaks off, fails it, in words that say what it
// did.
func TestConform(t *testing.T) {
	for _, tc := range []struct {
		mode string
		ok   bool
		want string
	}{
		{"setnx", true, "all 8 checks passed"},
		{"twice", false, "FAIL  answers                it answered acquire request 1 twice"},
		{"garbage-after=3", false, `wrote "{not json", which is no answer`},
		// Each process's third acquire: the second process's, after the
		// holder's lease lapsed (expired release); its refusal's grant
		// is not taken for a lease kept alive.
		{"late-grant-after=3", false, "FAIL  expired release        asked 400ms after the holder's 200ms grant, the second process answered fail \"busy\", yet asked again it was granted"},
		{"exit", false, "exiting at start, as asked"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := adapter.Conform(context.Background(), adaptertest.Command(tc.mode), redisURL, &out, false)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, adapter.ErrNonconforming)) {
				t.Errorf("Conform: %v, want ok %v", err, tc.ok)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("Conform said:\n%s\nwant %q in it", out.String(), tc.want)
			}
		})
	}
}

// TestConformRedsync: redsync v4.0.4 passes every check, renewals too;
// v4.0.3, whose Unlock and Extend say ok of a lock another process took
// (docs/findings.md), passes the protocol with a warn for each.
func TestConformRedsync(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		version, modfile string
		want             []string
	}{
		{"v4.0.4", "", []string{"ok    lapsed renewal", "all 10 checks passed"}},
		{"v4.0.3", "v4.0.3.mod", []string{"warn  expired release", "warn  lapsed renewal", "\n8 checks passed, 2 warned"}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			bin := filepath.Join(dir, "redsync-"+tc.version)
			if err := adaptertest.BuildGo("../adapters/go-redsync", tc.modfile, bin); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := adapter.Conform(context.Background(), bin, redisURL, &out, false); err != nil {
				t.Errorf("Conform: %v\n%s", err, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("Conform said:\n%s\nwant %q in it", out.String(), w)
				}
			}
		})
	}
}

// TestCloseWithGrandchild: an adapter that left a child of its own holding
// its output (a shell's background job) is still closed, in bounded time,
// rather than waited for as long as the child lives.
func TestCloseWithGrandchild(t *testing.T) {
	command, mark := adaptertest.Marked(fmt.Sprintf("sh -c '(sleep 60 &); exec %s'", adaptertest.Command("setnx")))
	p, err := adapter.Start(context.Background(), command, setup(t), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for pid := range adaptertest.Leftovers(mark) { // the sleep
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // Close allows the adapter 2 s, then 1 s more
		t.Fatal("Close still waiting after 10 s")
	}
}

// A syncBuffer is a log that tests read while an adapter writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStderrBudget: an adapter that floods its standard error (8 MiB
// before its hello, more than a pipe holds) is read at once, so it starts
// and answers; the log takes StderrBudget bytes of it, then says what was
// dropped, how much, and the last lines it wrote.
func TestStderrBudget(t *testing.T) {
	const flood = 8 << 20
	command := fmt.Sprintf(`sh -c 'yes flooding the log | head -c %d >&2; echo "last words" >&2; exec %s'`, flood, adaptertest.Command("setnx"))
	var log syncBuffer
	p, err := adapter.Start(context.Background(), command, setup(t), &log)
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Request(context.Background(), adapter.Request{Type: "acquire", Lock: "lock:" + t.Name(), LeaseMS: 1000, WaitMS: 100}, 5*time.Second)
	if err != nil || a.Type != adapter.TypeOK {
		t.Errorf("acquire after the flood: %+v, %v", a, err)
	}
	p.Close()
	got := log.String()
	if len(got) > adapter.StderrBudget+2*adapter.StderrTail+1024 {
		t.Errorf("the log took %d bytes of an adapter's %d on stderr, want about %d", len(got), flood, adapter.StderrBudget)
	}
	dropped := fmt.Sprintf("wrote %d bytes on its standard error past the %d the log takes of one adapter; dropped", flood+len("last words\n")-adapter.StderrBudget, adapter.StderrBudget)
	for _, want := range []string{"all one adapter may add to the log; what it writes past them is dropped", dropped, "flooding the log\n", "last words\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %q; its end:\n%s", want, got[max(len(got)-3000, 0):])
		}
	}
}

// detached is the well-behaved adapter, started by a shell that first
// leaves a daemon behind: a sleep in a session of its own (setsid), its
// standard streams let go, as a library's helper process might.
func detached() (command, mark string) {
	return adaptertest.Marked(fmt.Sprintf(`sh -c 'setsid sleep 300 </dev/null >/dev/null 2>&1 & exec %s'`, adaptertest.Command("setnx")))
}

// TestLeftoversKilled: what an adapter leaves running when it is gone is
// killed, wherever it went (setsid), and said: by Close, in the log; by
// the conformance check, as a failure of its exit check.
func TestLeftoversKilled(t *testing.T) {
	t.Run("close", func(t *testing.T) {
		t.Parallel()
		command, mark := detached()
		t.Cleanup(func() { killAll(t, mark) })
		var log syncBuffer
		p, err := adapter.Start(context.Background(), command, setup(t), &log)
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
		if left := adaptertest.Leftovers(mark); len(left) > 0 {
			t.Errorf("left running after Close: %v", left)
		}
		if l := p.Left(); len(l) != 1 || !strings.Contains(l[0].Command, "sleep 300") {
			t.Errorf("Left() = %v, want the sleep", l)
		}
		if want := "left 1 process (pid "; !strings.Contains(log.String(), want) || !strings.Contains(log.String(), "sleep 300) running after it exited: killed") {
			t.Errorf("the log %q does not say what was left and killed", log.String())
		}
	})
	t.Run("conform", func(t *testing.T) {
		t.Parallel()
		command, mark := detached()
		t.Cleanup(func() { killAll(t, mark) })
		var out bytes.Buffer
		err := adapter.Conform(context.Background(), command, redisURL, &out, false)
		if !errors.Is(err, adapter.ErrNonconforming) {
			t.Errorf("Conform: %v, want ErrNonconforming", err)
		}
		if want := "FAIL  exit                   exited"; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "left 2 processes (pid ") {
			t.Errorf("Conform said:\n%s\nwant %q and the 2 processes left", out.String(), want)
		}
		if left := adaptertest.Leftovers(mark); len(left) > 0 {
			t.Errorf("left running after the check: %v", left)
		}
	})
}

// killAll kills what a test left, so that a failure leaves nothing behind.
func killAll(t *testing.T, mark string) {
	for pid := range adaptertest.Leftovers(mark) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Logf("kill %d: %v", pid, err)
		}
	}
}

// TestAnswersOutsideProtocol: a grant whose fence or lease is out of the
// protocol is no grant: the request fails with ErrProtocol, the answer
// given with it, and the conformance check fails on it, saying which field.
func TestAnswersOutsideProtocol(t *testing.T) {
	fencing := adaptertest.Fields{"fencing": true}
	for _, tc := range []struct {
		name         string
		hello, grant adaptertest.Fields
		want         string
	}{
		{"fence 0", fencing, adaptertest.Fields{"fence": 0}, "fence 0: its hello said fencing, and a fencing token is a positive integer"},
		{"negative fence", fencing, adaptertest.Fields{"fence": -5}, "fence -5: its hello said fencing, and a fencing token is a positive integer"},
		{"no fence", fencing, nil, "a grant without a fence, yet its hello said fencing"},
		{"negative lease", nil, adaptertest.Fields{"lease_ms": -1000}, "lease_ms -1000: a lease granted is a positive number of milliseconds"},
		{"lease 0", nil, adaptertest.Fields{"lease_ms": 0}, "lease_ms 0: a lease granted is a positive number of milliseconds"},
		{"lease of 300 years", nil, adaptertest.Fields{"lease_ms": int64(300 * 365 * 24 * 3600 * 1000)}, "lease_ms 9460800000000: more than hiatus can count"},
		{"no token", nil, adaptertest.Fields{"token": ""}, "a grant without a token: its release could not name it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			command := adaptertest.CommandWith("setnx", tc.hello, tc.grant)
			p, err := adapter.Start(context.Background(), command, setup(t), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			a, err := p.Request(context.Background(), adapter.Request{Type: "acquire", Lock: "lock:" + t.Name(), LeaseMS: 1000, WaitMS: 100}, 5*time.Second)
			var ae *adapter.Error
			if !errors.Is(err, adapter.ErrProtocol) || !errors.As(err, &ae) || !ae.Sent || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("acquire: %v, want ErrProtocol of a request sent, saying %q", err, tc.want)
			}
			if a.Type != adapter.TypeOK {
				t.Errorf("the answer given with the error is %+v, want the grant", a)
			}
			var out bytes.Buffer
			err = adapter.Conform(context.Background(), command, redisURL, &out, false)
			if !errors.Is(err, adapter.ErrNonconforming) || !strings.Contains(out.String(), "FAIL  acquire") || !strings.Contains(out.String(), tc.want) {
				t.Errorf("Conform: %v, said:\n%s\nwant its acquire check failed, saying %q", err, out.String(), tc.want)
			}
		})
	}
}

// TestComplaintsBounded: an adapter that answers requests never sent, as
// fast as it can, fills neither the log nor the memory: the first 20
// complaints are kept and logged, the rest counted.
func TestComplaintsBounded(t *testing.T) {
	script := filepath.Join(t.TempDir(), "stray.sh")
	// Its hello, 1000 answers to requests never sent, then an error answer
	// to the next request: by then every stray answer was read.
	if err := os.WriteFile(script, []byte(`read -r line
echo '{"type":"hello","in_reply_to":0,"name":"stray"}'
i=1000; while [ $i -lt 2000 ]; do echo "{\"type\":\"ok\",\"in_reply_to\":$i}"; i=$((i+1)); done
read -r line
echo '{"type":"error","in_reply_to":1,"reason":"no"}'
cat >/dev/null
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	p, err := adapter.Start(context.Background(), "sh "+script, setup(t), &log)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Request(context.Background(), adapter.Request{Type: "frobnicate", Lock: "x"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if cs, n := p.Complaints(), p.Complained(); len(cs) != 20 || n != 1000 {
		t.Errorf("%d complaints kept, %d counted; want 20 kept of 1000", len(cs), n)
	}
	if n := strings.Count(log.String(), "which hiatus never sent; dropped"); n != 20 || !strings.Contains(log.String(), "its further complaints are counted, not logged") {
		t.Errorf("the log holds %d complaints, want 20 and a word that the rest are counted:\n%.2000s", n, log.String())
	}
}

// TestReports: an adapter may write, of its own accord, the renewals its
// library makes on its own (renewing, then renewed); those well-formed
// and paired reach Setup.Reports in order, before the answer written after
// them; one answered but never begun, begun without its grant's token, or
// answered with no result is a complaint, and dropped; none stops the
// adapter, as a line that is no answer would.
func TestReports(t *testing.T) {
	script := filepath.Join(t.TempDir(), "reporter.sh")
	err := os.WriteFile(script, []byte(`#!/bin/sh
read line
echo '{"type":"hello","in_reply_to":0,"name":"reporter","version":"1"}'
read line
echo '{"type":"renewing","renewal":1,"token":"t"}'
echo '{"type":"renewed","renewal":1,"result":"ok"}'
echo '{"type":"renewed","renewal":2,"result":"ok"}'
echo '{"type":"renewing","renewal":3}'
echo '{"type":"renewing","renewal":4,"token":"t"}'
echo '{"type":"renewed","renewal":4,"result":"maybe"}'
echo '{"type":"renewed","renewal":4,"result":"fail","reason":"not-held"}'
echo '{"type":"ok","in_reply_to":1,"token":"t"}'
cat >/dev/null
`), 0o755)
	if err != nil {
		t.Fatal(err)
	}
	var got []adapter.Report
	s := setup(t)
	s.Reports = func(r adapter.Report) { got = append(got, r) }
	p, err := adapter.Start(context.Background(), script, s, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, err := p.Request(context.Background(), adapter.Request{Type: "acquire", Lock: s.Lock, LeaseMS: 1000, WaitMS: 100}, 5*time.Second)
	if err != nil || a.Type != adapter.TypeOK || p.Err() != nil {
		t.Fatalf("acquire: %v, %v; the adapter: %v", a, err, p.Err())
	}
	want := []adapter.Report{
		{Type: adapter.TypeRenewing, Renewal: 1, Token: "t"}, {Type: adapter.TypeRenewed, Renewal: 1, Result: adapter.TypeOK},
		{Type: adapter.TypeRenewing, Renewal: 4, Token: "t"}, {Type: adapter.TypeRenewed, Renewal: 4, Result: adapter.TypeFail, Reason: "not-held"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || p.Reported() != 2 {
		t.Errorf("reports %v (%d answered), want %v", got, p.Reported(), want)
	}
	cs := p.Complaints()
	if len(cs) != 3 || !strings.Contains(cs[0], "renewal 2 answered, which it never reported begun") ||
		!strings.Contains(cs[1], "renewal 3 begun without the grant's token") || !strings.Contains(cs[2], `answered "maybe", which is no result`) {
		t.Errorf("complaints %q", cs)
	}
}
