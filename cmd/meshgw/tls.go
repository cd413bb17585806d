package main

import (
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshgw/meshgw/clusterkey"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/gateway"
	"github.com/meshgw/meshgw/mesh"
)

// The control plane's TLS as the listeners and clients take it (flags_tls.go decides whether
// it is on). Every configuration reads the certificate store at each handshake, so a SIGHUP
// reload reaches every connection made after it.

// raftTLS is raft's transport configuration; nil means plain TCP.
func (f *tlsFlags) raftTLS() *consensus.TLSConfig {
	if !f.enabled() {
		return nil
	}
	return &consensus.TLSConfig{Listen: f.store.PeerConfig(), Dial: f.store.DialConfig()}
}

// dialCreds are the credentials of this gateway's gRPC connections to its peers (forwarding,
// fleet acknowledgements, read barriers, outcome reports); nil means plaintext.
func (f *tlsFlags) dialCreds() credentials.TransportCredentials {
	if !f.enabled() {
		return nil
	}
	return credentials.NewTLS(f.store.DialConfig())
}

// dialOptions are dialCreds and keyDialOptions as gRPC dial options; nil means the client's
// default (plaintext).
func (f *tlsFlags) dialOptions() []grpc.DialOption {
	if c := f.dialCreds(); c != nil {
		return []grpc.DialOption{grpc.WithTransportCredentials(c)}
	}
	if k := f.keyDialOptions(); k != nil {
		return append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, k...)
	}
	return nil
}

// clusterKey is the key this gateway's peers prove on raft's and the gRPC port without TLS:
// derived from --admin-api-key (clusterkey). Nil with TLS, whose node certificates prove a
// peer, and without an admin key, when the control plane trusts the hosts of its members.
func (f *tlsFlags) clusterKey() *clusterkey.Key {
	if f.enabled() || f.adminKey == nil {
		return nil
	}
	return clusterkey.Derive(*f.adminKey)
}

// keyDialOptions carry the cluster key's token on every gRPC call to a peer; nil without a
// cluster key.
func (f *tlsFlags) keyDialOptions() []grpc.DialOption {
	if k := f.clusterKey(); k != nil {
		return []grpc.DialOption{grpc.WithPerRPCCredentials(k.Credentials())}
	}
	return nil
}

// raftKey is the cluster key as raft's transport takes it; nil (an interface holding no
// pointer) without one.
func (f *tlsFlags) raftKey() consensus.ClusterKey {
	if k := f.clusterKey(); k != nil {
		return k
	}
	return nil
}

// serverOptions are the options of the cluster's gRPC server: TLS credentials when on, and the
// peer authorization (consensus.PeerAuth) of every call, which without TLS admits the hosts of
// the members of the mesh that prove the cluster key, when there is one.
func (f *tlsFlags) serverOptions(members interface{ Members() []mesh.Member }, log *slog.Logger) []grpc.ServerOption {
	auth := &consensus.PeerAuth{TLS: f.enabled(), VerifyNodeID: f.verifyNodeID, Members: members, Logger: log}
	if k := f.clusterKey(); k != nil {
		auth.Key = k
	}
	opts := auth.ServerOptions()
	if f.enabled() {
		opts = append(opts, grpc.Creds(consensus.LogRefusedHandshakes(credentials.NewTLS(f.store.PeerConfig()), log)))
	}
	return opts
}

// httpListener wraps the main listener in TLS with --tls-http.
func (f *tlsFlags) httpListener(ln net.Listener) net.Listener {
	if !f.enabled() || !f.http {
		return ln
	}
	return tls.NewListener(ln, f.store.HTTPConfig())
}

// status is what GET /status shows of the security of this gateway.
func (f *tlsFlags) status() *gateway.SecurityStatus {
	return &gateway.SecurityStatus{TLS: f.enabled(), TLSHTTP: f.enabled() && f.http, Insecure: f.insecure, Warning: f.warning()}
}

// reloadOnHangup reloads the certificate files on each SIGHUP until stop is called, then runs
// each of more (the gossip keys). A reload
// that fails keeps the certificates in use and says why (never the files' contents). Without
// TLS a SIGHUP only logs that there is nothing to reload (it no longer ends the process).
func (f *tlsFlags) reloadOnHangup(log *slog.Logger, more ...func(*slog.Logger)) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-hup:
				f.reload(log)
				for _, r := range more {
					r(log)
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-finished
	}
}

func (f *tlsFlags) reload(log *slog.Logger) {
	if !f.enabled() {
		log.Info("SIGHUP: nothing to reload (no --tls-cert)")
		return
	}
	if err := f.store.Reload(); err != nil {
		log.Error("SIGHUP: the TLS files did not reload; the certificates in use stay", "err", err)
		return
	}
	leaf := f.store.Leaf()
	log.Info("SIGHUP: reloaded the TLS certificate, key and CA", "cert", f.cert, "subject", leaf.Subject.CommonName,
		"serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter)
	if f.self != "" {
		if err := f.checkNodeID(f.self); err != nil {
			log.Warn("SIGHUP: the new certificate does not name this gateway; peers will refuse its requests", "err", err)
		}
	}
}
