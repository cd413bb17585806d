package mesh

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/meshgw/meshgw/test/loopport"
)

// TestListenThenStart: a mesh started on a Listener runs on its port, and the port is released
// when the mesh shuts down.
func TestListenThenStart(t *testing.T) {
	ln, err := Listen("127.0.0.1", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig("n1", nil)
	cfg.Listener = ln
	m, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m.Addr() != ln.Addr() {
		t.Errorf("the mesh runs at %s, its listener was bound at %s", m.Addr(), ln.Addr())
	}
	other := start(t, testConfig("n2", nil))
	if _, err := other.Join([]string{m.Addr()}); err != nil {
		t.Fatalf("joining the mesh started on a listener: %v", err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	again, err := Listen("127.0.0.1", portOf(t, ln.Addr()), nil)
	if err != nil {
		t.Fatalf("the port is still taken after Shutdown: %v", err)
	}
	_ = again.Close()
}

// TestListenInUse: Listen on a port in use, TCP or UDP, fails with a *ListenError that names
// the address and carries the socket's error, not memberlist's wording of it.
func TestListenInUse(t *testing.T) {
	// Ports free for both TCP and UDP a moment ago, below the ephemeral range (loopport): a UDP
	// port given by the system could have its TCP twin taken by an outgoing connection, which
	// the udp case would then find in use first (a flake of 1 in 5 runs).
	tcpPort, err := loopport.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	udpPort, err := loopport.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(tcpPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(udpPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	tests := []struct{ name, addr, op string }{
		{"tcp", tcp.Addr().String(), "listen tcp "},
		{"udp", udp.LocalAddr().String(), "listen udp "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := Listen("127.0.0.1", portOf(t, tt.addr), nil)
			if err == nil {
				_ = ln.Close()
				t.Fatalf("bound %s, which is in use", tt.addr)
			}
			var le *ListenError
			if !errors.As(err, &le) || le.Addr != tt.addr || !errors.Is(err, syscall.EADDRINUSE) {
				t.Fatalf("error %q, want a *ListenError for %s, address in use", err, tt.addr)
			}
			if want := tt.op + tt.addr + ": bind: address already in use"; le.Err.Error() != want {
				t.Errorf("socket error %q, want %q", le.Err, want)
			}
		})
	}
}

// TestListenerCloseWithoutStart: a Listener never started is released by Close, even with a
// connection and a datagram that arrived meanwhile (memberlist's transport hands them to
// channels only a started mesh reads).
func TestListenerCloseWithoutStart(t *testing.T) {
	ln, err := Listen("127.0.0.1", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pc, err := net.Dial("udp", ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ln.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	again, err := Listen("127.0.0.1", portOf(t, ln.Addr()), nil)
	if err != nil {
		t.Fatalf("the port is still taken after Close: %v", err)
	}
	_ = again.Close()
}
