// Package files is the one way hiatus opens a file it reads and makes a
// file it writes. What hiatus reads may come from anyone: a history handed
// over, a grid's shared directory, a reproducer from a bug report. So a
// read takes only a regular file, never waits on one (a named pipe waits
// for a writer that may never come; a device need never end) and reads no
// more than its caller's limit. A write makes its file whole or not at all,
// in a temporary file renamed into place, and so never writes through a
// link planted where the file was to be: the rename replaces the link.
//
// Two kinds of place: a path the user named (Open, ReadFile, WriteFile),
// whose links are the user's own and are followed; and a name inside a
// directory hiatus reads or writes (Dir), which may be shared, where no
// link is followed and no name reaches outside the directory.
package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Errors of the package, for errors.Is.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("larger than hiatus reads")
	ErrLink       = errors.New("a symbolic link, which hiatus does not follow here")
	ErrName       = errors.New("not a plain file name")
)

// Open opens the regular file at path for reading, and refuses anything
// else at once. What is not a regular file is refused before it is opened
// (opening a device can act; an open would release a pipe's waiting writer
// into a pipe no one reads), and again after, should it have been swapped
// for one meanwhile: that open does not wait (O_NONBLOCK, which a regular
// file's reads ignore).
func Open(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return checkRegular(f, path)
}

// checkRegular returns f if it is a regular file, and closes it if not.
func checkRegular(f *os.File, path string) (*os.File, error) {
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = notRegular(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func notRegular(path string, fi fs.FileInfo) error {
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("it is %s, %w", Kind(fi.Mode()), ErrNotRegular)}
}

// ReadFile reads the whole of the regular file at path, as os.ReadFile
// does, refusing what Open refuses and a file longer than limit bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path, limit)
}

// readAll reads f to its end, or fails with ErrTooLarge past limit bytes
// without reading more than one byte past it.
func readAll(f *os.File, path string, limit int64) ([]byte, error) {
	var b []byte
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 && fi.Size() <= limit {
		b = make([]byte, 0, fi.Size()+1)
	}
	b, err := readUpTo(f, b, limit)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return b, nil
}

func readUpTo(r io.Reader, b []byte, limit int64) ([]byte, error) {
	b, err := appendAll(b, io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &LimitError{Limit: limit}
	}
	return b, nil
}

func appendAll(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// A LimitError is the error of a read that found more than its limit.
type LimitError struct{ Limit int64 }

func (e *LimitError) Error() string {
	return fmt.Sprintf("%v (more than %d bytes)", ErrTooLarge, e.Limit)
}

// Is makes a LimitError match ErrTooLarge.
func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

// Kind names the type of file mode m is, for messages: "a named pipe",
// "a directory", "a regular file".
func Kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0, t&fs.ModeCharDevice != 0:
		return "a device"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file"
}
