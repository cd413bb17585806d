package consensus_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/clusterkey"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/consensus/forward"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// PeerAuth in front of the Forward service (consensus/forward), as the cluster's gRPC listener
// serves it.

// meshOf is a mesh whose members never change.
type meshOf []mesh.Member

func (m meshOf) Members() []mesh.Member { return m }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ptr[T any](v T) *T { return &v }

// serveForward serves node's Forward service on 127.0.0.1 behind auth, with creds (nil:
// plaintext), and returns its address.
func serveForward(t *testing.T, n *consensus.Node, auth *consensus.PeerAuth, creds credentials.TransportCredentials) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := auth.ServerOptions()
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	s := grpc.NewServer(opts...)
	forward.Register(s, n, testkit.Quiet())
	served := make(chan struct{})
	go func() { defer close(served); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Stop(); <-served })
	return ln.Addr().String()
}

// forwardClient dials addr from the loopback address from (port 0), with creds (nil:
// plaintext).
func forwardClient(t *testing.T, addr, from string, creds credentials.TransportCredentials) consensusv1.ForwardClient {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return consensusv1.NewForwardClient(cc)
}

func encode(t *testing.T, c fsm.Command) []byte {
	t.Helper()
	b, err := fsm.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestForwardRefusesNonMembers: under --insecure, a forged SetFlags and a forged Remove sent
// straight to the leader's Forward service from a host that is no live member of the mesh are
// refused with PermissionDenied and change nothing; a member's go through; and entries no
// gateway forwards (InitCluster, Reassign) are refused even from a member.
func TestForwardRefusesNonMembers(t *testing.T) {
	c := consensustest.Start(t, 1)
	n := c.Nodes[0]
	consensustest.WaitReady(t, n)
	s := consensustest.Spec(t, 8101)
	if _, err := n.Apply(testCtx(t), fsm.Register{Spec: s, Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	auth := &consensus.PeerAuth{
		Members: meshOf{
			{ID: "n1", Status: mesh.StatusAlive, Address: "127.0.0.2:7946", Meta: mesh.Meta{RPCAddr: "127.0.0.2:1", RaftAddr: "127.0.0.2:2"}},
			{ID: "named", Status: mesh.StatusSuspect, Address: "gw-named.internal:7946", Meta: mesh.Meta{RPCAddr: "gw-named.internal:1"}},
			{ID: "gone", Status: mesh.StatusDead, Address: "127.0.0.1:7946", Meta: mesh.Meta{RPCAddr: "127.0.0.1:1"}},
			{ID: "other", Status: mesh.StatusForeign, Address: "127.0.0.1:7947", Meta: mesh.Meta{RPCAddr: "127.0.0.1:3"}},
		},
		Logger: logs.Logger(slog.LevelWarn),
	}
	auth.SetLookup(func(_ context.Context, host string) ([]string, error) {
		if host == "gw-named.internal" {
			return []string{"127.0.0.3"}, nil
		}
		return nil, errors.New("no such host")
	})
	addr := serveForward(t, n, auth, nil)
	disable := encode(t, fsm.SetFlags{ID: s.ID(), Flags: fsm.FlagChange{Disabled: ptr(true), Reason: "forged"}})
	remove := encode(t, fsm.Remove{ID: s.ID()})
	tests := []struct {
		name  string
		from  string // the caller's loopback address
		entry []byte
		code  codes.Code
	}{
		{"forged SetFlags from a non-member", "127.0.0.1", disable, codes.PermissionDenied},
		{"forged Remove from a non-member", "127.0.0.1", remove, codes.PermissionDenied},
		{"InitCluster from a member", "127.0.0.2", encode(t, fsm.InitCluster{ClusterID: "forged"}), codes.PermissionDenied},
		{"Reassign from a member", "127.0.0.2", encode(t, fsm.Reassign{Items: []fsm.ReassignItem{{ID: s.ID(), From: fsm.Fence{Owner: "n1", Epoch: 1}, To: "x"}}}), codes.PermissionDenied},
		{"SetFlags from a member named by host name", "127.0.0.3", encode(t, fsm.SetFlags{ID: s.ID(), Flags: fsm.FlagChange{IsDead: ptr(false)}}), codes.OK},
		{"SetFlags from a member", "127.0.0.2", encode(t, fsm.SetFlags{ID: s.ID(), Flags: fsm.FlagChange{Disabled: ptr(false)}}), codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := n.AppliedIndex()
			a, err := forwardClient(t, addr, tt.from, nil).Apply(testCtx(t), &consensusv1.ApplyRequest{Entry: tt.entry, From: "n1"})
			if status.Code(err) != tt.code {
				t.Fatalf("answer %v, %v; want %v", a, err, tt.code)
			}
			if tt.code != codes.OK {
				if n.AppliedIndex() != before {
					t.Fatal("a refused entry was applied")
				}
				return
			}
			if a.Status != consensusv1.ApplyStatus_APPLY_STATUS_APPLIED {
				t.Fatalf("a member's write: %v", a)
			}
		})
	}
	rec, ok := n.Worker(s.ID())
	if !ok || rec.Disabled || n.ClusterID() == "forged" {
		t.Errorf("after the forged entries: record %v (present %v), cluster id %q", rec, ok, n.ClusterID())
	}
	if got := logs.Lines("refused", "not a member"); len(got) != 1 { // the second within refusalLogEvery
		t.Errorf("%d refusals of non-members logged, want 1:\n%s", len(got), logs.String())
	}
}

// TestPeerAuthTLS: with TLS, a caller with a node certificate of the CA goes through; with
// VerifyNodeID, only when the sender it names is its certificate's; and PeerAuth refuses
// everyone when the listener's credentials are not TLS (a wiring mistake fails closed).
func TestPeerAuthTLS(t *testing.T) {
	c := consensustest.Start(t, 1)
	n := c.Nodes[0]
	consensustest.WaitReady(t, n)
	node := consensus.TestPKI(t)
	server, gw2 := node("n1"), node("gw2")
	pinned := serveForward(t, n, &consensus.PeerAuth{TLS: true, VerifyNodeID: true, Logger: testkit.Quiet()}, credentials.NewTLS(server.PeerConfig()))
	open := serveForward(t, n, &consensus.PeerAuth{TLS: true, Logger: testkit.Quiet()}, nil)
	entry := encode(t, fsm.SetFlags{ID: worker.ID("w-none"), Flags: fsm.FlagChange{Disabled: ptr(true)}})
	tests := []struct {
		name string
		addr string
		tls  bool
		from string
		code codes.Code
	}{
		{"its own name", pinned, true, "gw2", codes.OK},
		{"another gateway's name", pinned, true, "n1", codes.PermissionDenied},
		{"no name", pinned, true, "", codes.PermissionDenied},
		{"a TLS listener without TLS credentials", open, false, "gw2", codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var creds credentials.TransportCredentials
			if tt.tls {
				creds = credentials.NewTLS(gw2.DialConfig())
			}
			a, err := forwardClient(t, tt.addr, "127.0.0.1", creds).Apply(testCtx(t), &consensusv1.ApplyRequest{Entry: entry, From: tt.from})
			if status.Code(err) != tt.code {
				t.Fatalf("answer %v, %v; want %v", a, err, tt.code)
			}
		})
	}
}

// TestPeerAuthRequiresTheClusterKey: with a key, a caller from a member's host is refused
// unless its call carries the key's token.
func TestPeerAuthRequiresTheClusterKey(t *testing.T) {
	n := consensustest.StartNode(t, consensus.Config{NodeID: "n1", Ephemeral: true, BindAddr: "127.0.0.1:0", Registerer: prometheus.NewRegistry(), Logger: testkit.Quiet()})
	consensustest.WaitReady(t, n)
	s := consensustest.Spec(t, 8102)
	if _, err := n.Apply(testCtx(t), fsm.Register{Spec: s, Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	key := clusterkey.Derive("the admin key")
	auth := &consensus.PeerAuth{Key: key, Logger: testkit.Quiet(),
		Members: meshOf{{ID: "n1", Status: mesh.StatusAlive, Address: "127.0.0.2:7946", Meta: mesh.Meta{RPCAddr: "127.0.0.2:1"}}}}
	addr := serveForward(t, n, auth, nil)
	disable := encode(t, fsm.SetFlags{ID: s.ID(), Flags: fsm.FlagChange{Disabled: ptr(true), Reason: "forged"}})
	for _, tt := range []struct {
		name  string
		creds credentials.PerRPCCredentials
		code  codes.Code
	}{
		{"no token", nil, codes.Unauthenticated},
		{"another key's token", clusterkey.Derive("a guess").Credentials(), codes.Unauthenticated},
		{"the key's token", key.Credentials(), codes.OK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
					return d.DialContext(ctx, "tcp", a)
				})}
			if tt.creds != nil {
				opts = append(opts, grpc.WithPerRPCCredentials(tt.creds))
			}
			cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			_, err = consensusv1.NewForwardClient(cc).Apply(testCtx(t), &consensusv1.ApplyRequest{Entry: disable, From: "n1"})
			if status.Code(err) != tt.code {
				t.Fatalf("answer %v, want %v", err, tt.code)
			}
		})
	}
}
