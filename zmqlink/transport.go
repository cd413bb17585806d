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
// closing the zmq4 socket does not reach a connection still in its handshake. Links therefore
// dial through these transports, which close the raw connection as soon as the socket's context
// ends (socket Close): every connection dies with its socket.
const (
	linkTCP = "zmqlink-tcp"
	linkIPC = "zmqlink-ipc"
)

func init() {
	for name, network := range map[string]string{linkTCP: "tcp", linkIPC: "unix"} {
		if err := zmq4.RegisterTransport(name, closingTransport{transport.New(network)}); err != nil {
			panic(err)
		}
	}
}

// closingTransport ties every dialed connection to the dialing socket's context.
type closingTransport struct{ transport.Transport }

func (t closingTransport) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	conn, err := t.Transport.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { conn.Close() })
	return conn, nil
}

// parseEndpoint checks a ZMQ endpoint, tcp://HOST:PORT or ipc:///PATH, and returns the endpoint
// a link dials (through the closing transports).
func parseEndpoint(endpoint string) (dial string, err error) {
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
