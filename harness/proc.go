package harness

import (
	"errors"
	"os/exec"
	"syscall"

	"github.com/hiatus-dev/hiatus/topology"
	"golang.org/x/crypto/ssh"
)

// A proc is a worker's process, on this machine or on a node.
type proc interface {
	Pid() int
	Signal(syscall.Signal) error      // to the process alone
	SignalGroup(syscall.Signal) error // to the group it leads
	Wait() error
}

// A localProc is a process of this machine.
type localProc struct{ cmd *exec.Cmd }

func (p localProc) Pid() int { return p.cmd.Process.Pid }
func (p localProc) Signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}
func (p localProc) SignalGroup(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}
func (p localProc) Wait() error { return p.cmd.Wait() }

var _ proc = (*topology.Proc)(nil)

// groupOf is a worker's process group, as a fault stops it.
type groupOf struct{ p proc }

func (g groupOf) Signal(sig syscall.Signal) error { return g.p.SignalGroup(sig) }

// exitCode is the exit code of a process that exited of itself with err:
// 0 for none, -1 for a signal's end or an error of another kind.
func exitCode(err error) int {
	var ee *exec.ExitError
	var se *ssh.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	case errors.As(err, &se) && se.Signal() == "":
		return se.ExitStatus()
	}
	return -1
}
