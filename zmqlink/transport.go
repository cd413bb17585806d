package zmqlink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// zmq4 hands a dialed connection to its ZMTP handshake with no deadline, so a peer that accepts
// but never greets (a stopped engine) holds the dialing goroutine and the socket forever, and
// closing the zmq4 socket does not reach a connection still in its handshake. zmq4 also writes
// with no deadline while holding the socket's writer lock, so one peer that stopped reading
// (SIGSTOP) stalls the sends to every other peer. Both sides therefore run on these transports:
// a dialed connection is closed as soon as the socket's context ends (socket Close), and a write
// that cannot finish within writeTimeout closes its connection (zmq4 then drops it; the link
// reconnects).
const (
	linkTCP = "zmqlink-tcp"
	linkIPC = "zmqlink-ipc"
)

// writeTimeout bounds one write to a peer.
const writeTimeout = 10 * time.Second

func init() {
	for name, network := range map[string]string{linkTCP: "tcp", linkIPC: "unix"} {
		if err := zmq4.RegisterTransport(name, boundedTransport{transport.New(network)}); err != nil {
			panic(err)
		}
	}
}

// boundedTransport ties dialed connections to the socket's context and bounds every write.
type boundedTransport struct{ transport.Transport }

func (t boundedTransport) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	conn, err := t.Transport.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { conn.Close() })
	return &boundedConn{Conn: conn, timeout: writeTimeout}, nil
}

func (t boundedTransport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := t.Transport.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return boundedListener{ln}, nil
}

type boundedListener struct{ net.Listener }

func (l boundedListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &boundedConn{Conn: conn, timeout: writeTimeout}, nil
}

// boundedConn closes itself when a write times out: zmq4 treats a timeout as harmless, but a
// frame cut in the middle would corrupt the stream.
type boundedConn struct {
	net.Conn
	timeout time.Duration
}

func (c *boundedConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.timeout))
	n, err := c.Conn.Write(p)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.Conn.Close()
	}
	return n, err
}

// parseEndpoint checks a ZMQ endpoint, tcp://HOST:PORT or ipc:///PATH, and returns it on the
// bounded transports, as the sockets dial or bind it.
func parseEndpoint(endpoint string) (bound string, err error) {
	scheme, rest, ok := strings.Cut(endpoint, "://")
	switch {
	case !ok || rest == "":
		return "", fmt.Errorf("zmqlink: endpoint %q is not tcp://HOST:PORT or ipc:///PATH", endpoint)
	case scheme == "tcp":
		if _, _, err := net.SplitHostPort(rest); err != nil {
			return "", fmt.Errorf("zmqlink: endpoint %q: %v", endpoint, err)
		}
		return linkTCP + "://" + rest, nil
	case scheme == "ipc":
		return linkIPC + "://" + rest, nil
	}
	return "", fmt.Errorf("zmqlink: endpoint %q has scheme %q; want tcp or ipc", endpoint, scheme)
}

// removeStaleSocket removes the socket file of an ipc endpoint when nothing listens on it any
// more (an engine that was killed leaves it behind), as libzmq does when it binds. A live
// listener's file is left alone, so that Listen fails with "address already in use".
func removeStaleSocket(path string) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		_ = os.Remove(path)
	}
}
