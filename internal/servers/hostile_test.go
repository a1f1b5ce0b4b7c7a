package servers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/internal/sshtest"
	"github.com/jackc/pgx/v5"
)

// withoutPassword is url as a local user who does not know the server's
// password would write it.
func withoutPassword(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(u.User.Username())
	return u.String()
}

// checkPassword: the throwaway PostgreSQL s lets in a client with its URL,
// and turns away one without the password in it: any local user (or, on
// a node, any machine) could otherwise connect as its superuser and run
// commands as its user (COPY … TO PROGRAM).
func checkPassword(t *testing.T, s *Server) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatalf("connect with the server's URL: %v", err)
	}
	c.Close(ctx)
	if c, err := pgx.Connect(ctx, withoutPassword(t, s.URL)); err == nil {
		c.Close(ctx)
		t.Errorf("%s lets in a client without its password (%s)", s.Name(), withoutPassword(t, s.URL))
	}
}

// plantLog has the PostgreSQL s, as its own user, replace its log with a
// link to target, as anyone who can connect to it as its superuser can
// (COPY … TO PROGRAM). Its error is not the test's: the server's
// directory may (and should) refuse the server's user.
func plantLog(t *testing.T, s *Server, target string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, fmt.Sprintf("COPY (SELECT 1) TO PROGRAM 'ln -sf %s %s'", target, s.log))
	t.Logf("the server's user links %s to %s: %v", s.log, target, err)
}

// secretFile makes a file only root may read, holding a secret.
func secretFile(t *testing.T) (path, secret string) {
	t.Helper()
	path, secret = filepath.Join(t.TempDir(), "secret"), "SECRET-"+strconv.Itoa(os.Getpid())
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, secret
}

// checkSecret: the file at path is as secretFile made it, root's.
func checkSecret(t *testing.T, path, secret string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Errorf("%s is owned by uid %d now, not root's", path, uid)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != secret+"\n" {
		t.Errorf("%s holds %q now (%v), want %q", path, b, err, secret+"\n")
	}
}

// TestPostgresHostile: the throwaway PostgreSQL that hiatus, as root,
// starts as the user postgres lets no one in without its password, and
// no link its user plants in the server's directory has root give that
// user a root file (the log's restart chowned what the link named and
// appended to it) or copy one into the run (tail, and the log Stop keeps,
// read through the link).
func TestPostgresHostile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("NOT RUN: the server runs as another user only under root (CI runs as root)")
	}
	ctx := context.Background()
	s, err := StartPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	checkPassword(t, s)
	checkRootsDir(t, s.dir)
	secret, text := secretFile(t)
	plantLog(t, s, secret)
	if got := s.tail(); strings.Contains(got, text) {
		t.Errorf("tail read the root file the server's user linked to: %q", got)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	checkSecret(t, secret, text)
	kept := filepath.Join(t.TempDir(), "postgres.log")
	s.KeepLog(kept)
	if err := s.Stop(); err != nil {
		t.Logf("stop: %v", err)
	}
	if b, _ := os.ReadFile(kept); strings.Contains(string(b), text) {
		t.Errorf("the kept log holds the root file the server's user linked to:\n%s", b)
	}
}

// checkRootsDir: the server's directory dir, and every file in it, is
// root's, and no one else may write there; only its data is the server's.
func checkRootsDir(t *testing.T, dir string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"."}
	for _, e := range es {
		names = append(names, e.Name())
	}
	for _, name := range names {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		uid := fi.Sys().(*syscall.Stat_t).Uid
		switch {
		case name == "data" && uid == 0:
			t.Errorf("%s/data is root's, want the server's", dir)
		case name != "data" && uid != 0:
			t.Errorf("%s/%s is uid %d's, want root's", dir, name, uid)
		case name != "data" && fi.Mode().Perm()&0o022 != 0:
			t.Errorf("%s/%s has mode %v: others may write in it", dir, name, fi.Mode())
		}
	}
}

// orphanEnv has the test binary start a throwaway PostgreSQL, say its
// directory and wait to be killed: a run killed with SIGKILL.
const orphanEnv = "HIATUS_TEST_ORPHAN_POSTGRES"

// TestRemoveOrphansPostgres: what a run killed with SIGKILL leaves of its
// throwaway PostgreSQL, which ran as the user postgres, is removed by the
// next run.
func TestRemoveOrphansPostgres(t *testing.T) {
	if os.Getenv(orphanEnv) != "" {
		orphanPostgres()
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("NOT RUN: the server runs as another user only under root (CI runs as root)")
	}
	// A temporary directory of the test's own, which the server's user may
	// pass through.
	tmp := t.TempDir()
	for _, d := range []string{filepath.Dir(tmp), tmp} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", tmp)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRemoveOrphansPostgres$")
	cmd.Env = append(os.Environ(), orphanEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dir, err := bufio.NewReader(out).ReadString('\n')
	cmd.Process.Kill()
	cmd.Wait()
	dir = strings.TrimSpace(dir)
	if err != nil || !strings.HasPrefix(dir, tmp+"/hiatus-postgres-") {
		t.Fatalf("the run said %q (%v), want its PostgreSQL's directory", dir, err)
	}
	// Its servers die with it (their parent-death signal), and their
	// children with them: none is left working in the directory.
	poll(t, time.Minute, func() error {
		if working(dir) {
			return fmt.Errorf("a process still works in %s", dir)
		}
		return nil
	})
	RemoveOrphans()
	if fi, err := os.Lstat(dir); err == nil {
		t.Errorf("the killed run's %s is still there (owner uid %d)", dir, fi.Sys().(*syscall.Stat_t).Uid)
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Error(err)
	}
}

