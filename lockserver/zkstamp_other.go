//go:build !linux

package lockserver

import "net"

// stampedReads returns what reads conn, each read's stamp 0 (none): the
// kernel's receive time is Linux's.
func stampedReads(conn net.Conn) func([]byte) (int, int64, error) {
	return func(p []byte) (int, int64, error) {
		n, err := conn.Read(p)
		return n, 0, err
	}
}
