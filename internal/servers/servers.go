// Package servers starts throwaway redis-server and PostgreSQL instances from
// the binaries installed on the machine, on free loopback ports in a private
// temporary directory, and removes them when stopped. It is what `hiatus run`
// uses when no server URL is given, and what the tests use. A server can be
// crashed and restarted in place, for the nemesis.
package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/internal/files"
)

// ErrMissing is returned when a server binary is not installed.
var ErrMissing = errors.New("server binary not found")

// A Host is where a server runs, when not on this machine's loopback: a
// network namespace of a test network (topology.NetnsHost), on an address
// of its own.
type Host interface {
	// Command runs name with args on the host, in place of it (its PID is
	// the server's), as root.
	Command(name string, args ...string) *exec.Cmd
	// IP is the host's address, which the server listens on.
	IP() string
}

// A Server is a throwaway server process.
type Server struct {
	URL  string // how to reach it
	Addr string // its host:port

	host  Host   // where it runs; nil for this machine, on 127.0.0.1
	node  Node   // or the machine reached over SSH it runs on; nil for none
	name  string // for messages: "redis-server", "postgres"
	bin   string
	args  []string
	cred  *syscall.Credential
	user  string         // on a node, the user it runs as; "" for the one hiatus logs in as
	clock bool           // on a node, it runs under a fake clock
	dir   string         // removed on Stop
	home  *files.Dir     // dir, open, for a server of this machine; nil on a node
	log   string         // the server's own log, in dir, quoted when it fails
	keep  string         // where Stop copies the log; "" for nowhere
	quit  syscall.Signal // the signal that ends it cleanly
	crash syscall.Signal // the signal that ends it abruptly
	ready func(context.Context) error

	mu     sync.Mutex
	pid    int
	signal func(syscall.Signal) error // to the process now; nil before it starts
	done   chan struct{}
	err    error // the process's exit, once done is closed
}

// Name names the server's program: "redis-server", "postgres".
func (s *Server) Name() string { return s.name }

// ProcessID returns the server's PID now; it changes when it is restarted.
// It is 0 for a server on a node: a PID of another machine, which a
// signal or a search for children here would take for one of this.
func (s *Server) ProcessID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node != nil {
		return 0
	}
	return s.pid
}

// Signal sends sig to the server's process now, here or on its node (a
// restart makes another process): what a pause of it stops and resumes.
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	signal := s.signal
	s.mu.Unlock()
	if signal == nil {
		return fmt.Errorf("%s: not started", s.name)
	}
	return signal(sig)
}

// Stop ends the server (its clean shutdown signal, then SIGKILL after a
// grace period) and removes its directory. A stopped server (SIGSTOP) is
// resumed first, so that it can exit. Stop may be called more than once.
func (s *Server) Stop() error {
	if s == nil {
		return nil
	}
	s.end(s.quit, 5*time.Second)
	if s.node != nil {
		return s.stopOnNode()
	}
	var kept error
	if s.keep != "" && s.home != nil {
		kept = s.keepLog()
	}
	if s.home != nil {
		if err := removeDir(s.home); err != nil {
			return errors.Join(kept, fmt.Errorf("remove %s: %w", s.dir, err))
		}
		s.home, s.dir = nil, ""
	}
	return kept
}

// keptBytes bounds a kept log: its first 256 MiB, which a run's server
// writes only when something is badly wrong.
const keptBytes = 256 << 20

// keepLog copies the server's log to the file s.keep, a run's (which a
// link or a pipe planted there cannot divert), as it is read: a log may be
// larger than is worth holding in memory. The log is read as a name in
// the server's directory: no link there is followed.
func (s *Server) keepLog() error {
	r, err := s.home.Open(filepath.Base(s.log))
	if err != nil {
		return fmt.Errorf("keep %s's log: %w", s.name, err)
	}
	defer r.Close()
	if err := copyTo(s.keep, io.LimitReader(r, keptBytes)); err != nil {
		return fmt.Errorf("keep %s's log: %w", s.name, err)
	}
	return nil
}

// copyTo writes what r holds, to its end, to the file at path, whole or
// not at all.
func copyTo(path string, r io.Reader) error {
	w, err := files.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}

