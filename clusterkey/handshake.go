package clusterkey

import (
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The handshake of a raft connection, before raft's own bytes:
//
//	server → client: magic (8 bytes), server nonce Ns (32)
//	client → server: client nonce Nc (32), HMAC(key, client label | Ns | Nc) (32)
//	server → client: HMAC(key, server label | Ns | Nc) (32)
//
// The key is the client's primary; the server takes it when it is any key of its ring, and
// answers with that key. The server checks the client's MAC and answers only a good one; the
// client checks the server's, so that neither side gives raft's traffic (the fleet's records) to a party that
// does not hold the key. Fresh nonces on both sides make a recorded exchange worthless.
const (
	magic     = "meshgwK1"
	nonceSize = 32
	macSize   = 32
)

// ErrRefused is the error of a handshake whose peer did not prove the key.
var ErrRefused = errors.New("no proof of the cluster key came from the peer (every gateway of a cluster needs the same --admin-api-key)")

// Accept runs the server side of the handshake on conn, which must be done by deadline. It
// leaves conn's deadline cleared on success.
func (k *Key) Accept(conn net.Conn, deadline time.Time) error {
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	var ns [nonceSize]byte
	if _, err := rand.Read(ns[:]); err != nil {
		return err
	}
	if _, err := conn.Write(append([]byte(magic), ns[:]...)); err != nil {
		return err
	}
	var in [nonceSize + macSize]byte
	if _, err := io.ReadFull(conn, in[:]); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	nc := in[:nonceSize]
	var proven *secret // the key of the ring the client proved: the server answers with it
	for i := range k.ring {
		if hmac.Equal(in[nonceSize:], k.ring[i].mac([]byte(labelClient), ns[:], nc)) {
			proven = &k.ring[i]
		}
	}
	if proven == nil {
		return ErrRefused
	}
	if _, err := conn.Write(proven.mac([]byte(labelServer), ns[:], nc)); err != nil {
		return err
	}
	return conn.SetDeadline(time.Time{})
}

// Dial runs the client side of the handshake on conn, which must be done by deadline. It
// leaves conn's deadline cleared on success.
func (k *Key) Dial(conn net.Conn, deadline time.Time) error {
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	var hello [len(magic) + nonceSize]byte
	if _, err := io.ReadFull(conn, hello[:]); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if string(hello[:len(magic)]) != magic {
		return fmt.Errorf("%w: it does not speak meshgw's handshake", ErrRefused)
	}
	ns := hello[len(magic):]
	var nc [nonceSize]byte
	if _, err := rand.Read(nc[:]); err != nil {
		return err
	}
	primary := &k.ring[0]
	if _, err := conn.Write(append(nc[:], primary.mac([]byte(labelClient), ns, nc[:])...)); err != nil {
		return err
	}
	var answer [macSize]byte
	if _, err := io.ReadFull(conn, answer[:]); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if !hmac.Equal(answer[:], primary.mac([]byte(labelServer), ns, nc[:])) {
		return ErrRefused
	}
	return conn.SetDeadline(time.Time{})
}
