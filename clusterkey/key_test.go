package clusterkey

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
)

func TestDeriveWithoutAnAdminKeyIsNil(t *testing.T) {
	if k := Derive(""); k != nil {
		t.Fatalf("Derive(\"\") = %v, want nil", k)
	}
}

func TestDerivedValuesDependOnTheAdminKeyAndHideIt(t *testing.T) {
	a, a2, b := Derive("secret-a"), Derive("secret-a"), Derive("secret-b")
	if a.GossipKey() != a2.GossipKey() || a.ring[0].token != a2.ring[0].token {
		t.Fatal("one admin key derived two keys")
	}
	if a.GossipKey() == b.GossipKey() || a.ring[0].token == b.ring[0].token {
		t.Fatal("two admin keys derived the same key")
	}
	raw, err := base64.StdEncoding.DecodeString(a.GossipKey())
	if err != nil || len(raw) != 32 {
		t.Fatalf("gossip key: %d bytes, %v; want a base64 AES-256 key", len(raw), err)
	}
	if a.ring[0].token == a.GossipKey() {
		t.Fatal("the gRPC token is the gossip key")
	}
	for _, s := range []string{fmt.Sprint(a), fmt.Sprintf("%v %+v %#v %s", a, a, a, a), a.GossipKey(), a.ring[0].token} {
		if strings.Contains(s, "secret-a") {
			t.Fatalf("%q shows the admin key", s)
		}
	}
	if s := fmt.Sprintf("%v %+v %#v", a, a, a); strings.Contains(s, a.ring[0].token) {
		t.Fatalf("formatting the key shows its token: %s", s)
	}
}

func TestCheckTakesOnlyTheToken(t *testing.T) {
	k := Derive("secret")
	md, err := k.Credentials().GetRequestMetadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	good := metadata.NewIncomingContext(context.Background(), metadata.New(md))
	if !k.Check(good) {
		t.Fatal("the key's own credentials do not pass Check")
	}
	other, _ := Derive("other").Credentials().GetRequestMetadata(context.Background())
	for name, ctx := range map[string]context.Context{
		"no metadata":   context.Background(),
		"no token":      metadata.NewIncomingContext(context.Background(), metadata.Pairs("x", "y")),
		"another key's": metadata.NewIncomingContext(context.Background(), metadata.New(other)),
		"the admin key": metadata.NewIncomingContext(context.Background(), metadata.Pairs(Header, "secret")),
		"two tokens":    metadata.NewIncomingContext(context.Background(), metadata.Pairs(Header, md[Header], Header, md[Header])),
	} {
		if k.Check(ctx) {
			t.Errorf("%s passes Check", name)
		}
	}
	if Derive("secret").Credentials().RequireTransportSecurity() {
		t.Error("the credentials require TLS; the token is for the control plane without it")
	}
}

// handshake runs both sides over a pipe and returns their errors.
func handshake(server, client *Key) (serr, cerr error) {
	s, c := net.Pipe()
	defer s.Close()
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	done := make(chan error, 1)
	go func() {
		err := server.Accept(s, deadline)
		if err != nil {
			s.Close() // as the stream layer does: the client then reads EOF
		}
		done <- err
	}()
	cerr = client.Dial(c, deadline)
	if cerr != nil {
		c.Close()
	}
	return <-done, cerr
}

func TestHandshakeWithTheSameKeySucceedsAndClearsDeadlines(t *testing.T) {
	k := Derive("secret")
	s, c := net.Pipe()
	defer s.Close()
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	done := make(chan error, 1)
	go func() { done <- k.Accept(s, deadline) }()
	if err := Derive("secret").Dial(c, deadline); err != nil {
		t.Fatalf("client: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server: %v", err)
	}
	// The connection carries raft's bytes afterwards, both ways.
	go func() { _, _ = c.Write([]byte("raft")) }()
	buf := make([]byte, 4)
	if _, err := s.Read(buf); err != nil || string(buf) != "raft" {
		t.Fatalf("after the handshake: %q %v", buf, err)
	}
}

