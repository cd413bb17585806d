package testkit

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// UnansweredAddr listens on 127.0.0.1 with an accept queue of one that it fills and never
// accepts from, so the kernel drops every further SYN: a connection to it hangs until its
// timeout, as one to a peer cut off by a partition does. The test is skipped where the kernel
// keeps accepting into a full queue.
func UnansweredAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*syscall.SockaddrInet4).Port}).String()
	// Fill the queue: once it holds what it may, the kernel drops new SYNs.
	for range 4 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	t.Skip("the kernel kept accepting connections into a full queue; no address that drops SYNs here")
	return ""
}
