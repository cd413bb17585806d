//go:build !unix

package gateway

import "syscall"

// peerClosed is not implemented here: the watch ends at once and a client that leaves is
// noticed at the next write, as without a watch.
func peerClosed(syscall.RawConn) bool { return false }
