package files

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenLeavesPipeWriter: a regular file opens; a named pipe, a device and a
// directory are refused at once, and a pipe's waiting writer is left
// waiting (an open would have released it into a pipe no one reads).
func TestOpenLeavesPipeWriter(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "h.edn")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := Open(file); err != nil {
		t.Errorf("a regular file: %v", err)
	} else {
		f.Close()
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	opened := make(chan struct{})
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // waits for a reader
		close(opened)
		if err == nil {
			_, err = w.Write([]byte("ops"))
			w.Close()
		}
		wrote <- err
	}()
	for _, tc := range []struct{ path, kind string }{{fifo, "a named pipe"}, {"/dev/null", "a device"}, {dir, "a directory"}} {
		_, err := Open(tc.path)
		if !errors.Is(err, ErrNotRegular) || err.Error() != "open "+tc.path+": it is "+tc.kind+", not a regular file" {
			t.Errorf("%s: %v", tc.path, err)
		}
	}
	select {
	case <-opened:
		t.Error("the pipe's writer was let through by a reader that refused it")
	default:
	}
	r, err := os.Open(fifo) // the reader the writer waits for
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, _ := io.ReadAll(r)
	if err := <-wrote; err != nil || string(got) != "ops" {
		t.Errorf("the writer: %v; read %q", err, got)
	}
}
