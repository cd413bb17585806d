package consensus

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// TLSConfig runs raft's transport over mutual TLS (--tls-cert, --tls-key, --tls-ca): every
// connection, accepted or dialled, completes a TLS handshake before raft reads or writes a
// byte on it.
type TLSConfig struct {
	// Listen is the configuration of accepted connections; it must require and verify a
	// client certificate (certs.Store.PeerConfig does). Required.
	Listen *tls.Config
	// Dial is the configuration of the connections this node opens; it must present this
	// node's certificate and verify the peer's (certs.Store.DialConfig does). Required.
	Dial *tls.Config
}

// tlsGuard is the mutual TLS handshake of cfg.
func tlsGuard(cfg TLSConfig) streamGuard {
	return streamGuard{
		name:    "TLS handshake",
		refusal: "raft listener: refused a connection whose TLS handshake failed",
		accept: func(ctx context.Context, raw net.Conn) (net.Conn, error) {
			tc := tls.Server(raw, cfg.Listen)
			if err := tc.HandshakeContext(ctx); err != nil {
				return nil, err
			}
			return tc, nil
		},
		dial: func(ctx context.Context, addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: connectTimeout(timeout)}, Config: cfg.Dial}
			return d.DialContext(ctx, "tcp", string(addr))
		},
	}
}
