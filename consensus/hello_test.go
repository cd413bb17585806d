package consensus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/mesh"
)

// helloBytes is the wire form of h, which must encode.
func helloBytes(t testing.TB, h hello) []byte {
	t.Helper()
	b, err := h.encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadHello: a hello reads back as it was said, and not a byte past it; a truncated hello,
// a wrong magic or a field over maxHelloField is an error.
func TestReadHello(t *testing.T) {
	valid := hello{Cluster: "5f0c6c1e-3f3b-4b8e-9d2a-8f1f2e3d4c5b", From: "gw-1", To: "gw-2"}
	for _, h := range []hello{valid, {}, {Cluster: strings.Repeat("c", maxHelloField), From: strings.Repeat("f", maxHelloField),
		To: strings.Repeat("t", maxHelloField)}} {
		r := bytes.NewReader(append(helloBytes(t, h), 0, 0x80)) // raft's first bytes follow
		got, err := readHello(r)
		if err != nil {
			t.Fatalf("read %+v: %v", h, err)
		}
		if diff := cmp.Diff(h, got); diff != "" {
			t.Errorf("(-said +read):\n%s", diff)
		}
		if r.Len() != 2 {
			t.Errorf("read %d bytes past the hello", 2-r.Len())
		}
	}

	b := helloBytes(t, valid)
	field := func(n int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(n)) }
	bad := map[string][]byte{
		"empty":           nil,
		"raft's first":    {0, 0x80, 0x80},
		"wrong magic":     append([]byte("MGR2"), b[4:]...),
		"magic only":      []byte("MGR1"),
		"half a length":   append([]byte("MGR1"), 0),
		"oversized field": append(append([]byte("MGR1"), field(maxHelloField+1)...), make([]byte, maxHelloField+1)...),
		"length 65535":    append([]byte("MGR1"), 0xff, 0xff),
		"no To field":     b[:len(b)-len(valid.To)-2],
	}
	for i := 1; i < len(b); i++ {
		bad[fmt.Sprintf("truncated at %d", i)] = b[:i]
	}
	for name, in := range bad {
		t.Run(name, func(t *testing.T) {
			if h, err := readHello(bytes.NewReader(in)); err == nil {
				t.Fatalf("read %+v", h)
			}
		})
	}
	if _, err := (hello{To: strings.Repeat("t", maxHelloField+1)}).encode(); !errors.Is(err, errHelloField) {
		t.Errorf("an oversized field encoded: %v", err)
	}
}

// FuzzReadHello: reading never panics nor reads past the hello, and what reads says the same
// bytes again.
func FuzzReadHello(f *testing.F) {
	f.Add(helloBytes(f, hello{Cluster: "c", From: "a1", To: "a2"}))
	f.Add(helloBytes(f, hello{}))
	f.Add([]byte("MGR1\x01\x01"))
	f.Add([]byte{0, 0x80})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		h, err := readHello(r)
		if err != nil {
			return
		}
		read := in[:len(in)-r.Len()]
		if again := helloBytes(t, h); !bytes.Equal(again, read) {
			t.Fatalf("%+v read from %q says %q", h, read, again)
		}
	})
}

