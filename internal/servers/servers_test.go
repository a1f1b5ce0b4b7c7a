package servers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// TestThrowaway starts both servers, crashes and restarts each in place,
// stops them, and checks what survives each step: Redis keeps nothing over a
// crash, PostgreSQL keeps its data; after Stop no process and no directory
// is left.
func TestThrowaway(t *testing.T) {
	ctx := context.Background()
	r, err := StartRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	p, err := StartPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	// Whoever runs it: another local user could run commands as this one.
	checkPassword(t, p)

	opt, err := redis.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("redis: %v", err)
	}
	c, err := pgx.Connect(ctx, p.URL)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatalf("postgres: %v", err)
	}
	c.Close(ctx)

	for _, s := range []*Server{r, p} {
		old := s.ProcessID()
		if err := s.Crash(); err != nil {
			t.Fatal(err)
		}
		if err := s.Restart(ctx); err != nil {
			t.Fatalf("restart %s: %v", s.name, err)
		}
		if s.ProcessID() == old {
			t.Errorf("%s: same pid %d after a restart", s.name, old)
		}
	}
	if err := rdb.Get(ctx, "k").Err(); err != redis.Nil {
		t.Errorf("redis after a crash: GET k = %v, want redis.Nil (nothing kept)", err)
	}
	c, err = pgx.Connect(ctx, p.URL)
	if err != nil {
		t.Fatalf("postgres after a crash: %v", err)
	}
	var v int
	if err := c.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Errorf("postgres after a crash: got %d, %v; want 42", v, err)
	}
	c.Close(ctx)

	for _, s := range []*Server{r, p} {
		dir, pid := s.dir, s.ProcessID()
		if err := s.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s left behind after Stop (%v)", dir, err)
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("pid %d still running after Stop", pid)
		}
	}
}

// TestRemoveOrphans: a server directory whose owner is gone is removed, one
// whose owner lives is kept.
func TestRemoveOrphans(t *testing.T) {
	d, err := tempDir("hiatus-test-", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer removeDir(d)
	mine := d.Path()
	orphan, err := os.MkdirTemp("", "hiatus-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(orphan)
	// PID 0x3fffffff is above pid_max: no such process.
	if err := os.WriteFile(orphan+"/"+ownerFile, []byte("1073741823"), 0o644); err != nil {
		t.Fatal(err)
	}
	RemoveOrphans()
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan %s kept", orphan)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("live %s removed: %v", mine, err)
	}
}

// TestRemoveOrphansPlanted: in the temporary directory, which anyone may
// write in, RemoveOrphans neither waits on a named pipe planted as a
// directory's owner file (it would hang every run), nor removes a
// directory of another user's, nor one reached through a link, though
// each names a process that is gone.
func TestRemoveOrphansPlanted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("NOT RUN: a directory of another user's takes root to plant (CI runs as root)")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	elsewhere := t.TempDir()
	dead := []byte("1073741823") // above pid_max: no such process
	if err := errors.Join(os.Mkdir(filepath.Join(tmp, "hiatus-fifo"), 0o755), os.Mkdir(filepath.Join(tmp, "hiatus-foreign"), 0o755),
		os.Mkdir(filepath.Join(elsewhere, "hiatus-target"), 0o755),
		os.WriteFile(filepath.Join(elsewhere, "hiatus-target", ownerFile), dead, 0o644),
		os.Symlink(filepath.Join(elsewhere, "hiatus-target"), filepath.Join(tmp, "hiatus-link")),
		os.WriteFile(filepath.Join(tmp, "hiatus-foreign", ownerFile), dead, 0o644),
		os.Chown(filepath.Join(tmp, "hiatus-foreign", ownerFile), 65534, 65534),
		os.Chown(filepath.Join(tmp, "hiatus-foreign"), 65534, 65534),
		syscall.Mkfifo(filepath.Join(tmp, "hiatus-fifo", ownerFile), 0o644)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { RemoveOrphans(); close(done) }()
	// A reader waiting on the pipe lets a writer open it at once: polled
	// until RemoveOrphans returns, which it does unless it waits there.
	fifo := filepath.Join(tmp, "hiatus-fifo", ownerFile)
	for waiting := false; !waiting; {
		select {
		case <-done:
			waiting = true
			continue
		case <-time.After(10 * time.Millisecond):
		}
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			t.Error("RemoveOrphans waits on a named pipe planted as an owner file")
			w.Write(dead)
			w.Close()
			<-done
			break
		}
	}
	for _, d := range []string{filepath.Join(tmp, "hiatus-foreign"), filepath.Join(tmp, "hiatus-link"), filepath.Join(elsewhere, "hiatus-target")} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s removed (%v): it is not this user's own directory", d, err)
		}
	}
}

// TestKeepLog: a kept log is the server's own, as it was once the server
// had ended, and outlives the server's directory.
func TestKeepLog(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		start func(context.Context) (*Server, error)
		ended string // what the server logs as it ends
	}{
		{StartRedis, "bye bye"},
		{StartPostgres, "database system is shut down"},
	} {
		s, err := tc.start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		kept := filepath.Join(t.TempDir(), s.Name()+".log")
		s.KeepLog(kept)
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(kept)
		if err != nil || !strings.Contains(string(b), tc.ended) {
			t.Errorf("%s's kept log (%v) lacks %q:\n%s", s.Name(), err, tc.ended, b)
		}
		if _, err := os.Stat(s.log); !os.IsNotExist(err) {
			t.Errorf("%s's directory is still there: %v", s.Name(), err)
		}
	}
}

// TestTail: the end of a log whose lines are long is read from its last
// tailBytes alone, and gives its last eight lines.
func TestTail(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	text := strings.Repeat("x", 4*tailBytes) + "\n"
	for i := range 10 {
		text += "line " + strconv.Itoa(i) + "\n"
	}
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := files.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := tail(d, "log")
	want := "; its log (" + log + ") ends:\n  line 2\n  line 3\n  line 4\n  line 5\n  line 6\n  line 7\n  line 8\n  line 9"
	if got != want {
		t.Errorf("tail = %.200q, want %q", got, want)
	}
}
