package zmqlink

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestStaleIPCSocketIsReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false) // as a killed engine leaves its file behind
	ln.Close()
	e := startEngine(t, "ipc://"+path, ServerConfig{})
	l := dial(t, e.Endpoint())
	waitReady(t, l)
	if _, err := Listen("ipc://"+path, ServerConfig{Handler: echoHandler, Logger: quiet}); err == nil {
		t.Error("a second engine took the socket of a live one")
	}
}

func TestBoundedConnClosesOnAStalledWrite(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	c := &boundedConn{Conn: a, timeout: 20 * time.Millisecond}
	_, err := c.Write([]byte("nobody reads this")) // net.Pipe is unbuffered: the write stalls
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Write: %v, want a timeout", err)
	}
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the peer reads %v, want io.EOF: the connection must be closed", err)
	}
}