// KeepLog has Stop copy the server's own log to path, as it was when the
// server had ended, before it removes the server's directory.
func (s *Server) KeepLog(path string) { s.keep = path }

// Crash ends the server abruptly — SIGKILL for Redis, an immediate shutdown
// for PostgreSQL — and waits until it has exited. Its directory stays, for
// Restart.
func (s *Server) Crash() error {
	s.end(s.crash, 10*time.Second)
	return nil
}

func (s *Server) end(sig syscall.Signal, grace time.Duration) {
	s.mu.Lock()
	signal, done := s.signal, s.done
	s.mu.Unlock()
	if signal == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = signal(syscall.SIGCONT)
	_ = signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = signal(syscall.SIGKILL)
		<-done
	}
}

// Restart starts the server again, on the same port and directory, and
// waits until it answers.
func (s *Server) Restart(ctx context.Context) error {
	s.end(s.crash, 10*time.Second)
	if err := s.start(); err != nil {
		return err
	}
	return s.wait(ctx)
}

// start launches the process. Setpgid keeps a terminal's Ctrl-C from
// reaching it before the run has finished with it; Pdeathsig ends it if the
// run dies.
func (s *Server) start() error {
	if s.node != nil {
		return s.startOnNode()
	}
	cmd := s.command()
	cmd.Dir = s.dir
	// The log is this process's, in a directory the server's user cannot
	// write in: the server writes it through the descriptor it inherits,
	// and never opens it by name.
	logf, err := s.home.Append(filepath.Base(s.log))
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	defer logf.Close()
	if err := logf.Chmod(0o600); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.started(cmd.Process.Pid, func(sig syscall.Signal) error { return cmd.Process.Signal(sig) }, cmd.Wait)
	return nil
}

// started records the server's process, started here or on a node: its
// PID, how to signal it, and, once wait returns, its exit.
func (s *Server) started(pid int, signal func(syscall.Signal) error, wait func() error) {
	done := make(chan struct{})
	s.mu.Lock()
	s.pid, s.signal, s.done = pid, signal, done
	s.mu.Unlock()
	go func() {
		err := wait()
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(done)
	}()
}

