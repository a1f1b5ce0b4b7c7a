// Package store owns the layout of runs on disk, as Jepsen lays out its
// store: store/<test-name>/<start-time>/ holding history.edn, results.edn,
// test.edn and hiatus.log, with store/latest and store/<test-name>/latest
// links to the newest run. It knows files and names, nothing of their content.
package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hiatus-dev/hiatus/internal/files"
)

// File names inside a run directory.
const (
	History = "history.edn" // the ops, one EDN map per line, sorted by time
	Journal = "journal.edn" // the ops as they arrived, flushed as they come
	Results = "results.edn" // the checkers' verdicts
	Test    = "test.edn"    // the run's full configuration
	Log     = "hiatus.log"  // what the run printed and did
	// Schedule is the faults the nemesis injected, as they happened:
	// `hiatus run --schedule` and `hiatus replay` inject them again.
	Schedule = "schedule.edn"
	// Metrics is the directory of the workers' guard metrics: each worker
	// process writes metrics/worker-<process>.prom, in Prometheus's text
	// format, after each write its guard refused and when it ends.
	Metrics = "metrics"

	// LockServer is the lock server's record: what the lock's own
	// servers did to its keys, one event a line, sorted by time
	// (docs/history-format.md); LockServerJournal the same events as they
	// came, while the run goes, removed once LockServer is whole.
	LockServer        = "lockserver.edn"
	LockServerJournal = "lockserver.journal.edn"

	// The logs of the throwaway servers a run started, kept when they go.
	RedisLog    = "redis-server.log"
	PostgresLog = "postgres.log"
	// ZooKeeperLog is the name of the log of the ZooKeeper lock's server
	// i: ZooKeeperLog(0) is zookeeper-0.log.
	ZooKeeperLog = "zookeeper-%d.log"

	// CompareRuns is the run list a comparison's directory holds: row, run,
	// setup and run directory, tab-separated, one run a line.
	CompareRuns = "runs.txt"
	// CompareTable and CompareTableJSON are a comparison's table, as text
	// and as data (serve renders both).
	CompareTable     = "table.md"
	CompareTableJSON = "table.json"
)

// TimeLayout names run directories by their start time, in UTC, so that
// they sort by time.
const TimeLayout = "20060102T150405.000Z"

// A Run is one run's directory.
type Run struct {
	Dir string
}

// Path returns the path of the file name inside the run.
func (r Run) Path(name string) string { return filepath.Join(r.Dir, name) }

// MaxName is the longest test name, in bytes: a directory's name, with
// room under the file system's 255 for what runs append (-replay, -shrink).
const MaxName = 200