// TestHelloRefusal: a node refuses a hello of another cluster, once both know theirs, and a
// hello meant for another server; a strict node that knows no cluster id (a gateway before its
// mesh join merged) refuses every hello that carries one; it takes the rest.
func TestHelloRefusal(t *testing.T) {
	tests := []struct {
		name   string
		hello  hello
		ours   string
		strict bool
		want   string
	}{
		{"same cluster, this server", hello{Cluster: "A", From: "a1", To: "a2"}, "A", false, ""},
		{"another cluster", hello{Cluster: "A", From: "a1", To: "b1"}, "B", false, "another cluster"},
		{"another cluster, another server", hello{Cluster: "A", From: "a1", To: "a9"}, "B", false, "another cluster"},
		{"another server", hello{Cluster: "A", From: "a1", To: "a9"}, "A", false, "another server"},
		{"a fresh node without the hook takes any cluster", hello{Cluster: "A", From: "a1", To: "a2"}, "", false, ""},
		{"a fresh node still refuses another server", hello{Cluster: "A", From: "a1", To: "a9"}, "", false, "another server"},
		{"a dialer without a cluster id", hello{From: "a1", To: "a2"}, "A", false, ""},
		{"no target named", hello{Cluster: "A", From: "a1"}, "A", false, ""},
		{"joining, the cluster it joins", hello{Cluster: "A", From: "a1", To: "a2"}, "A", true, ""},
		{"joining, another cluster", hello{Cluster: "B", From: "b1", To: "a2"}, "A", true, "another cluster"},
		{"strict, no cluster known yet", hello{Cluster: "A", From: "a1", To: "a2"}, "", true, "no cluster id yet"},
		{"strict, a dialer without a cluster id", hello{From: "a1", To: "a2"}, "", true, ""},
		{"strict, another server without a cluster id", hello{From: "a1", To: "a9"}, "", true, "another server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.hello.refusal("a2", tt.ours, tt.strict); got != tt.want {
				t.Errorf("refusal = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestHelloAccept: an accepted connection that starts with raft's own bytes (an older gateway)
// reaches raft unchanged; one that starts with a hello meant for this node reaches raft with
// the hello taken off; the others are refused, and one closed before a byte is no refusal.
func TestHelloAccept(t *testing.T) {
	raftBytes := []byte{1, 0x80, 0x81, 0x82} // rpcRequestVote, then msgpack
	tests := []struct {
		name    string
		send    []byte
		refused string // hello.refusal's, or "malformed"; "" when taken
		eof     bool   // closed before a byte
	}{
		{"raw raft stream", raftBytes, "", false},
		{"hello for this node", append(helloBytes(t, hello{Cluster: "A", From: "a1", To: "a2"}), raftBytes...), "", false},
		{"hello of a dialer without a cluster id", append(helloBytes(t, hello{From: "a1", To: "a2"}), raftBytes...), "", false},
		{"hello of another cluster", append(helloBytes(t, hello{Cluster: "B", From: "b1", To: "a2"}), raftBytes...), "another cluster", false},
		{"hello for another server", append(helloBytes(t, hello{Cluster: "A", From: "a1", To: "a3"}), raftBytes...), "another server", false},
		{"truncated hello", []byte("MGR1\x00"), "malformed", false},
		{"closed before a byte", nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dialer, acceptor := net.Pipe()
			defer acceptor.Close()
			go func() {
				_, _ = dialer.Write(tt.send)
				_ = dialer.Close()
			}()
			h := &raftHello{self: "a2", cluster: func() string { return "A" }}
			c, err := h.accept(acceptor, time.Now().Add(5*time.Second))
			var refused *refusedHello
			switch {
			case tt.eof:
				if !errors.Is(err, io.EOF) {
					t.Fatalf("accept: %v, want io.EOF", err)
				}
			case tt.refused == "malformed":
				if err == nil || errors.As(err, &refused) || errors.Is(err, io.EOF) {
					t.Fatalf("accept: %v, want a malformed hello", err)
				}
			case tt.refused != "":
				if !errors.As(err, &refused) || refused.why != tt.refused {
					t.Fatalf("accept: %v, want refused for %s", err, tt.refused)
				}
			case err != nil:
				t.Fatalf("accept: %v", err)
			default:
				got, err := io.ReadAll(c)
				if err != nil || !bytes.Equal(got, raftBytes) {
					t.Fatalf("raft reads %v, %v; want %v", got, err, raftBytes)
				}
			}
		})
	}
}

// TestHelloJudgesByTheJoiningCluster: a node judges a hello by its own cluster id, and while it
// has none by the one it is joining (Config.JoiningCluster), strictly: knowing none, it takes
// no hello that carries one. Without the hook, knowing none, it takes any.
func TestHelloJudgesByTheJoiningCluster(t *testing.T) {
	of := func(id string) func() string { return func() string { return id } }
	tests := []struct {
		name       string
		own        string
		joining    func() string
		want       string
		wantStrict bool
		refuses    string // hello.refusal's for a hello of cluster "B" meant for this node
	}{
		{"its own", "A", of("B"), "A", false, "another cluster"},
		{"its own, no joining hook", "A", nil, "A", false, "another cluster"},
		{"joining", "", of("B"), "B", true, ""},
		{"joining none known", "", of(""), "", true, "no cluster id yet"},
		{"no joining hook", "", nil, "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &raftHello{self: "gw-2", cluster: of(tt.own), joining: tt.joining}
			if got, strict := h.ours(); got != tt.want || strict != tt.wantStrict {
				t.Errorf("ours = %q, %v; want %q, %v", got, strict, tt.want, tt.wantStrict)
			}
			if got := h.judge(hello{Cluster: "B", From: "b1", To: "gw-2"}); got != tt.refuses {
				t.Errorf("judge = %q, want %q", got, tt.refuses)
			}
		})
	}
}

// TestHelloJoiningFromMesh: the cluster id a gateway judges hellos by while it has none is the
// one its live mesh peers agree on: none before the mesh started or while it lists itself
// alone (its join has not merged), nor from dead or foreign peers, nor when peers disagree.
func TestHelloJoiningFromMesh(t *testing.T) {
	member := func(id string, status mesh.Status, cluster string) mesh.Member {
		return mesh.Member{ID: id, Status: status, Meta: mesh.Meta{NodeID: id, ClusterID: cluster}}
	}
	self := member("gw-2", mesh.StatusAlive, "")
	tests := []struct {
		name    string
		members []mesh.Member
		want    string
	}{
		{"no mesh yet", nil, ""},
		{"not joined", []mesh.Member{self}, ""},
		{"joined", []mesh.Member{member("gw-0", mesh.StatusAlive, "B"), self}, "B"},
		{"joined, a suspect peer", []mesh.Member{member("gw-0", mesh.StatusSuspect, "B"), self}, "B"},
		{"joined, peers without an id yet", []mesh.Member{member("gw-0", mesh.StatusAlive, ""), self}, ""},
		{"a dead peer only", []mesh.Member{member("gw-0", mesh.StatusDead, "B"), self}, ""},
		{"a foreign peer only", []mesh.Member{member("a1", mesh.StatusForeign, "A"), self}, ""},
		{"peers disagree", []mesh.Member{member("gw-0", mesh.StatusAlive, "B"), member("gw-1", mesh.StatusAlive, "C"), self}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := JoiningFromMesh("gw-2", func() []mesh.Member { return tt.members })(); got != tt.want {
				t.Errorf("JoiningFromMesh = %q, want %q", got, tt.want)
			}
		})
	}
}