// command is the server's command: on its host, if it has one.
func (s *Server) command() *exec.Cmd {
	if s.host == nil {
		cmd := exec.Command(s.bin, s.args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	argv := append([]string{s.bin}, s.args...)
	if s.cred != nil {
		// Entering the host takes root, so the server's own user is put on
		// after; a change of user clears the parent-death signal, which
		// setpriv sets again.
		argv = append([]string{"setpriv", fmt.Sprintf("--reuid=%d", s.cred.Uid), fmt.Sprintf("--regid=%d", s.cred.Gid),
			"--clear-groups", "--pdeathsig=KILL"}, argv...)
	}
	cmd := s.host.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// ip is the address the server listens on: its node's, its host's, or loopback.
func (s *Server) ip() string {
	switch {
	case s.node != nil:
		return s.node.IP()
	case s.host == nil:
		return "127.0.0.1"
	}
	return s.host.IP()
}

// wait polls ready until it succeeds, the process exits or ctx ends.
func (s *Server) wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		last := s.ready(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case <-done:
			s.mu.Lock()
			err := s.err
			s.mu.Unlock()
			return fmt.Errorf("%s exited before it answered (%v)%s", s.name, err, s.tail())
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer within 30 s: %w%s", s.name, last, s.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// launch starts s on a free port, trying a few ports in case another process
// takes the one the kernel offered before the server binds it.
func launch(ctx context.Context, s *Server, configure func(port int)) (*Server, error) {
	var lastErr error
	for range 5 {
		port, err := s.freePort()
		if err != nil {
			return nil, err
		}
		configure(port)
		if err := s.start(); err != nil {
			return nil, err
		}
		if lastErr = s.wait(ctx); lastErr == nil {
			return s, nil
		}
		s.end(syscall.SIGKILL, time.Second)
	}
	return nil, lastErr
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last lines of the server's log, for error messages.
func (s *Server) tail() string {
	if s.node != nil {
		return s.tailOnNode()
	}
	if s.home == nil {
		return ""
	}
	return tail(s.home, filepath.Base(s.log))
}

// tailBytes is how much of a log's end tail reads: a server's last
// lines, unless it wrote very long ones.
const tailBytes = 64 << 10

// tail returns the last lines of the log name in d, for error messages,
// from no more than its last tailBytes.
func tail(d *files.Dir, name string) string {
	f, err := d.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > tailBytes {
		if _, err := f.Seek(fi.Size()-tailBytes, io.SeekStart); err != nil {
			return ""
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, tailBytes))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "; its log (" + d.Join(name) + ") ends:\n  " + strings.Join(lines, "\n  ")
}

// tempDir makes the server's private directory, with a file naming this
// process so that a later run can remove directories left by a run that
// was killed, and returns it open. It is this process's user's, as is
// every file in it, and no one else may write in it: the server's own
// files are in a subdirectory, data, the one made its own when it runs as
// another user, cred's (PostgreSQL as root), who may pass through the
// directory (0711) to it but not plant a link where this process opens a
// file (its log, its configuration). RemoveOrphans removes it, whoever
// the server ran as.
func tempDir(prefix string, cred *syscall.Credential) (_ *files.Dir, err error) {
	RemoveOrphans()
	path, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	d, err := files.OpenDir(path)
	if err != nil {
		os.RemoveAll(path)
		return nil, err
	}
	defer func() {
		if err != nil {
			removeDir(d)
		}
	}()
	if err := d.WriteFile(ownerFile, []byte(strconv.Itoa(os.Getpid()))); err != nil {
		return nil, err
	}
	if cred == nil {
		return d, nil
	}
	if err := os.Chmod(path, 0o711); err != nil {
		return nil, err
	}
	data, err := d.MakeSub("data")
	if err != nil {
		return nil, err
	}
	data.Close()
	// By name: no one else can have put anything in its place.
	if err := errors.Join(os.Lchown(d.Join("data"), int(cred.Uid), int(cred.Gid)), os.Chmod(d.Join("data"), 0o700)); err != nil {
		return nil, err
	}
	return d, nil
}

// removeDir lets the directory d go and removes it with all it holds (no
// link in it followed).
func removeDir(d *files.Dir) error {
	d.Close()
	return os.RemoveAll(d.Path())
}

// ScratchDir makes a directory in the temporary directory for any scratch
// space of a run (the history's sort, say), marked with this process as
// its owner so that a later run removes it should this one be killed
// before it does. The caller removes it when done.
func ScratchDir(name string) (string, error) {
	d, err := tempDir("hiatus-"+name+"-", nil)
	if err != nil {
		return "", err
	}
	d.Close()
	return d.Path(), nil
}

// ownerFile holds the PID of the process that made a server directory.
const ownerFile = "hiatus.owner"

// RemoveOrphans removes the server directories in the temporary directory
// whose owner process is gone: what a run killed with SIGKILL leaves. Its
// servers died with it (their parent-death signal). The temporary
// directory is shared: only a directory of this process's user, not a
// link, is looked in, and its owner file only read if it is a small
// regular file (a pipe planted there would hang every run).
func RemoveOrphans() {
	tmp, err := files.OpenDir(os.TempDir())
	if err != nil {
		return
	}
	defer tmp.Close()
	names, _ := filepath.Glob(filepath.Join(tmp.Path(), "hiatus-*"))
	for _, name := range names {
		name = filepath.Base(name)
		if pid, ok := orphanOwner(tmp, name); ok {
			if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
				os.RemoveAll(tmp.Join(name))
			}
		}
	}
}

// orphanOwner is the PID in the owner file of the directory name in tmp,
// if it is a directory of this process's user (not a link) with one.
func orphanOwner(tmp *files.Dir, name string) (int, bool) {
	fi, err := tmp.Lstat(name)
	if err != nil || !fi.IsDir() {
		return 0, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return 0, false
	}
	d, err := tmp.Sub(name)
	if err != nil {
		return 0, false
	}
	defer d.Close()
	b, err := d.ReadFile(ownerFile, 32)
	if err != nil {
		return 0, false // not ours, or being made
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}
