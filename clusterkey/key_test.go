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
	if a.GossipKey() != a2.GossipKey() || a.token != a2.token {
		t.Fatal("one admin key derived two keys")
	}
	if a.GossipKey() == b.GossipKey() || a.token == b.token {
		t.Fatal("two admin keys derived the same key")
	}
	raw, err := base64.StdEncoding.DecodeString(a.GossipKey())
	if err != nil || len(raw) != 32 {
		t.Fatalf("gossip key: %d bytes, %v; want a base64 AES-256 key", len(raw), err)
	}
	if a.token == a.GossipKey() {
		t.Fatal("the gRPC token is the gossip key")
	}
	for _, s := range []string{fmt.Sprint(a), fmt.Sprintf("%v %+v %#v %s", a, a, a, a), a.GossipKey(), a.token} {
		if strings.Contains(s, "secret-a") {
			t.Fatalf("%q shows the admin key", s)
		}
	}
	if s := fmt.Sprintf("%v %+v %#v", a, a, a); strings.Contains(s, a.token) {
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
