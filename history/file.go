package history

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// OpenRegular opens the file at path for reading if it is a regular file,
// and refuses anything else at once: opening a named pipe waits for a
// writer that may never come, and a device or socket need never end, so a
// reader handed one would hang past any signal. What is not a regular file
// is refused before it is opened (an open would release a pipe's waiting
// writer into a pipe no one reads), and again after, should it have been
// swapped for one meanwhile: that open does not wait (O_NONBLOCK, which a
// regular file's reads ignore).
func OpenRegular(path string) (*os.File, error) {
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
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = notRegular(path, fi)
		}
		return nil, err
	}
	return f, nil
}

func notRegular(path string, fi fs.FileInfo) error {
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("it is %s, %w", Kind(fi.Mode()), ErrNotRegular)}
}

// ReadRegular reads the whole of the regular file at path, as os.ReadFile
// does, refusing what OpenRegular refuses.
func ReadRegular(path string) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// ErrNotRegular is the error of OpenRegular for what is not a regular file.
var ErrNotRegular = fmt.Errorf("not a regular file")

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
