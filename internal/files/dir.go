package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A Dir is a directory hiatus reads from or writes into, held open (an
// os.Root) so that no name inside it reaches outside it. Its names are
// plain file names, one level deep (Sub descends), and no link among them
// is followed: a grid's directory, a run directory, a reproducer may be a
// shared place where anyone could plant one.
type Dir struct {
	root *os.Root
	path string
}

// OpenDir opens the directory at path, a path the user named (its links
// are followed). Anything but a directory is refused without waiting.
func OpenDir(path string) (*Dir, error) {
	if path == "" {
		path = "."
	}
	// "/." makes the open fail on anything but a directory: opening a FIFO
	// would wait for a writer.
	root, err := os.OpenRoot(strings.TrimSuffix(path, "/") + "/.")
	if err != nil {
		return nil, err
	}
	return &Dir{root: root, path: path}, nil
}

// MakeDir makes the directory at path and its parents, where missing, and
// opens it.
func MakeDir(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, err
	}
	return OpenDir(path)
}

// Path is the directory's path, as it was opened.
func (d *Dir) Path() string { return d.path }

// Join is the path of name inside the directory, for messages and for
// programs hiatus hands it to.
func (d *Dir) Join(name string) string { return filepath.Join(d.path, name) }

// Close lets the directory go.
func (d *Dir) Close() error { return d.root.Close() }

// validName refuses what is not one plain file name: a path, "..", ".".
func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%q: %w", name, ErrName)
	}
	return nil
}

// Lstat describes name itself, a link as a link.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	if err := validName(name); err != nil {
		return nil, d.pathErr("lstat", name, err)
	}
	fi, err := d.root.Lstat(name)
	return fi, d.named(err)
}

func (d *Dir) pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: d.Join(name), Err: err}
}

// named gives an error of the Root, which names a file by its name in the
// directory, the file's whole path, for messages.
func (d *Dir) named(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && !filepath.IsAbs(pe.Path) {
		pe.Path = d.Join(pe.Path)
	}
	return err
}

// Open opens the regular file name for reading; a link, a pipe or a device
// is refused without waiting.
func (d *Dir) Open(name string) (*os.File, error) {
	fi, err := d.Lstat(name)
	if err != nil {
		return nil, err
	}
	if err := d.want("open", name, fi, fs.FileMode.IsRegular); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, d.named(err)
	}
	return d.same(f, name, fi)
}

// want refuses a link, and what ok does not take, for op.
func (d *Dir) want(op, name string, fi fs.FileInfo, ok func(fs.FileMode) bool) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return d.pathErr(op, name, ErrLink)
	case !ok(fi.Mode()):
		return d.pathErr(op, name, fmt.Errorf("it is %s, %w", Kind(fi.Mode()), ErrNotRegular))
	}
	return nil
}