// PlainName reports whether name can name a test: a directory of the store
// of its own (no / or \, not . or .. or latest), printable (it is shown on
// terminals and in pages), and at most MaxName bytes.
func PlainName(name string) bool {
	switch {
	case name == "" || name == "." || name == ".." || name == "latest" || len(name) > MaxName:
		return false
	case strings.ContainsAny(name, `/\`) || !utf8.ValidString(name):
		return false
	}
	return !strings.ContainsFunc(name, func(r rune) bool { return !strconv.IsPrint(r) })
}

// Create makes the directory for a run of test started at start under root,
// and points root/latest and root/<test>/latest at it. The store is the
// user's: its test directories may be links (to a larger disk, say). The
// run's own directory is new, made by this run and no one else, and the
// files written into it are never written through a link (internal/files).
func Create(root, test string, start time.Time) (Run, error) {
	if !PlainName(test) {
		return Run{}, fmt.Errorf("store: bad test name %q", test)
	}
	name := start.UTC().Format(TimeLayout)
	top, err := files.MakeDir(root)
	if err != nil {
		return Run{}, fmt.Errorf("store: create run directory: %w", err)
	}
	defer top.Close()
	tests, err := files.MakeDir(filepath.Join(root, test))
	if err != nil {
		return Run{}, fmt.Errorf("store: create run directory: %w", err)
	}
	defer tests.Close()
	run, err := tests.MakeNew(name)
	if err != nil {
		return Run{}, fmt.Errorf("store: create run directory: %w", err)
	}
	run.Close()
	if err := top.Link(filepath.Join(test, name), "latest"); err != nil {
		return Run{}, fmt.Errorf("store: link: %w", err)
	}
	if err := tests.Link(name, "latest"); err != nil {
		return Run{}, fmt.Errorf("store: link: %w", err)
	}
	return Run{Dir: filepath.Join(root, test, name)}, nil
}

// Writable makes the store root if it is missing and says whether runs can
// be written into it, by starting a file there and dropping it: a run
// refuses an unwritable store before it starts a server, not after.
func Writable(root string) error {
	d, err := files.MakeDir(root)
	if err != nil {
		return fmt.Errorf("store %s: %w", root, err)
	}
	defer d.Close()
	f, err := d.Create("writable")
	if err != nil {
		return fmt.Errorf("store %s cannot be written: %w", root, err)
	}
	f.Abort()
	return nil
}

// Resolve turns what a user names into a run directory or a history file:
// a run directory (or a link to one), a history file, or "" for root/latest.
// It returns the run (Dir empty when path is a lone file) and the history
// file to read: history.edn, or the journal when a run died before writing it.
func Resolve(root, path string) (Run, string, error) {
	if path == "" {
		path = filepath.Join(root, "latest")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Run{}, "", fmt.Errorf("store: %w", err)
	}
	if !fi.IsDir() {
		return Run{}, path, nil
	}
	d, err := files.OpenDir(path)
	if err != nil {
		return Run{}, "", fmt.Errorf("store: %w", err)
	}
	defer d.Close()
	run := Run{Dir: path}
	for _, name := range []string{History, Journal} {
		// A run directory may come from anyone: its history is read only
		// if it is a file of its own, not a link to one elsewhere.
		if fi, err := d.Lstat(name); err == nil {
			if fi.Mode()&fs.ModeSymlink != 0 {
				return Run{}, "", fmt.Errorf("store: %s: %w", run.Path(name), files.ErrLink)
			}
			return run, run.Path(name), nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return Run{}, "", fmt.Errorf("store: %w", err)
		}
	}
	if _, err := d.Lstat(CompareRuns); err == nil {
		runs, _ := d.ReadFile(CompareRuns, 1<<20) // for an example only
		return Run{}, "", fmt.Errorf("store: %s is a comparison, not a run: check one of the runs %s lists%s",
			path, filepath.Join(path, CompareRuns), firstRun(runs))
	}
	return Run{}, "", fmt.Errorf("store: %s holds no %s or %s", path, History, Journal)
}

// firstRun names the first run of a comparison's run list, as an example:
// ", such as hiatus check DIR"; "" when it lists none.
func firstRun(list []byte) string {
	line, _, _ := strings.Cut(string(list), "\n")
	fields := strings.Split(line, "\t")
	if len(fields) < 4 || fields[3] == "" {
		return ""
	}
	return ", such as: hiatus check " + fields[3]
}

// WriteFile writes data to name inside the run, whole or not at all: a
// crash never leaves half a file where a whole one was, and a link planted
// at name is replaced, not written through.
func (r Run) WriteFile(name string, data []byte) error {
	return r.WriteWith(name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteWith writes name inside the run with write, buffered, whole or not
// at all, as WriteFile does: for files made as they are written (a page, a
// drawing). write's error is returned as it is.
func (r Run) WriteWith(name string, write func(io.Writer) error) error {
	d, err := files.OpenDir(r.Dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer d.Close()
	return d.WriteWith(name, write)
}

// Create starts writing name inside the run, for files too large to make
// in memory first; see WriteFile. Close or Abort it.
func (r Run) Create(name string) (*files.File, error) {
	f, err := files.CreateIn(r.Dir, name)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return f, nil
}

// Append opens name inside the run for writing at its end (a log, the
// journal), making it if it is missing; a link or special file there is
// refused.
func (r Run) Append(name string) (*os.File, error) {
	d, err := files.OpenDir(r.Dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	defer d.Close()
	f, err := d.Append(name)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return f, nil
}

// MakeDir makes the directory name inside the run, a directory and not a
// link, and returns its path.
func (r Run) MakeDir(name string) (string, error) {
	d, err := files.OpenDir(r.Dir)
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	defer d.Close()
	sub, err := d.MakeSub(name)
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	sub.Close()
	return r.Path(name), nil
}

// Remove removes the file name inside the run, if it is there.
func (r Run) Remove(name string) error {
	d, err := files.OpenDir(r.Dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer d.Close()
	if err := d.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// Optional returns the path of the file name inside the run, and whether
// the run has it: a run made before the file was, or without it, has not.
// A link there is refused, as Resolve refuses one: a run directory may
// come from anyone.
func (r Run) Optional(name string) (string, bool, error) {
	d, err := files.OpenDir(r.Dir)
	if err != nil {
		return "", false, fmt.Errorf("store: %w", err)
	}
	defer d.Close()
	fi, err := d.Lstat(name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("store: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", false, fmt.Errorf("store: %s: %w", r.Path(name), files.ErrLink)
	}
	return r.Path(name), true, nil
}
