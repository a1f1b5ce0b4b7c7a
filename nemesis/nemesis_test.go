package nemesis

import (
	"context"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

type tick struct{}

func (*tick) Now(context.Context) int64 { return time.Now().UnixNano() }

type fakeFault struct {
	killEvents
	began, ended int
}

func (*fakeFault) Kind() history.Keyword { return KindKillWorker }
func (f *fakeFault) Begin(context.Context, *rand.Rand) (map[history.Keyword]any, error) {
	f.began++
	return map[history.Keyword]any{"n": f.began}, nil
}
func (f *fakeFault) End(context.Context) error { f.ended++; return nil }

// TestSchedule: a fault every Interval, each lasting Pause; every fault
// begun is ended, even the one under way when the run ends (cut short
// then), and each is recorded as a :kill and a :restart, stamped when it
// began and ended. On the bubble's clock: 10 ms apart, 30 ms each, for
// 110 ms.
func TestSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var ops []history.Op
		f := &fakeFault{}
		start := time.Now().UnixNano()
		s := &Schedule{Faults: []Fault{f}, Interval: 10 * time.Millisecond, Pause: 30 * time.Millisecond,
			Rand: rand.New(rand.NewSource(1)), Clock: &tick{},
			Record: func(o history.Op) { mu.Lock(); ops = append(ops, o); mu.Unlock() }}
		ctx, cancel := context.WithTimeout(context.Background(), 110*time.Millisecond)
		defer cancel()
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if f.began != 3 || f.ended != 3 {
			t.Errorf("began %d faults, ended %d; want 3 and 3", f.began, f.ended)
		}
		wantMS := []int64{10, 40, 50, 80, 90, 110} // the last cut short by the run's end
		if len(ops) != len(wantMS) {
			t.Fatalf("%d events for %d faults, want %d", len(ops), f.began, len(wantMS))
		}
		for i, o := range ops {
			want := history.Keyword("kill")
			if i%2 == 1 {
				want = "restart"
			}
			v := o.Value.(map[history.Keyword]any)
			if o.F != want || o.Process != history.Nemesis || o.Type != history.Info || v["kind"] != KindKillWorker {
				t.Errorf("event %d: %+v, want %s", i, o, want)
			}
			if ms := (o.Time - start) / 1e6; ms != wantMS[i] {
				t.Errorf("event %d (%s) at %d ms, want %d", i, o.F, ms, wantMS[i])
			}
		}
	})
}

func state(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	return s[strings.LastIndexByte(s, ')')+2:][:1]
}

// TestFreezer stops a real process and its child, and ResumeAll leaves
// neither stopped.
func TestFreezer(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var pids []int
	for deadline := time.Now().Add(2 * time.Second); len(pids) < 2 && time.Now().Before(deadline); {
		pids = withChildren(cmd.Process.Pid)
		time.Sleep(10 * time.Millisecond)
	}
	if len(pids) != 2 {
		t.Fatalf("withChildren(sh) = %v, want sh and its sleep", pids)
	}
	defer func() {
		for _, p := range pids[1:] {
			_ = exec.Command("kill", strconv.Itoa(p)).Run()
		}
	}()
	var f Freezer
	if err := f.Stop(pids...); err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		for deadline := time.Now().Add(time.Second); state(p) != "T" && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		if st := state(p); st != "T" {
			t.Errorf("pid %d in state %s after Stop, want T", p, st)
		}
	}
	f.ResumeAll()
	for _, p := range pids {
		for deadline := time.Now().Add(time.Second); state(p) == "T" && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		if st := state(p); st == "T" {
			t.Errorf("pid %d still stopped after ResumeAll", p)
		}
	}
}

// TestStopTree: a pause of a server stops it, then its children. A child
// that exited after it was listed (a PostgreSQL backend whose client hung
// up) is no failure: once, beside two CPU burners, one such failed a
// pause-postgres, whose history said it never began while the processes
// it had stopped stayed stopped. The server itself gone is a failure,
// before any child is stopped. A process gone is not kept to resume.
func TestStopTree(t *testing.T) {
	srv := exec.Command("sleep", "30")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	exited := exec.Command("true")
	if err := exited.Run(); err != nil { // reaped: its PID names no process now
		t.Fatal(err)
	}
	pid, gone := srv.Process.Pid, exited.Process.Pid
	await := func(p int, stopped bool) string {
		for deadline := time.Now().Add(time.Second); (state(p) == "T") != stopped && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		return state(p)
	}

	var f Freezer
	t.Cleanup(f.ResumeAll) // whatever a failure left stopped
	got, err := stopTree(&f, pid, func() []int { return []int{gone} })
	if err != nil || len(got) != 1 || got[0] != pid {
		t.Fatalf("a child gone: stopped %v, %v; want the server alone, no error", got, err)
	}
	if st := await(pid, true); st != "T" {
		t.Errorf("the server in state %s, want T (stopped)", st)
	}
	if _, kept := f.stopped[PID(gone)]; kept {
		t.Errorf("the freezer keeps pid %d, gone, to resume at the run's end (when it may be another process's)", gone)
	}
	if err := f.Cont(got...); err != nil {
		t.Fatal(err)
	}
	if st := await(pid, false); st == "T" {
		t.Fatalf("the server still stopped after Cont")
	}

	got, err = stopTree(&f, gone, func() []int {
		t.Errorf("the children listed, though the server's own stop failed")
		return nil
	})
	if err == nil || got != nil {
		t.Fatalf("the server gone: stopped %v, %v; want an error", got, err)
	}
}