// orphanPostgres is the run TestRemoveOrphansPostgres kills.
func orphanPostgres() {
	s, err := StartPostgres(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(s.dir)
	select {}
}

// working says whether a process works in dir or under it.
func working(dir string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, p := range procs {
		if cwd, err := os.Readlink(p); err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
			return true
		}
	}
	return false
}

// TestPostgresOnNodeHostile: a throwaway PostgreSQL on a node reached
// over SSH lets no one in without its password, and neither its user's
// link in the server's directory nor one found there makes the root login
// copy a root file into the run (tail and the kept log read through it),
// or stream /dev/zero into it.
func TestPostgresOnNodeHostile(t *testing.T) {
	ctx := context.Background()
	_, h := sshtest.NodeT(t, "pgh", "postgres")
	secret, text := secretFile(t)
	for _, tc := range []struct {
		name  string
		plant func(s *Server) // the link in the log's place
	}{
		{"by the server's user", func(s *Server) { plantLog(t, s, secret) }},
		{"a link to a root file", func(s *Server) { relink(t, s.log, secret) }},
		{"a link to /dev/zero", func(s *Server) { relink(t, s.log, "/dev/zero") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := StartPostgresOnNode(ctx, h)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			checkPassword(t, s)
			checkRootsDir(t, s.dir)
			tc.plant(s)
			if got := s.tail(); strings.Contains(got, text) || strings.Contains(got, "\x00") {
				t.Errorf("tail read through the link: %q", got)
			}
			kept := filepath.Join(t.TempDir(), "postgres.log")
			s.KeepLog(kept)
			sdir := s.dir
			err = s.Stop()
			t.Logf("stop: %v", err)
			if b, _ := os.ReadFile(kept); strings.Contains(string(b), text) || strings.Contains(string(b), "\x00") {
				t.Errorf("the kept log was read through the link: %.200q", b)
			}
			if _, err := os.Lstat(sdir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the server's directory %s is still on the node (%v)", sdir, err)
			}
		})
	}
	checkSecret(t, secret, text)
}

// relink replaces the file at path with a link to target (the node's
// file system is this machine's).
func relink(t *testing.T, path, target string) {
	t.Helper()
	if err := errors.Join(os.Remove(path), os.Symlink(target, path)); err != nil {
		t.Fatal(err)
	}
}

// TestRedisConfined: the throwaway redis-server and sentinel, which run
// as root with no password, let a local user change their keys (the
// experiment's, not the machine's) but write no file outside their own
// directory, which only root may write in, and run no program: the
// configurations that name a file or a program are protected (Redis 7:
// enable-protected-configs, enable-module-command and enable-debug-command
// are off unless given, and hiatus gives none of them), those of a
// sentinel too (sentinel deny-scripts-reconfig, on unless given).
func TestRedisConfined(t *testing.T) {
	ctx := context.Background()
	p := start(t, func() (*Server, error) { return StartRedis(ctx) })
	sent := start(t, func() (*Server, error) { return StartSentinel(ctx, SentinelOptions{Addr: addr(t, p)}) })
	if fi, err := os.Stat(p.dir); err != nil || fi.Mode().Perm()&0o022 != 0 {
		t.Errorf("%s: %v (%v), want a directory no one else may write in", p.dir, fi.Mode(), err)
	}
	for _, tc := range []struct {
		s   *Server
		cmd []any
	}{
		{p, []any{"CONFIG", "SET", "dir", "/etc"}},
		{p, []any{"CONFIG", "SET", "dbfilename", "passwd"}},
		{p, []any{"CONFIG", "SET", "logfile", "/etc/passwd"}},
		{p, []any{"CONFIG", "SET", "enable-protected-configs", "yes"}},
		{p, []any{"CONFIG", "REWRITE"}},
		{p, []any{"MODULE", "LOAD", "/nonexistent.so"}},
		{p, []any{"DEBUG", "SLEEP", "0"}},
		{p, []any{"ACL", "SAVE"}},
		{sent, []any{"SENTINEL", "SET", "mymaster", "notification-script", "/bin/true"}},
		{sent, []any{"SENTINEL", "SET", "mymaster", "client-reconfig-script", "/bin/true"}},
	} {
		err := client(t, tc.s).Do(ctx, tc.cmd...).Err()
		t.Logf("%s: %v: %v", tc.s.Name(), tc.cmd, err)
		if err == nil {
			t.Errorf("%s: %v is accepted", tc.s.Name(), tc.cmd)
		}
	}
}
