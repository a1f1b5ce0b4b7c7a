package files

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// A File is a file being written: it takes its name only when closed,
// whole; until then, or when aborted, the name is left as it was.
type File struct {
	dir  *Dir
	own  bool // dir was opened for this file alone, and closes with it
	tmp  *os.File
	temp string // tmp's name in dir
	name string
	done bool // closed or aborted
}

// Create starts writing name inside d, in a temporary file beside it
// that Close renames into place. Whatever is at name (a link planted
// there, an older file) is replaced, never written through; a directory
// there makes Close fail.
func (d *Dir) Create(name string) (*File, error) {
	if err := validName(name); err != nil {
		return nil, d.pathErr("create", name, err)
	}
	for range 100 {
		temp := tempName(name)
		// O_EXCL: a link already at the temporary name is not followed.
		tmp, err := d.root.OpenFile(temp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &File{dir: d, tmp: tmp, temp: temp, name: name}, nil
	}
	return nil, d.pathErr("create", name, errors.New("every temporary name tried exists"))
}

// Write implements io.Writer.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.tmp.Write(p)
	if err != nil {
		err = fmt.Errorf("write %s: %w", f.dir.Join(f.name), err)
	}
	return n, err
}

// Close gives the file its name.
func (f *File) Close() error {
	if f.done {
		return fmt.Errorf("write %s: %w", f.dir.Join(f.name), os.ErrClosed)
	}
	err := f.tmp.Close()
	if err == nil {
		err = f.dir.root.Rename(f.temp, f.name)
	}
	if err != nil {
		f.dir.root.Remove(f.temp)
		err = fmt.Errorf("write %s: %w", f.dir.Join(f.name), err)
	}
	f.release()
	return err
}

// Abort drops what was written; after Close it does nothing, so that it
// can be deferred.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.tmp.Close()
	f.dir.root.Remove(f.temp)
	f.release()
}

func (f *File) release() {
	f.done = true
	if f.own {
		f.dir.Close()
	}
}

// WriteFile writes data to name inside d, whole or not at all (Create).
func (d *Dir) WriteFile(name string, data []byte) error {
	return d.WriteWith(name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteWith writes name inside d with write, buffered, whole or not at
// all: for files made as they are written (a page, a drawing). write's
// error is returned as it is.
func (d *Dir) WriteWith(name string, write func(io.Writer) error) error {
	f, err := d.Create(name)
	if err != nil {
		return err
	}
	return finish(f, write)
}

func finish(f *File, write func(io.Writer) error) error {
	w := bufio.NewWriter(f)
	err := write(w)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		f.Abort()
		return err
	}
	return f.Close()
}

// Create starts writing the file at path, a path the user named, as
// Dir.Create does in path's directory. What is at path must be a regular
// file or nothing: a link, a pipe or a device there is refused, neither
// written through nor replaced (the user may have meant it: hiatus says so
// rather than guess).
func Create(path string) (*File, error) {
	dirPath, name := filepath.Split(path)
	was, err := free(path)
	if err != nil {
		return nil, err
	}
	f, err := CreateIn(dirPath, name)
	if err == nil && was != nil {
		err = f.keep(was)
	}
	return f, err
}

// keep gives the file being written the mode of the file it will replace,
// and, for root, its owner: a private report stays private, and a user's
// file stays theirs.
func (f *File) keep(was fs.FileInfo) error {
	err := f.tmp.Chmod(was.Mode().Perm())
	if st, ok := was.Sys().(*syscall.Stat_t); ok && err == nil && os.Geteuid() == 0 {
		err = f.tmp.Chown(int(st.Uid), int(st.Gid))
	}
	if err != nil {
		f.Abort()
		return fmt.Errorf("write %s: keep the mode of the file it replaces: %w", f.dir.Join(f.name), err)
	}
	return nil
}

// CreateIn starts writing name inside the directory at dirPath, as
// Dir.Create does; the File holds the directory open until it is closed.
func CreateIn(dirPath, name string) (*File, error) {
	d, err := OpenDir(dirPath)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", filepath.Join(dirPath, name), err)
	}
	f, err := d.Create(name)
	if err != nil {
		d.Close()
		return nil, err
	}
	f.own = true
	return f, nil
}

// free says whether path may take a file hiatus writes: nothing there yet
// (nil), or a regular file (what it is).
func free(path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, &fs.PathError{Op: "write", Path: path, Err: fmt.Errorf("%w: hiatus writes a file of its own at a path you name, not through a link (name the link's target instead)", ErrLink)}
	case !fi.Mode().IsRegular():
		return nil, &fs.PathError{Op: "write", Path: path, Err: fmt.Errorf("it is %s, %w: hiatus writes only a new or regular file", Kind(fi.Mode()), ErrNotRegular)}
	}
	return fi, nil
}

// WriteFile writes data to the file at path, whole or not at all (Create).
func WriteFile(path string, data []byte) error {
	return WriteWith(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteWith writes the file at path with write, as Dir.WriteWith does.
func WriteWith(path string, write func(io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	return finish(f, write)
}

// Writable says whether a file can be written at path, by starting one
// and dropping it: a command whose output is named at its start refuses a
// path it cannot write then, not after its work.
func Writable(path string) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	f.Abort()
	return nil
}
