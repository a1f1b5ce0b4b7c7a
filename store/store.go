// Package store owns the layout of runs on disk, as Jepsen lays out its
// store: store/<test-name>/<start-time>/ holding history.edn, results.edn,
// test.edn and hiatus.log, with store/latest and store/<test-name>/latest
// links to the newest run. It knows files and names, nothing of their content.
package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/history"
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

	// The logs of the throwaway servers a run started, kept when they go.
	RedisLog    = "redis-server.log"
	PostgresLog = "postgres.log"

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

// Create makes the directory for a run of test started at start under root,
// and points root/latest and root/<test>/latest at it.
func Create(root, test string, start time.Time) (Run, error) {
	if test == "" || strings.ContainsAny(test, `/\`) || test == "latest" {
		return Run{}, fmt.Errorf("store: bad test name %q", test)
	}
	name := start.UTC().Format(TimeLayout)
	dir := filepath.Join(root, test, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Run{}, fmt.Errorf("store: create run directory: %w", err)
	}
	if err := link(filepath.Join(test, name), filepath.Join(root, "latest")); err != nil {
		return Run{}, err
	}
	if err := link(name, filepath.Join(root, test, "latest")); err != nil {
		return Run{}, err
	}
	return Run{Dir: dir}, nil
}

// Writable makes the store root if it is missing and says whether runs can
// be written into it, by writing and removing a file there: a run refuses
// an unwritable store before it starts a server, not after.
func Writable(root string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("store %s: %w", root, err)
	}
	f, err := createTemp(root, "writable")
	if err != nil {
		return fmt.Errorf("store %s cannot be written: %w", root, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// link points the symlink at to target, replacing an older link atomically.
func link(target, at string) error {
	tmp := at + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("store: link %s: %w", at, err)
	}
	if err := os.Rename(tmp, at); err != nil {
		return fmt.Errorf("store: link %s: %w", at, err)
	}
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
	run := Run{Dir: path}
	for _, name := range []string{History, Journal} {
		if _, err := os.Stat(run.Path(name)); err == nil {
			return run, run.Path(name), nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return Run{}, "", fmt.Errorf("store: %w", err)
		}
	}
	if runs, err := history.ReadRegular(filepath.Join(path, CompareRuns)); err == nil {
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

// WriteFile writes data to name inside the run, through a temporary file and
// a rename, so that a crash never leaves half a file where a whole one was.
func (r Run) WriteFile(name string, data []byte) error {
	f, err := r.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Close()
}

// WriteWith writes name inside the run with write, buffered, whole or not
// at all, as WriteFile does: for files made as they are written (a page, a
// drawing). write's error is returned as it is.
func (r Run) WriteWith(name string, write func(io.Writer) error) error {
	f, err := r.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err = write(w); err == nil {
		err = w.Flush()
	}
	if err != nil {
		f.Abort()
		return err
	}
	return f.Close()
}

// A File is a file of a run being written: it takes its name only when
// closed, whole; until then, or when aborted, the name is left as it was.
type File struct {
	tmp  *os.File
	path string
	name string
}

// Create starts writing name inside the run, for files too large to make
// in memory first; see WriteFile. Close or Abort it.
func (r Run) Create(name string) (*File, error) {
	tmp, err := createTemp(r.Dir, name)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return &File{tmp: tmp, path: r.Path(name), name: name}, nil
}

// Write implements io.Writer.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.tmp.Write(p)
	if err != nil {
		err = fmt.Errorf("store: write %s: %w", f.name, err)
	}
	return n, err
}

// Close gives the file its name.
func (f *File) Close() error {
	if err := f.tmp.Close(); err != nil {
		os.Remove(f.tmp.Name())
		return fmt.Errorf("store: write %s: %w", f.name, err)
	}
	if err := os.Rename(f.tmp.Name(), f.path); err != nil {
		os.Remove(f.tmp.Name())
		return fmt.Errorf("store: write %s: %w", f.name, err)
	}
	return nil
}

// Abort drops what was written.
func (f *File) Abort() {
	f.tmp.Close()
	os.Remove(f.tmp.Name())
}

// createTemp creates a new file beside name in dir, as os.CreateTemp does,
// but with the mode of every other file of a run, 0644 less the umask:
// CreateTemp's 0600 would make some of a run's files private and others not.
func createTemp(dir, name string) (*os.File, error) {
	for range 100 {
		path := filepath.Join(dir, "."+name+"."+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("create a temporary file for %s in %s: every name tried exists", name, dir)
}
