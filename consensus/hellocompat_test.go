package consensus

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/test/testkit"
)

// oldStream is the stream layer of a gateway that predates the hello: plain TCP, raft's bytes
// from the first.
type oldStream struct{ net.Listener }

func (s oldStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// oldGateway starts an older gateway's raft transport on loopback, answering every vote request
// with a refusal, and returns its address.
func oldGateway(t *testing.T) (raft.Transport, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransport(oldStream{ln}, 1, 5*time.Second, io.Discard)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case rpc := <-trans.Consumer():
				rpc.Respond(&raft.RequestVoteResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}}, nil)
			case <-done:
				return
			}
		}
	})
	t.Cleanup(func() {
		close(done)
		wg.Wait()
		_ = trans.Close()
	})
	return trans, ln.Addr().String()
}

// askVote sends a vote request of term 1 from trans to server id at addr and returns raft's
// error: nil once the server there answered.
func askVote(trans raft.Transport, id, addr string) error {
	req := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("new"),
		Addr: []byte(trans.LocalAddr())}, Term: 1}
	return trans.RequestVote(raft.ServerID(id), raft.ServerAddress(addr), req, &raft.RequestVoteResponse{})
}

// newGateway starts this build's TCP transport for node "new" of cluster (a name), whose dialer
// asks sendHello (nil: always send).
func newGateway(t *testing.T, cluster string, sendHello func(addr string) bool) raft.Transport {
	t.Helper()
	cfg, err := Config{NodeID: "new", Ephemeral: true, BindAddr: "127.0.0.1:0", SendHello: sendHello}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = testkit.Quiet()
	trans, err := newTCPTransport(cfg, newHCLogBridge(cfg.Logger, slog.LevelError), func() string { return cluster })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeTransport(trans) })
	return trans
}

// TestNoHelloToAnOlderGateway: a dialer whose mesh lists, at the address it dials, a member
// without the hello's capability sends raft's bytes only, which an older gateway reads; the
// hello would have made it close the connection. SendHello is asked with the address alone.
func TestNoHelloToAnOlderGateway(t *testing.T) {
	_, old := oldGateway(t)
	var asked []string
	var mu sync.Mutex
	lacks := func(addr string) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, addr)
		return addr != old
	}
	if err := askVote(newGateway(t, "A", lacks), "old", old); err != nil {
		t.Fatalf("a vote request to an older gateway without the hello: %v", err)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0] != old {
		t.Errorf("SendHello was asked %q, want [%s]", asked, old)
	}
	mu.Unlock()
	if err := askVote(newGateway(t, "A", nil), "old", old); err == nil {
		t.Fatal("an older gateway answered a connection that opened with the hello; the test no longer shows why the capability is needed")
	}
}

// TestOlderGatewayDialsWithoutHello: a node takes an older gateway's raw raft stream, with no
// hello, as before: it answers its vote request.
func TestOlderGatewayDialsWithoutHello(t *testing.T) {
	n := startNode(t, tcpNode("a1", "", nil, nil))
	waitReady(t, n)
	old, _ := oldGateway(t)
	if err := askVote(old, "a1", n.Address()); err != nil {
		t.Fatalf("a vote request from an older gateway: %v", err)
	}
}

// TestMixedVersionsReplicate: two nodes of which one never says the hello (as this build does
// towards an older gateway, and an older gateway does) form a cluster and replicate a write in
// both directions of dialing.
func TestMixedVersionsReplicate(t *testing.T) {
	pairReplicates(t, func(id string) Config {
		if id == "n2" {
			return Config{SendHello: func(string) bool { return false }}
		}
		return Config{}
	}, 8021)
}

// TestAConnectionServesTheServerItWasMeantFor: raft's transport pools connections by the
// address targetTransport gives it, which names the server: a connection that a node took for
// itself is never used for a call meant for another server at its address, which dials anew
// and is refused.
func TestAConnectionServesTheServerItWasMeantFor(t *testing.T) {
	n := startNode(t, tcpNode("a1", "", nil, nil))
	waitReady(t, n)
	trans := newGateway(t, "", nil)
	if err := askVote(trans, "a1", n.Address()); err != nil {
		t.Fatalf("a call meant for a1: %v", err)
	}
	if err := askVote(trans, "a9", n.Address()); err == nil {
		t.Fatal("a call meant for a9 was answered by a1, on a connection taken for a1")
	}
	if err := askVote(trans, "a1", n.Address()); err != nil {
		t.Fatalf("a1 again: %v", err)
	}
}

// TestWithTarget: the server id travels inside the address raft's NetworkTransport dials, and
// comes out as it went in; an unknown id leaves the address alone.
func TestWithTarget(t *testing.T) {
	for _, tt := range []struct{ addr, id string }{{"10.0.0.7:39528", "gw-1"}, {"[::1]:39528", "a b"}, {"10.0.0.7:39528", ""}} {
		target := withTarget(raft.ServerAddress(tt.addr), raft.ServerID(tt.id))
		if tt.id == "" && string(target) != tt.addr {
			t.Errorf("withTarget(%q, \"\") = %q", tt.addr, target)
		}
		if addr, id := splitTarget(target); addr != tt.addr || id != tt.id {
			t.Errorf("splitTarget(withTarget(%q, %q)) = %q, %q", tt.addr, tt.id, addr, id)
		}
	}
}
