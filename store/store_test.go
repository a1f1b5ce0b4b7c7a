package store

import (
	"errors"
	"io/fs"

	"github.com/hiatus-dev/hiatus/internal/files"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCreateAndResolve(t *testing.T) {
	root := t.TempDir()
	t0 := time.Date(2026, 11, 30, 17, 13, 0, 0, time.UTC)
	first, err := Create(root, "lock-counter", t0)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Create(root, "lock-counter", t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := filepath.Base(first.Dir), "20261130T171300.000Z"; got != want {
		t.Errorf("run directory %s, want %s", got, want)
	}
	for _, link := range []string{filepath.Join(root, "latest"), filepath.Join(root, "lock-counter", "latest")} {
		target, err := filepath.EvalSymlinks(link)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := filepath.EvalSymlinks(second.Dir); target != want {
			t.Errorf("%s -> %s, want the newest run %s", link, target, want)
		}
	}

	if _, _, err := Resolve(root, ""); err == nil {
		t.Errorf("Resolve of a run without history or journal: no error")
	}
	if err := second.WriteFile(Journal, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if _, path, err := Resolve(root, ""); err != nil || filepath.Base(path) != Journal {
		t.Errorf("Resolve with only a journal: %s, %v; want the journal", path, err)
	}
	if err := second.WriteFile(History, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	run, path, err := Resolve(root, "")
	if err != nil || filepath.Base(path) != History || run.Dir == "" {
		t.Errorf("Resolve: %v %s, %v; want the run and its history", run, path, err)
	}
	if run, path, err := Resolve(root, path); err != nil || run.Dir != "" || path == "" {
		t.Errorf("Resolve of a file: %v %s, %v; want the file alone", run, path, err)
	}
	if _, _, err := Resolve(root, filepath.Join(root, "nope")); err == nil {
		t.Errorf("Resolve of a missing path: no error")
	}
	// WriteFile leaves no temporary files behind.
	entries, _ := os.ReadDir(second.Dir)
	for _, e := range entries {
		if e.Name()[0] == '.' {
			t.Errorf("temporary file %s left in the run", e.Name())
		}
	}
}

func TestCreateBadName(t *testing.T) {
	for _, name := range []string{"", "latest", "a/b", `a\b`} {
		if _, err := Create(t.TempDir(), name, time.Now()); err == nil {
			t.Errorf("Create(%q): no error", name)
		}
	}
}

// TestResolveComparison: a comparison's directory is no run; the error
// points at the runs it lists.
func TestResolveComparison(t *testing.T) {
	dir := t.TempDir()
	list := "1\t1\tsetnx 500ms sigstop\tstore/lock-counter/20261201T000000.000Z\n"
	if err := os.WriteFile(filepath.Join(dir, CompareRuns), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Resolve("", dir)
	if err == nil || !strings.Contains(err.Error(), "is a comparison, not a run") ||
		!strings.Contains(err.Error(), "such as: hiatus check store/lock-counter/20261201T000000.000Z") {
		t.Errorf("Resolve of a comparison: %v", err)
	}
}

// TestWriteFileMode: files a run writes whole are as readable as those it
// appends to.
func TestWriteFileMode(t *testing.T) {
	run := Run{Dir: t.TempDir()}
	if err := run.WriteFile(Results, []byte("{:valid? true}\n")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(run.Path(Results))
	if err != nil {
		t.Fatal(err)
	}
	// As a file the run appends to is made: 0644 less the umask.
	f, err := os.OpenFile(run.Path(Journal), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	ji, err := os.Stat(run.Path(Journal))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != ji.Mode().Perm() {
		t.Errorf("%s is %v, a file the run appends to %v", Results, fi.Mode().Perm(), ji.Mode().Perm())
	}
}

// TestPlantedLinks: a link planted in a run directory is neither written
// through nor read: a link at a run file's name is replaced by the file or
// refused, and a run whose history is a link is not read. A test's
// directory that is a link is the user's own (a larger disk) and is
// followed; a run's directory that already exists is refused.
func TestPlantedLinks(t *testing.T) {
	root, elsewhere := t.TempDir(), t.TempDir()
	secret := filepath.Join(elsewhere, "secret")
	if err := os.WriteFile(secret, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if run, err := Create(root, "linked", t0); err != nil {
		t.Errorf("Create through a test directory that is a link: %v", err)
	} else if _, err := os.Stat(filepath.Join(elsewhere, filepath.Base(run.Dir))); err != nil {
		t.Errorf("the run is not where the test directory's link points: %v", err)
	}
	if _, err := Create(root, "linked", t0); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create into an existing run directory: %v, want fs.ErrExist", err)
	}
	run, err := Create(root, "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{Results, Log} {
		if err := os.Symlink(secret, run.Path(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := run.WriteFile(Results, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if f, err := run.Append(Log); err == nil {
		f.Close()
		t.Error("Append opened a log that is a link")
	}
	if b, _ := os.ReadFile(secret); string(b) != "keep" {
		t.Fatalf("a write went through a planted link: %s holds %q", secret, b)
	}
	if err := os.Symlink(secret, run.Path(History)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Resolve(root, run.Dir); !errors.Is(err, files.ErrLink) {
		t.Errorf("Resolve of a run whose history is a link: %v, want files.ErrLink", err)
	}
}

// TestPlainName: a test's name is a directory of the store of its own and
// is shown on terminals: no path, no . or .., nothing a terminal acts on.
func TestPlainName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"lock-counter", true}, {"links-setnx-500ms-none", true}, {"a b", true}, {"ünïcode", true},
		{"", false}, {".", false}, {"..", false}, {"latest", false}, {"a/b", false}, {`a\b`, false},
		{"zz\x1b[2J", false}, {"a\nb", false}, {"a\u202eb", false}, {"\xff", false},
		{strings.Repeat("x", MaxName), true}, {strings.Repeat("x", MaxName+1), false},
	} {
		if got := PlainName(c.name); got != c.ok {
			t.Errorf("PlainName(%q) = %v, want %v", c.name, got, c.ok)
		}
	}
}
