//go:build linux

package lockserver

import (
	"net"
	"testing"
	"time"
)

// TestStampedReads: data read late is stamped when the kernel received
// it, not when the read returned: the reader's lateness (a loaded
// machine's) does not make the record's events later.
func TestStampedReads(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	in, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	recv := stampedReads(in)
	// The kernel turns its stamps on a moment after it is asked: until a
	// receive is stamped.
	buf := make([]byte, 16)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := out.Write([]byte("warm")); err != nil {
			t.Fatal(err)
		}
		if _, at, err := recv(buf); err != nil || at != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no receive stamped by the kernel")
		}
	}
	sent := time.Now()
	if _, err := out.Write([]byte("mark")); err != nil {
		t.Fatal(err)
	}
	// The reader is late by late: a read now would be stamped no earlier.
	const late = 200 * time.Millisecond
	time.Sleep(late)
	n, at, err := recv(buf)
	if err != nil || n != 4 {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	if got := time.Unix(0, at); got.Before(sent) || !got.Before(sent.Add(late)) {
		t.Errorf("stamped %v after the write, want before the read, %v after it", got.Sub(sent), late)
	}
}
