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

// TestSchedule: every fault begun is ended, even the one under way when
// the run ends, and each is recorded as a :kill and a :restart.
func TestSchedule(t *testing.T) {
	var mu sync.Mutex
	var ops []history.Op
	f := &fakeFault{}
	s := &Schedule{Faults: []Fault{f}, Interval: 10 * time.Millisecond, Pause: 30 * time.Millisecond,
		Rand: rand.New(rand.NewSource(1)), Clock: &tick{},
		Record: func(o history.Op) { mu.Lock(); ops = append(ops, o); mu.Unlock() }}
	ctx, cancel := context.WithTimeout(context.Background(), 125*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if f.began < 2 || f.began != f.ended {
		t.Errorf("began %d faults, ended %d; want as many, at least 2", f.began, f.ended)
	}
	if len(ops) != 2*f.began {
		t.Fatalf("%d events for %d faults", len(ops), f.began)
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
		if i%2 == 1 && o.Time < ops[i-1].Time {
			t.Errorf("fault %d ends before it begins", i/2)
		}
	}
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
