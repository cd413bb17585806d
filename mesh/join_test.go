package mesh

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// answerHTTP accepts connections and answers each at once as an HTTP server answers a request
// it cannot parse: what a --join aimed at a gateway's HTTP port reaches.
func answerHTTP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"))
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// TestJoinWhatIsNotAMeshPort: a join that reaches something other than a mesh peer fails with
// an error that says so: ErrNotMesh for an answer that is no push/pull, ErrPlaintext for a
// plaintext answer to a node that encrypts gossip (an HTTP server, or a peer without the key).
func TestJoinWhatIsNotAMeshPort(t *testing.T) {
	const key = "MTIzNDU2Nzg5MDEyMzQ1Ng=="
	plainPeer := start(t, testConfig("plain", nil))
	tests := []struct {
		name   string
		key    string
		target string
		want   error
	}{
		{"an HTTP port", "", answerHTTP(t), ErrNotMesh},
		{"an HTTP port, gossip encrypted", key, answerHTTP(t), ErrPlaintext},
		{"a peer without the key", key, plainPeer.Addr(), ErrPlaintext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("n1", nil)
			cfg.EncryptKey = tt.key
			n, err := start(t, cfg).Join([]string{tt.target})
			if n != 0 || !errors.Is(err, tt.want) {
				t.Errorf("Join: %d, %v; want an error wrapping %q", n, err, tt.want)
			}
		})
	}
}

// TestRefusalAsSeedIsNotThisNodesJoin: a node that refuses a foreign node's join while its own
// join fails for another reason (its only address hangs) does not report its own join as
// refused for a foreign cluster: only the refusal of the peers it reached is.
func TestRefusalAsSeedIsNotThisNodesJoin(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: connects, then silence
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	scfg := testConfig("s1", nil)
	scfg.Meta.ClusterID = "cluster-a"
	scfg.Tune = func(c *memberlist.Config) { fastTimers(c); c.TCPTimeout = time.Second }
	seed := start(t, scfg)
	fcfg := testConfig("f1", nil)
	fcfg.Meta.ClusterID = "cluster-b"
	foreign := start(t, fcfg)

	joined := make(chan error, 1)
	go func() { _, err := seed.Join([]string{hung.Addr().String()}); joined <- err }()
	if _, err := foreign.Join([]string{seed.Addr()}); !errors.Is(err, ErrForeignCluster) {
		t.Fatalf("the foreign node's join: %v, want ErrForeignCluster", err)
	}
	waitFor(t, seed, "f1 refused", func(ms []Member) bool { s, ok := statusIn(ms, "f1"); return ok && s == StatusForeign })
	if err := <-joined; err == nil || errors.Is(err, ErrForeignCluster) {
		t.Errorf("s1's own join: %v, want its timeout, not ErrForeignCluster", err)
	}
}

// TestJoinErrorKinds: Join's error says what kind of failure the addresses' errors were, read
// from memberlist's text, and never spans lines.
func TestJoinErrorKinds(t *testing.T) {
	refused := errors.New("failed to join 10.0.0.1: peer a1 is in cluster x, this node in y: " + ErrForeignCluster.Error())
	tests := []struct {
		name string
		errs []error
		want error // nil: none of the kinds
	}{
		{"refused for its cluster id", []error{refused}, ErrForeignCluster},
		{"refused by every address", []error{refused, refused}, ErrForeignCluster},
		{"refused, and another address timed out", []error{errors.New("i/o timeout"), refused}, nil},
		{"refused, and another address has nothing listening", []error{refused, errors.New("connect: connection refused")}, nil},
		{"an HTTP answer", []error{errors.New("received invalid msgType (72), expected pushPullMsg (6)")}, ErrNotMesh},
		{"a plaintext answer", []error{errors.New("encryption is configured but remote state is not encrypted")}, ErrPlaintext},
		{"a timeout", []error{errors.New("read tcp: i/o timeout\n")}, nil},
		{"no error at all", []error{nil}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := joinError([]string{"10.0.0.1:39527"}, tt.errs)
			for _, kind := range []error{ErrForeignCluster, ErrNotMesh, ErrPlaintext} {
				if got := errors.Is(err, kind); got != (kind == tt.want) {
					t.Errorf("%v: errors.Is(err, %q) = %v", err, kind, got)
				}
			}
			if err == nil || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line", err)
			}
		})
	}
}

// TestForeignAmongUnreachable: a join whose addresses are a foreign cluster's peer and an
// address where nothing answers yet (this node's own peers, not up yet) is not refused for
// good: only a join that every address refused for its cluster id wraps ErrForeignCluster.
func TestForeignAmongUnreachable(t *testing.T) {
	fcfg := testConfig("f1", nil)
	fcfg.Meta.ClusterID = "cluster-a"
	foreign := start(t, fcfg)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := closed.Addr().String()
	_ = closed.Close() // nothing listens there: a peer not up yet

	cfg := testConfig("n1", nil)
	cfg.Meta.ClusterID = "cluster-b"
	n := start(t, cfg)
	tests := []struct {
		name  string
		addrs []string
		want  bool // wraps ErrForeignCluster
	}{
		{"the foreign peer alone", []string{foreign.Addr()}, true},
		{"the foreign peer and one not up yet", []string{foreign.Addr(), down}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := n.Join(tt.addrs)
			if k != 0 || err == nil || errors.Is(err, ErrForeignCluster) != tt.want {
				t.Errorf("Join(%v): %d, %v; want an error, wrapping ErrForeignCluster: %v", tt.addrs, k, err, tt.want)
			}
		})
	}
}
