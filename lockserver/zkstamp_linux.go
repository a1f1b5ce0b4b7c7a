//go:build linux

package lockserver

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stampedReads returns what reads conn one receive at a time, each with
// the time the kernel received its last packet (SO_TIMESTAMPNS), unix ns
// on this machine's clock: a stamp the reading goroutine's lateness, on a
// loaded machine, does not move. A receive the kernel did not stamp (a
// connection that cannot say, or a packet that came before the kernel
// turned its stamps on, which it does a moment after it is asked) has
// the stamp 0.
func stampedReads(conn net.Conn) func([]byte) (int, int64, error) {
	plain := func(p []byte) (int, int64, error) {
		n, err := conn.Read(p)
		return n, 0, err
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return plain
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return plain
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return plain
	}
	oob := make([]byte, unix.CmsgSpace(16))
	return func(p []byte) (int, int64, error) {
		var n, oobn int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, oob, 0)
			return rerr != unix.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		if err == nil && n == 0 {
			err = io.EOF
		}
		return max(n, 0), kernelStamp(oob[:max(oobn, 0)]), err
	}
}

// kernelStamp is the receive time a control message carries, or 0.
func kernelStamp(oob []byte) int64 {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			ts := *(*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return ts.Nano()
		}
	}
	return 0
}
