// Package clusterkey is the proof a gateway's peers give on raft's port, on the gRPC port and
// in the mesh when the control plane runs without TLS and the gateway has an admin key. Every
// gateway of a cluster shares its --admin-api-key; the cluster key is derived from it, so a
// process that holds neither the admin key nor a node certificate can join no port of the
// control plane, while one that holds the admin key gains nothing it could not do through the
// admin API.
//
// Three things are derived from the key, each under its own label, and none of them reveals
// the admin key or another of the three:
//
//   - raft's connections run a challenge and response in both directions before raft reads a
//     byte (Handshake), with fresh nonces, so that a recorded exchange cannot be replayed;
//   - gRPC calls carry a token in their metadata (Credentials, Check);
//   - the mesh encrypts and authenticates gossip with an AES-256 key (GossipKey) when no
//     --mesh-encrypt-key is given.
package clusterkey

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// Labels of the derivations. A label never changes once released: peers of two versions must
// derive the same values.
const (
	labelCluster = "meshgw cluster key v1"
	labelGRPC    = "meshgw grpc token v1"
	labelGossip  = "meshgw gossip key v1"
	labelClient  = "meshgw raft client v1"
	labelServer  = "meshgw raft server v1"
)

// Header is the gRPC metadata key that carries the token.
const Header = "meshgw-cluster-proof"

// Key is a cluster's key: a ring of one or more, derived from the admin keys of a rotation.
// A gateway proves the first (its primary) and takes a proof of any. Its zero value is not
// usable; use Derive.
type Key struct {
	ring []secret // the primary first
}

// secret is one key of the ring and its gRPC token.
type secret struct {
	k     [sha256.Size]byte
	token string
}

// Derive returns the cluster key of the gateways whose admin key is adminKey, or nil when
// adminKey is empty (no key: the control plane's loopback listeners trust the host). adminKey
// may hold several keys, one a line, the primary first, as --admin-api-key-file does during a
// rotation: the gateway proves the primary and accepts every one.
func Derive(adminKey string) *Key {
	k := &Key{}
	for _, line := range strings.Split(adminKey, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		var s secret
		copy(s.k[:], mac([]byte(line), []byte(labelCluster)))
		s.token = hex.EncodeToString(s.mac([]byte(labelGRPC)))
		k.ring = append(k.ring, s)
	}
	if len(k.ring) == 0 {
		return nil
	}
	return k
}

// mac is HMAC-SHA256 of the parts, each after the previous, under key.
func mac(key []byte, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, key)
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

func (s *secret) mac(parts ...[]byte) []byte { return mac(s.k[:], parts...) }

// GossipKey is the base64 of the AES-256 keys the mesh encrypts gossip with, one a line, the
// primary first, in the form --mesh-encrypt-key takes: the mesh encrypts with the primary and
// decrypts with each.
func (k *Key) GossipKey() string {
	keys := make([]string, len(k.ring))
	for i := range k.ring {
		keys[i] = base64.StdEncoding.EncodeToString(k.ring[i].mac([]byte(labelGossip)))
	}
	return strings.Join(keys, "\n")
}

// String hides the key from a log line or an error that formats it by mistake.
func (k *Key) String() string { return "clusterkey.Key(hidden)" }

// GoString hides the key from %#v.
func (k *Key) GoString() string { return k.String() }

// Credentials are the per-call credentials of a gRPC client: every call carries the token.
func (k *Key) Credentials() credentials.PerRPCCredentials { return perRPC{token: k.ring[0].token} }

// Check reports whether the incoming call of ctx carries the token of a key of the ring.
func (k *Key) Check(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return false
	}
	vals := md.Get(Header)
	if len(vals) != 1 {
		return false
	}
	match := false
	for i := range k.ring {
		match = hmac.Equal([]byte(vals[0]), []byte(k.ring[i].token)) || match
	}
	return match
}

// perRPC adds the token to each call's metadata.
type perRPC struct{ token string }

func (p perRPC) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{Header: p.token}, nil
}

// RequireTransportSecurity is false: the token is what proves a peer where there is no TLS
// (loopback, or --insecure on a network the operator trusts).
func (perRPC) RequireTransportSecurity() bool { return false }
