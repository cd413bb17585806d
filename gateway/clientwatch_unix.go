//go:build unix

package gateway

import "syscall"

// peerClosed waits until the connection is readable and reports whether the peer closed it (end
// of stream or reset), without consuming anything. It reports false when data arrived (a
// pipelined request) or the wait was interrupted.
func peerClosed(rc syscall.RawConn) bool {
	closed := false
	err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if err == syscall.EAGAIN || err == syscall.EINTR {
			return false // wait until readable
		}
		closed = n == 0 || err != nil
		return true
	})
	return err == nil && closed
}
