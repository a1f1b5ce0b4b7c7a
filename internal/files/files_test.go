package files

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// plant makes the things an attacker could leave in a shared directory:
// a file, a named pipe, links to a file outside it, and a directory.
func plant(t *testing.T) (dir, outside string) {
	t.Helper()
	dir, outside = t.TempDir(), filepath.Join(t.TempDir(), "secret")
	must(t, os.WriteFile(outside, []byte("outside"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "file"), []byte("0123456789"), 0o644))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(dir, "abs-link")))
	must(t, os.Symlink("file", filepath.Join(dir, "rel-link")))
	must(t, os.Symlink("../"+filepath.Base(filepath.Dir(outside)), filepath.Join(dir, "dir-link")))
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	return dir, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRead: only a regular file is read, never a pipe (which would hang
// the test), a device, or more than the limit; inside a Dir no link is
// followed, even to a file inside it.
func TestRead(t *testing.T) {
	dir, _ := plant(t)
	d, err := OpenDir(dir)
	must(t, err)
	defer d.Close()
	for _, c := range []struct {
		name  string
		read  func() ([]byte, error)
		want  string
		isErr error
	}{
		{"path file", func() ([]byte, error) { return ReadFile(filepath.Join(dir, "file"), 10) }, "0123456789", nil},
		{"path over limit", func() ([]byte, error) { return ReadFile(filepath.Join(dir, "file"), 9) }, "", ErrTooLarge},
		{"path fifo", func() ([]byte, error) { return ReadFile(filepath.Join(dir, "fifo"), 10) }, "", ErrNotRegular},
		{"path device", func() ([]byte, error) { return ReadFile("/dev/zero", 10) }, "", ErrNotRegular},
		{"path dir", func() ([]byte, error) { return ReadFile(dir, 10) }, "", ErrNotRegular},
		{"path link followed", func() ([]byte, error) { return ReadFile(filepath.Join(dir, "abs-link"), 10) }, "outside", nil},
		{"dir file", func() ([]byte, error) { return d.ReadFile("file", 10) }, "0123456789", nil},
		{"dir over limit", func() ([]byte, error) { return d.ReadFile("file", 3) }, "", ErrTooLarge},
		{"dir fifo", func() ([]byte, error) { return d.ReadFile("fifo", 10) }, "", ErrNotRegular},
		{"dir link out", func() ([]byte, error) { return d.ReadFile("abs-link", 10) }, "", ErrLink},
		{"dir link in", func() ([]byte, error) { return d.ReadFile("rel-link", 10) }, "", ErrLink},
		{"dir path", func() ([]byte, error) { return d.ReadFile("sub/../file", 10) }, "", ErrName},
		{"dir dotdot", func() ([]byte, error) { return d.ReadFile("..", 10) }, "", ErrName},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := c.read()
			if c.isErr != nil {
				if !errors.Is(err, c.isErr) {
					t.Fatalf("got %q, %v; want %v", b, err, c.isErr)
				}
				return
			}
			if err != nil || string(b) != c.want {
				t.Fatalf("got %q, %v; want %q", b, err, c.want)
			}
		})
	}
}

// TestOpenDirFIFO: a pipe named as a directory is refused, not waited on.
func TestOpenDirFIFO(t *testing.T) {
	dir, _ := plant(t)
	if _, err := OpenDir(filepath.Join(dir, "fifo")); err == nil {
		t.Fatal("a named pipe opened as a directory")
	}
}