func TestHandshakeWithAnotherKeyIsRefusedBothWays(t *testing.T) {
	serr, cerr := handshake(Derive("secret"), Derive("guess"))
	if !errors.Is(serr, ErrRefused) {
		t.Errorf("server: %v, want ErrRefused", serr)
	}
	if !errors.Is(cerr, ErrRefused) {
		t.Errorf("client: %v, want ErrRefused", cerr)
	}
}

func TestClientRefusesAServerThatDoesNotSpeakTheHandshake(t *testing.T) {
	s, c := net.Pipe()
	defer s.Close()
	defer c.Close()
	go func() { _, _ = s.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n12345678901234")) }()
	if err := Derive("secret").Dial(c, time.Now().Add(5*time.Second)); !errors.Is(err, ErrRefused) {
		t.Fatalf("Dial to a server of another protocol: %v, want ErrRefused", err)
	}
}

func TestServerRefusesAClientThatSpeaksRaftAtOnce(t *testing.T) {
	s, c := net.Pipe()
	defer s.Close()
	defer c.Close()
	go func() {
		hello := make([]byte, len(magic)+nonceSize)
		_, _ = c.Read(hello)
		// raft's first byte is the RPC type; then its msgpack body. 64 bytes of it.
		_, _ = c.Write(append([]byte{0}, make([]byte, 63)...))
	}()
	if err := Derive("secret").Accept(s, time.Now().Add(5*time.Second)); !errors.Is(err, ErrRefused) {
		t.Fatalf("Accept of a plain raft client: %v, want ErrRefused", err)
	}
}

func TestServerGivesUpOnASilentClientAtTheDeadline(t *testing.T) {
	s, c := net.Pipe()
	defer s.Close()
	defer c.Close()
	go func() {
		hello := make([]byte, len(magic)+nonceSize)
		_, _ = c.Read(hello) // then says nothing
	}()
	err := Derive("secret").Accept(s, time.Now().Add(50*time.Millisecond))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Accept of a silent client: %v, want a timeout", err)
	}
}

// TestRotation: during an admin key rotation a gateway of the ring "new, old" and one of "old"
// or of "old, new" prove themselves to each other, as does one of "new" to "new, old"; a ring
// that holds neither's primary refuses.
func TestRotation(t *testing.T) {
	old, oldNew, newOld, fresh := Derive("old"), Derive("old\nnew"), Derive("new\r\nold\n"), Derive("new")
	pairs := []struct {
		name           string
		server, client *Key
		ok             bool
	}{
		{"round 1 to a gateway not yet rolled", old, oldNew, true},
		{"a gateway not yet rolled to round 1", oldNew, old, true},
		{"round 2 to round 1", oldNew, newOld, true},
		{"round 1 to round 2", newOld, oldNew, true},
		{"round 3 to round 2", newOld, fresh, true},
		{"round 2 to round 3", fresh, newOld, true},
		{"the new key to the old alone", old, fresh, false},
		{"the old key to the new alone", fresh, old, false},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			serr, cerr := handshake(p.server, p.client)
			if ok := serr == nil && cerr == nil; ok != p.ok {
				t.Fatalf("raft handshake: server %v, client %v; want ok %v", serr, cerr, p.ok)
			}
			md, _ := p.client.Credentials().GetRequestMetadata(context.Background())
			if got := p.server.Check(metadata.NewIncomingContext(context.Background(), metadata.New(md))); got != p.ok {
				t.Fatalf("gRPC token: %v, want %v", got, p.ok)
			}
		})
	}
	if keys := strings.Split(newOld.GossipKey(), "\n"); len(keys) != 2 || keys[0] != fresh.GossipKey() || keys[1] != old.GossipKey() {
		t.Fatalf("gossip keys of a ring: %q, want the primary's then the other's", keys)
	}
	if Derive("\n \n") != nil {
		t.Fatal("blank lines derived a key")
	}
}