// same returns f if it is the file fi described: a link swapped in for
// name between the look and the open (which os.Root follows, inside the
// directory) is refused, f closed.
func (d *Dir) same(f *os.File, name string, fi fs.FileInfo) (*os.File, error) {
	now, err := f.Stat()
	if err == nil && !os.SameFile(fi, now) {
		err = d.pathErr("open", name, errors.New("replaced while it was opened"))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads the whole regular file name, refusing what Open refuses
// and a file longer than limit bytes.
func (d *Dir) ReadFile(name string, limit int64) ([]byte, error) {
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, d.Join(name), limit)
}

// ReadDir lists the directory, refusing one of more than max entries.
func (d *Dir) ReadDir(max int) ([]fs.DirEntry, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []fs.DirEntry
	for {
		es, err := f.ReadDir(1024)
		all = append(all, es...)
		if len(all) > max {
			return nil, &fs.PathError{Op: "readdir", Path: d.path, Err: fmt.Errorf("more than %d entries, %w", max, ErrTooLarge)}
		}
		if errors.Is(err, io.EOF) || len(es) == 0 && err == nil {
			return all, nil
		}
		if err != nil {
			return nil, &fs.PathError{Op: "readdir", Path: d.path, Err: err}
		}
	}
}

// Sub opens the directory name inside d, which must be a directory and
// not a link to one.
func (d *Dir) Sub(name string) (*Dir, error) {
	fi, err := d.Lstat(name)
	if err != nil {
		return nil, err
	}
	if err := d.want("open", name, fi, fs.FileMode.IsDir); err != nil {
		return nil, err
	}
	root, err := d.root.OpenRoot(name)
	if err != nil {
		return nil, d.named(err)
	}
	sub := &Dir{root: root, path: d.Join(name)}
	if now, err := root.Stat("."); err != nil || !os.SameFile(fi, now) {
		root.Close()
		return nil, d.pathErr("open", name, errors.New("replaced while it was opened"))
	}
	return sub, nil
}

// MakeSub makes the directory name inside d if it is missing, and opens
// it as Sub does. What is there already must be a directory, not a link,
// and one no one else could have put there: this user's, and not writable
// by everyone (unless sticky). Someone who planted a directory there could
// swap it, or the files written into it, after hiatus looked.
func (d *Dir) MakeSub(name string) (*Dir, error) {
	if err := validName(name); err != nil {
		return nil, d.pathErr("mkdir", name, err)
	}
	err := d.root.Mkdir(name, 0o755)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, d.named(err)
	}
	sub, serr := d.Sub(name)
	if serr != nil || err == nil {
		return sub, serr
	}
	if err := d.own(name); err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// MakeNew makes the directory name inside d, which must not exist yet,
// and opens it: for a place only this run may have written.
func (d *Dir) MakeNew(name string) (*Dir, error) {
	if err := validName(name); err != nil {
		return nil, d.pathErr("mkdir", name, err)
	}
	if err := d.root.Mkdir(name, 0o755); err != nil {
		return nil, d.named(err)
	}
	return d.Sub(name)
}

// ErrNotOwn is the error of a directory hiatus found in its place that
// someone else may have made.
var ErrNotOwn = errors.New("a directory someone else may have made")

// own refuses the directory name unless it is this user's and not
// writable by everyone (a sticky one excepted).
func (d *Dir) own(name string) error {
	fi, err := d.Lstat(name)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return nil
	case int(st.Uid) != os.Geteuid():
		return d.pathErr("mkdir", name, fmt.Errorf("%w: it belongs to uid %d, not %d", ErrNotOwn, st.Uid, os.Geteuid()))
	case fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0:
		return d.pathErr("mkdir", name, fmt.Errorf("%w: anyone may write in it (%v)", ErrNotOwn, fi.Mode().Perm()))
	}
	return nil
}

// Remove removes name (a link itself, not what it names).
func (d *Dir) Remove(name string) error {
	if err := validName(name); err != nil {
		return d.pathErr("remove", name, err)
	}
	return d.root.Remove(name)
}

// Link points the link name at target, replacing what link or file was
// there at once (a link made beside it, renamed over it).
func (d *Dir) Link(target, name string) error {
	if err := validName(name); err != nil {
		return d.pathErr("symlink", name, err)
	}
	for range 100 {
		tmp := tempName(name)
		err := d.root.Symlink(target, tmp)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := d.root.Rename(tmp, name); err != nil {
			d.root.Remove(tmp)
			return err
		}
		return nil
	}
	return d.pathErr("symlink", name, errors.New("every temporary name tried exists"))
}

// Append opens name for writing at its end, making it if it is missing:
// for a log or a journal, written as things happen, which cannot wait to
// be renamed into place. What is there must be a regular file, not a link.
func (d *Dir) Append(name string) (*os.File, error) {
	fi, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o644)
		return f, d.named(err)
	}
	if err != nil {
		return nil, err
	}
	if err := d.want("append", name, fi, fs.FileMode.IsRegular); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_APPEND|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, d.named(err)
	}
	return d.same(f, name, fi)
}

// tempName is a new name for a file being made beside name: hidden, and
// random, so that no one can plant something there beforehand.
func tempName(name string) string {
	return "." + name + "." + strconv.FormatUint(rand.Uint64(), 36)
}