// TestSub: a planted link to a directory, inside or outside, is refused.
func TestSub(t *testing.T) {
	dir, outside := plant(t)
	d, err := OpenDir(dir)
	must(t, err)
	defer d.Close()
	must(t, os.Symlink("sub", filepath.Join(dir, "sub-link")))
	for _, name := range []string{"dir-link", "sub-link", "abs-link"} {
		if _, err := d.Sub(name); !errors.Is(err, ErrLink) {
			t.Errorf("Sub(%s): %v, want ErrLink", name, err)
		}
		if _, err := d.MakeSub(name); !errors.Is(err, ErrLink) {
			t.Errorf("MakeSub(%s): %v, want ErrLink", name, err)
		}
	}
	s, err := d.MakeSub("new")
	must(t, err)
	must(t, s.WriteFile("x", []byte("x")))
	s.Close()
	if b, err := os.ReadFile(filepath.Join(dir, "new", "x")); err != nil || string(b) != "x" {
		t.Fatalf("new/x: %q, %v", b, err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside" {
		t.Fatalf("the file outside was changed: %q", b)
	}
}

// TestWriteReplacesLinks: a write to a name where a link was planted
// replaces the link; what it pointed to is untouched.
func TestWriteReplacesLinks(t *testing.T) {
	dir, outside := plant(t)
	d, err := OpenDir(dir)
	must(t, err)
	defer d.Close()
	for _, name := range []string{"abs-link", "rel-link", "fifo", "file"} {
		must(t, d.WriteFile(name, []byte("new")))
		fi, err := os.Lstat(filepath.Join(dir, name))
		must(t, err)
		if !fi.Mode().IsRegular() {
			t.Errorf("%s is %s after the write", name, Kind(fi.Mode()))
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside" {
		t.Fatalf("a write went through a link: the file outside holds %q", b)
	}
	if err := d.WriteFile("sub", []byte("x")); err == nil {
		t.Fatal("a write replaced a directory")
	}
	if es, _ := os.ReadDir(dir); len(es) != 6 {
		t.Fatalf("%d entries after the writes, want 6 (no temporary file left): %v", len(es), es)
	}
}

// TestAppend: a log is appended to in place; a link or pipe at its name is
// refused, not written through.
func TestAppend(t *testing.T) {
	dir, outside := plant(t)
	d, err := OpenDir(dir)
	must(t, err)
	defer d.Close()
	for _, name := range []string{"log", "log"} {
		f, err := d.Append(name)
		must(t, err)
		_, err = f.WriteString("line\n")
		must(t, err)
		must(t, f.Close())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "log")); string(b) != "line\nline\n" {
		t.Fatalf("log holds %q", b)
	}
	for _, name := range []string{"abs-link", "rel-link", "fifo", "sub"} {
		if f, err := d.Append(name); err == nil {
			f.Close()
			t.Errorf("Append(%s) opened it", name)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside" {
		t.Fatalf("an append went through a link: %q", b)
	}
}

// TestCreatePath: a path the user named takes a new or regular file;
// a link, a pipe or a device there is refused and left as it was.
func TestCreatePath(t *testing.T) {
	dir, outside := plant(t)
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"new", true}, {"file", true}, {"abs-link", false}, {"fifo", false}, {"sub", false},
		{"missing/x", false},
	} {
		p := filepath.Join(dir, c.name)
		err := Writable(p)
		if err == nil {
			err = WriteFile(p, []byte("new"))
		}
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
	if err := WriteFile("/dev/null", nil); err == nil {
		t.Error("a write replaced /dev/null")
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside" {
		t.Fatalf("a write went through a link: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "fifo")); fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Fatal("the named pipe was replaced")
	}
}

// TestReadDir bounds a listing.
func TestReadDir(t *testing.T) {
	dir, _ := plant(t)
	d, err := OpenDir(dir)
	must(t, err)
	defer d.Close()
	if es, err := d.ReadDir(6); err != nil || len(es) != 6 {
		t.Fatalf("ReadDir(6): %d, %v", len(es), err)
	}
	if _, err := d.ReadDir(5); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadDir(5): %v, want ErrTooLarge", err)
	}
}

// TestMakeSubPlanted: a directory found where hiatus makes one must be
// this user's and not writable by everyone: one planted by someone else
// could be swapped, or its files, after hiatus looked. MakeNew takes none.
func TestMakeSubPlanted(t *testing.T) {
	dir, _ := plant(t)
	d, err := OpenDir(dir)
	must(t, err)
	defer d.Close()
	must(t, os.Mkdir(filepath.Join(dir, "others"), 0o755))
	must(t, os.Mkdir(filepath.Join(dir, "open"), 0o755))
	must(t, os.Chmod(filepath.Join(dir, "open"), 0o777))
	must(t, os.Mkdir(filepath.Join(dir, "sticky"), 0o755))
	must(t, os.Chmod(filepath.Join(dir, "sticky"), 0o777|fs.ModeSticky))
	if os.Geteuid() == 0 {
		must(t, os.Chown(filepath.Join(dir, "others"), 65534, 65534))
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{{"sub", true}, {"open", false}, {"sticky", true}, {"others", os.Geteuid() != 0}} {
		s, err := d.MakeSub(c.name)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrNotOwn)) {
			t.Errorf("MakeSub(%s): %v, want ok %v", c.name, err, c.ok)
		}
		if err == nil {
			s.Close()
		}
	}
	if _, err := d.MakeNew("sub"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("MakeNew of an existing directory: %v, want fs.ErrExist", err)
	}
	s, err := d.MakeNew("fresh")
	must(t, err)
	s.Close()
}

// TestCreateKeepsMode: a file written over a regular one keeps its mode
// and, written by root, its owner: a private report stays private.
func TestCreateKeepsMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "report")
	must(t, os.WriteFile(p, []byte("old"), 0o600))
	if os.Geteuid() == 0 {
		must(t, os.Chown(p, 65534, 65534))
	}
	must(t, WriteFile(p, []byte("new")))
	fi, err := os.Stat(p)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after the write, want 0600", fi.Mode().Perm())
	}
	if st := fi.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && st.Uid != 65534 {
		t.Errorf("owner %d after the write, want 65534", st.Uid)
	}
}
