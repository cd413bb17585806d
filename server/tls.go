package server

import (
	"crypto/tls"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshgw/meshgw/clusterkey"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/gateway"
	"github.com/meshgw/meshgw/mesh"
)

// security is the control plane's TLS as the listeners and clients take it (the caller decides
// whether it is on: TLSConfig.Certs), and the cluster key peers prove without it. Every
// configuration reads the certificate store at each handshake, so a reload (Server.Reload)
// reaches every connection made after it.
type security struct {
	TLSConfig
	// key is the cluster key derived from the admin key (clusterKey).
	key *clusterkey.Key
}

// newSecurity derives the cluster key from adminKey: the key this gateway's peers prove on
// raft's and the gRPC port without TLS. None with TLS, whose node certificates prove a peer,
// and none without an admin key, when the control plane trusts the hosts of its members.
func newSecurity(c TLSConfig, adminKey string) *security {
	s := &security{TLSConfig: c}
	if !s.enabled() {
		s.key = clusterkey.Derive(adminKey)
	}
	return s
}

// enabled reports whether raft and gRPC run mutual TLS.
func (s *security) enabled() bool { return s.Certs != nil }

// raftTLS is raft's transport configuration; nil means plain TCP.
func (s *security) raftTLS() *consensus.TLSConfig {
	if !s.enabled() {
		return nil
	}
	return &consensus.TLSConfig{Listen: s.Certs.PeerConfig(), Dial: s.Certs.DialConfig()}
}

// dialCreds are the credentials of this gateway's gRPC connections to its peers (forwarding,
// fleet acknowledgements, read barriers, outcome reports); nil means plaintext.
func (s *security) dialCreds() credentials.TransportCredentials {
	if !s.enabled() {
		return nil
	}
	return credentials.NewTLS(s.Certs.DialConfig())
}

// dialOptions are dialCreds and keyDialOptions as gRPC dial options; nil means the client's
// default (plaintext).
func (s *security) dialOptions() []grpc.DialOption {
	if c := s.dialCreds(); c != nil {
		return []grpc.DialOption{grpc.WithTransportCredentials(c)}
	}
	if k := s.keyDialOptions(); k != nil {
		return append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, k...)
	}
	return nil
}

// keyDialOptions carry the cluster key's token on every gRPC call to a peer; nil without a
// cluster key.
func (s *security) keyDialOptions() []grpc.DialOption {
	if s.key != nil {
		return []grpc.DialOption{grpc.WithPerRPCCredentials(s.key.Credentials())}
	}
	return nil
}

// raftKey is the cluster key as raft's transport takes it; nil (an interface holding no
// pointer) without one.
func (s *security) raftKey() consensus.ClusterKey {
	if s.key != nil {
		return s.key
	}
	return nil
}

// serverOptions are the options of the cluster's gRPC server: TLS credentials when on, and the
// peer authorization (consensus.PeerAuth) of every call, which without TLS admits the hosts of
// the members of the mesh that prove the cluster key, when there is one.
func (s *security) serverOptions(members interface{ Members() []mesh.Member }, log *slog.Logger) []grpc.ServerOption {
	auth := &consensus.PeerAuth{TLS: s.enabled(), VerifyNodeID: s.VerifyNodeID, Members: members, Logger: log}
	if s.key != nil {
		auth.Key = s.key
	}
	opts := auth.ServerOptions()
	if s.enabled() {
		opts = append(opts, grpc.Creds(consensus.LogRefusedHandshakes(credentials.NewTLS(s.Certs.PeerConfig()), log)))
	}
	return opts
}

// httpListener wraps the data plane's listener in TLS with TLSConfig.HTTP.
func (s *security) httpListener(ln net.Listener) net.Listener {
	if !s.enabled() || !s.HTTP {
		return ln
	}
	return tls.NewListener(ln, s.Certs.HTTPConfig())
}

// status is what GET /status shows of the security of this gateway.
func (s *security) status() *gateway.SecurityStatus {
	return &gateway.SecurityStatus{TLS: s.enabled(), TLSHTTP: s.enabled() && s.HTTP, Insecure: s.Insecure, Warning: s.Warning}
}
