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
				if cs := p.Complaints(); len(cs) != 1 || !strings.Contains(cs[0], tc.complain) {
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
