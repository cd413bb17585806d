package mesh

import (
	"log/slog"
	"net"
	"strconv"
	"sync"

	"github.com/hashicorp/memberlist"
)

// Listener is the mesh's TCP and UDP sockets on one port, bound by Listen before the mesh
// starts: a gateway binds every port it needs before it starts raft or joins anything, so that
// a port in use stops it before it became a member its peers list. Start takes it over
// (Config.Listener); Close releases it when Start is never called.
type Listener struct {
	nt   *memberlist.NetTransport
	ip   string
	port int
	once sync.Once
}

// ListenError is Listen's error: the address it could not bind, and the socket's error (a
// *net.OpError such as "listen tcp 127.0.0.1:39527: bind: address already in use").
type ListenError struct {
	Addr string
	Err  error
}

func (e *ListenError) Error() string { return "mesh: listen on " + e.Addr + ": " + e.Err.Error() }
func (e *ListenError) Unwrap() error { return e.Err }

// listenTries bounds Listen's attempts with port 0: the kernel picks a free TCP port, whose UDP
// twin may be taken (memberlist retries the same way).
const listenTries = 10

// Listen binds TCP and UDP on ip:port (ip "" means DefaultBindAddr; port 0 picks one free for
// both), as memberlist's own transport does when it is given none. logger receives
// memberlist's lines (nil means slog.Default()).
func Listen(ip string, port int, logger *slog.Logger) (*Listener, error) {
	if ip == "" {
		ip = DefaultBindAddr
	}
	if net.ParseIP(ip) == nil {
		return nil, errFlag("--host", "mesh bind address %q is not an IP address", ip)
	}
	if port < 0 || port > 65535 {
		return nil, errFlag("--mesh-port", "%d is not a port (0-65535)", port)
	}
	if logger == nil {
		logger = slog.Default()
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	tries := 1
	if port == 0 {
		tries = listenTries
	}
	var err error
	for range tries {
		var nt *memberlist.NetTransport
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{ip}, BindPort: port,
			Logger: newStdLogger(logger)})
		if err == nil {
			return &Listener{nt: nt, ip: ip, port: nt.GetAutoBindPort()}, nil
		}
	}
	return nil, &ListenError{Addr: addr, Err: bindError(ip, port, err)}
}

// bindError is why memberlist's transport could not bind ip:port. memberlist formats the
// socket's error into its own text ("failed to start TCP listener on ..."), so the socket that
// failed is bound once more here to get the error itself; if that one binds now, memberlist's
// error is what there is.
func bindError(ip string, port int, transportErr error) error {
	if port == 0 {
		return transportErr
	}
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.ParseIP(ip), Port: port})
	if err != nil {
		return err
	}
	_ = tcp.Close()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip), Port: port})
	if err != nil {
		return err
	}
	_ = udp.Close()
	return transportErr
}

// Addr is the bound address, ip:port.
func (l *Listener) Addr() string { return net.JoinHostPort(l.ip, strconv.Itoa(l.port)) }

// Close releases the sockets. Connections and packets that arrived meanwhile are dropped:
// memberlist's transport hands each to a channel that only a started mesh reads, so Close reads
// them until the transport stopped. Calling it again, or after Start took the listener over,
// does nothing harmful.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		done := make(chan struct{})
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for {
				select {
				case c := <-l.nt.StreamCh():
					_ = c.Close()
				case <-l.nt.PacketCh():
				case <-done:
					return
				}
			}
		}()
		err = l.nt.Shutdown()
		close(done)
		<-drained
	})
	return err
}
