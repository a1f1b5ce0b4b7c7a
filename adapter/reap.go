package adapter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/internal/printable"
	"golang.org/x/sys/unix"
)

// MarkEnv is the variable of the environment that marks an adapter's
// processes. Start sets it in each adapter's environment, and whatever the
// adapter starts inherits it wherever it goes: into a process group or a
// session of its own (setsid), to init as its parent once the adapter is
// gone. So Reap finds what an adapter left behind, where its process tree
// or its process group would not.
const MarkEnv = "HIATUS_ADAPTER"

// NewMark returns a mark no other set of adapters has, for Setup.Mark.
func NewMark() string {
	return strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
}

// A Leftover is a process an adapter left running when it was gone, which
// Reap killed.
type Leftover struct {
	PID     int
	Command string // its command line, its arguments separated by spaces
}

// String says which process it was, its command line escaped for a terminal.
func (l Leftover) String() string {
	return fmt.Sprintf("pid %d: %s", l.PID, printable.Escape(l.Command))
}

// Leftovers says how many processes they were, and which, for a message:
// "2 processes (pid 41: sleep 300; pid 43: sleep 300)".
func Leftovers(ls []Leftover) string {
	each := make([]string, len(ls))
	for i, l := range ls {
		each[i] = l.String()
	}
	n := fmt.Sprintf("%d processes", len(ls))
	if len(ls) == 1 {
		n = "1 process"
	}
	return n + " (" + strings.Join(each, "; ") + ")"
}

// reapRounds bounds the scans of Reap: a process may fork as it dies, and
// its child is found by the next scan.
const reapRounds = 20

// Reap kills every process whose environment holds mark as MarkEnv's
// value, or a mark made of it for one adapter of the set it names (see
// Setup.Mark), and returns them. It scans /proc again after each kill
// until a scan finds none it did not kill already. Each is killed through
// a pidfd opened before its mark is read (again), so that a PID reused
// meanwhile is never hit, and waited for until it is dead. A process that
// cleared its environment (env -i) is not found.
func Reap(mark string) ([]Leftover, error) {
	if mark == "" {
		return nil, errors.New("adapter.Reap: no mark")
	}
	killed := map[int]bool{}
	var left []Leftover
	for range reapRounds {
		pids, err := filepath.Glob("/proc/[0-9]*")
		if err != nil {
			return left, fmt.Errorf("list /proc: %w", err)
		}
		fresh := 0
		for _, p := range pids {
			pid, err := strconv.Atoi(filepath.Base(p))
			if err != nil || killed[pid] || !hasMark(pid, mark) {
				continue
			}
			if l, ok := kill(pid, mark); ok {
				killed[pid] = true
				left = append(left, l)
				fresh++
			}
		}
		if fresh == 0 {
			return left, nil
		}
	}
	return left, fmt.Errorf("processes marked %s=%s still found after %d rounds of kills", MarkEnv, mark, reapRounds)
}

// kill kills pid, if it is still marked mark, and waits up to a second for
// its end.
func kill(pid int, mark string) (Leftover, bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) { // a kernel before 5.3: by its PID, just read
		l := Leftover{PID: pid, Command: commandLine(pid)}
		return l, unix.Kill(pid, unix.SIGKILL) == nil
	}
	if err != nil {
		return Leftover{}, false // gone already
	}
	defer unix.Close(fd)
	if !hasMark(pid, mark) { // the PID was another's when it was read
		return Leftover{}, false
	}
	l := Leftover{PID: pid, Command: commandLine(pid)}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		return Leftover{}, false
	}
	// A pidfd reads as ready once its process has ended.
	_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 1000)
	return l, true
}

// environLimit bounds the environment read of a process: Linux's own
// bound on a new program's arguments and environment is a quarter of its
// stack's limit, 2 MiB by default.
const environLimit = 16 << 20

// hasMark says whether the environment pid started with marks it as one
// of mark's.
func hasMark(pid int, mark string) bool {
	env, err := files.ReadFile(fmt.Sprintf("/proc/%d/environ", pid), environLimit)
	if err != nil {
		return false // gone, or not ours to read
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		v, ok := bytes.CutPrefix(kv, []byte(MarkEnv+"="))
		if ok && (string(v) == mark || bytes.HasPrefix(v, []byte(mark+"."))) {
			return true
		}
	}
	return false
}

// commandLine is the start of pid's command line, or its name.
func commandLine(pid int) string {
	f, err := files.Open(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "?"
	}
	defer f.Close()
	const most = 200
	b, _ := io.ReadAll(io.LimitReader(f, most+1))
	if cmd := strings.TrimSpace(string(bytes.ReplaceAll(b[:min(len(b), most)], []byte{0}, []byte{' '}))); cmd != "" {
		if len(b) > most {
			cmd += "…"
		}
		return cmd
	}
	comm, _ := files.ReadFile(fmt.Sprintf("/proc/%d/comm", pid), 64)
	return "[" + strings.TrimSpace(string(comm)) + "]"
}
