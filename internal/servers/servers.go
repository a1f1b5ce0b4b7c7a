// Package servers starts throwaway redis-server and PostgreSQL instances from
// the binaries installed on the machine, on free loopback ports in a private
// temporary directory, and removes them when stopped. It is what `hiatus run`
// uses when no server URL is given, and what the tests use.
package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// ErrMissing is returned when a server binary is not installed.
var ErrMissing = errors.New("server binary not found")

// A Server is a throwaway server process.
type Server struct {
	URL  string // how to reach it
	PID  int
	cmd  *exec.Cmd
	dir  string // removed on Stop
	quit syscall.Signal
	done chan struct{}
	err  error // the process's exit, once done is closed
}

// Stop ends the server (SIGTERM, then SIGKILL after grace) and removes its
// directory. A stopped server (SIGSTOP) is resumed first, so that it can
// exit. Stop may be called more than once.
func (s *Server) Stop() error {
	if s == nil || s.cmd == nil {
		return nil
	}
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		_ = s.cmd.Process.Signal(s.quit)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("remove %s: %w", s.dir, err)
		}
		s.dir = ""
	}
	return nil
}

func (s *Server) start() error {
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.PID = s.cmd.Process.Pid
	if s.quit == 0 {
		s.quit = syscall.SIGTERM
	}
	s.done = make(chan struct{})
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	return nil
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the server binds it; the server's start then fails and the
// caller tries another.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// wait polls ready until it succeeds, the process exits or ctx ends.
func (s *Server) wait(ctx context.Context, what string, log string, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		last = ready(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("%s exited before it answered (%v)%s", what, s.err, tail(log))
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer within 30 s: %w%s", what, last, tail(log))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "; its log (" + path + ") ends:\n  " + strings.Join(lines, "\n  ")
}

// StartRedis starts redis-server on a free loopback port, keeping nothing on
// disk.
func StartRedis(ctx context.Context) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w (on Debian: apt-get install redis-server)", ErrMissing)
	}
	dir, err := os.MkdirTemp("", "hiatus-redis-")
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		log := filepath.Join(dir, "redis.log")
		s := &Server{URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port), dir: dir}
		s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", log, "--daemonize", "no")
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := s.start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
		lastErr = s.wait(ctx, "redis-server", log, func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
		rdb.Close()
		if lastErr == nil {
			return s, nil
		}
		s.dir = "" // keep the directory for the next try
		s.Stop()
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// PostgresBin finds the directory holding initdb and postgres: on PATH, else
// the newest /usr/lib/postgresql/*/bin.
func PostgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("initdb and postgres: %w (on Debian: apt-get install postgresql)", ErrMissing)
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// StartPostgres runs initdb into a private temporary directory and starts
// postgres on a free loopback port with trust authentication for the user
// postgres. initdb and postgres refuse to run as root, so as root they run as
// the unprivileged user postgres.
func StartPostgres(ctx context.Context) (*Server, error) {
	bin, err := PostgresBin()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("postgres: running as root needs the user postgres to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "hiatus-postgres-")
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres: %w", err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		log := filepath.Join(dir, "postgres.log")
		logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres: %w", err)
		}
		// SIGINT is postgres's fast shutdown; SIGTERM would wait for clients.
		s := &Server{URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
			dir: dir, quit: syscall.SIGINT}
		s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir,
			"-c", "fsync=off", "-c", "full_page_writes=off")
		s.cmd.Stdout, s.cmd.Stderr = logf, logf
		s.cmd.Dir = dir
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err = s.start()
		logf.Close()
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start postgres: %w", err)
		}
		lastErr = s.wait(ctx, "postgres", log, func(ctx context.Context) error {
			c, err := pgx.Connect(ctx, s.URL)
			if err != nil {
				return err
			}
			return c.Close(ctx)
		})
		if lastErr == nil {
			return s, nil
		}
		s.dir = ""
		s.Stop()
	}
	os.RemoveAll(dir)
	return nil, lastErr
}
