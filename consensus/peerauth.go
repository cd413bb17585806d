package consensus

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/meshgw/meshgw/certs"
	"github.com/meshgw/meshgw/mesh"
)

// memberSource is the mesh as PeerAuth sees it; *mesh.Mesh implements it.
type memberSource interface {
	// Members returns every member the mesh knows, this node included.
	Members() []mesh.Member
}

// hostLookupTimeout bounds resolving a member's advertised host name under --insecure.
const hostLookupTimeout = time.Second

// PeerAuth admits the callers of the cluster's gRPC listener (forwarded writes, fleet
// acknowledgements, read barriers, outcome reports) and refuses everyone else before a
// handler runs:
//
//   - With TLS, a caller must have presented a node certificate of the cluster's CA (the TLS
//     handshake checked the chain; PeerAuth checks that it did). Else Unauthenticated.
//   - Without (--insecure), a caller's address must be the host of a member of the mesh that is
//     alive or suspect and not foreign: the host of its gRPC, raft or mesh address. Else
//     PermissionDenied. Any process on a member's host passes: that is what --insecure means.
//   - Without TLS and with Key (a gateway with an admin key), a caller must also carry the
//     token of the cluster key in its call's metadata (clusterkey), so that a process on a
//     member's host, loopback included, that holds neither the admin key nor a node
//     certificate is refused. Else Unauthenticated.
//   - With VerifyNodeID (TLS only), the sender a request names (its from field) must be one of
//     the names of the caller's certificate, so that one gateway cannot speak for another.
//     Else PermissionDenied.
//
// The standard health service (grpc.health.v1.Health) is open to every caller the transport
// lets in: it tells only whether the gateway is ready, as the HTTP /readiness does, and
// Kubernetes probes and grpc_health_probe are not mesh members.
//
// Refusals are logged at WARN with the caller's address and the method, never a request's
// content, spaced (refusals) so that a caller retrying without end cannot fill the log.
type PeerAuth struct {
	// TLS says that the listener runs mutual TLS (its credentials require a client
	// certificate). Default false: --insecure, and Members decides.
	TLS bool
	// VerifyNodeID pins a request's sender to the caller's certificate (--tls-verify-node-id).
	VerifyNodeID bool
	// Members is the mesh. Required without TLS.
	Members memberSource
	// Key, without TLS, is the cluster key every caller must prove. Nil means none: the hosts
	// of the mesh's members are trusted (loopback without an admin key, as documented).
	Key tokenChecker
	// Logger receives the refusals. Nil means slog.Default().
	Logger *slog.Logger
	// lookup resolves a host name (tests replace it). Nil means net.DefaultResolver.
	lookup func(ctx context.Context, host string) ([]string, error)

	refused refusals
}

// ServerOptions are the interceptors to give grpc.NewServer.
func (a *PeerAuth) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(a.unary), grpc.ChainStreamInterceptor(a.stream)}
}

// tokenChecker checks the cluster key's token of an incoming call; *clusterkey.Key
// implements it.
type tokenChecker interface {
	// Check reports whether the incoming call of ctx carries the token.
	Check(ctx context.Context) bool
}

// sender is a request that names the gateway sending it.
type sender interface{ GetFrom() string }

// healthService is the prefix of the standard health service's methods, which anyone may call.
const healthService = "/grpc.health.v1.Health/"

func (a *PeerAuth) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if strings.HasPrefix(info.FullMethod, healthService) {
		return h(ctx, req)
	}
	leaf, err := a.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if err := a.checkFrom(ctx, leaf, req, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (a *PeerAuth) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if strings.HasPrefix(info.FullMethod, healthService) {
		return h(srv, ss)
	}
	leaf, err := a.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, &checkedStream{ServerStream: ss, a: a, leaf: leaf, method: info.FullMethod})
}

// checkedStream checks the sender of every message a stream receives.
type checkedStream struct {
	grpc.ServerStream
	a      *PeerAuth
	leaf   *x509.Certificate
	method string
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.a.checkFrom(s.Context(), s.leaf, m, s.method)
}

// admit decides whether the caller may call at all; with TLS it returns the caller's
// certificate.
func (a *PeerAuth) admit(ctx context.Context, method string) (*x509.Certificate, error) {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil, a.refuse(codes.Unauthenticated, "", method, "the caller's address is unknown")
	}
	if a.TLS {
		info, ok := p.AuthInfo.(credentials.TLSInfo)
		if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
			return nil, a.refuse(codes.Unauthenticated, p.Addr.String(), method, "the caller presented no certificate of the cluster's CA")
		}
		leaf := info.State.PeerCertificates[0]
		if !certs.IsNode(leaf) {
			return nil, a.refuse(codes.PermissionDenied, p.Addr.String(), method, "the caller's certificate is not a node certificate")
		}
		return leaf, nil
	}
	if a.Key != nil && !a.Key.Check(ctx) {
		return nil, a.refuse(codes.Unauthenticated, p.Addr.String(), method, "the caller proved no cluster key (every gateway of a cluster needs the same --admin-api-key)")
	}
	if !a.isMember(ctx, p.Addr) {
		return nil, a.refuse(codes.PermissionDenied, p.Addr.String(), method, "the caller is not a member of the mesh (--insecure admits only the hosts of live members)")
	}
	return nil, nil
}

// checkFrom refuses a request whose sender the caller's certificate does not name, with
// VerifyNodeID.
func (a *PeerAuth) checkFrom(ctx context.Context, leaf *x509.Certificate, m any, method string) error {
	if !a.VerifyNodeID || leaf == nil {
		return nil
	}
	s, ok := m.(sender)
	if !ok {
		return nil
	}
	if from := s.GetFrom(); !certs.NamesID(leaf, from) {
		addr := ""
		if p, ok := grpcpeer.FromContext(ctx); ok && p.Addr != nil {
			addr = p.Addr.String()
		}
		return a.refuse(codes.PermissionDenied, addr, method, "the request names sender "+quote(from)+", which the caller's certificate ("+leaf.Subject.CommonName+") does not name (--tls-verify-node-id)")
	}
	return nil
}

// isMember reports whether addr's host is the host of a live member of the mesh.
func (a *PeerAuth) isMember(ctx context.Context, addr net.Addr) bool {
	ip := addrIP(addr)
	if ip == nil || a.Members == nil {
		return false
	}
	var names []string
	for _, m := range a.Members.Members() {
		if m.Status != mesh.StatusAlive && m.Status != mesh.StatusSuspect {
			continue
		}
		for _, hp := range []string{m.Meta.RPCAddr, m.Meta.RaftAddr, m.Address} {
			host, _, err := net.SplitHostPort(hp)
			if err != nil || host == "" {
				continue
			}
			if h := net.ParseIP(host); h != nil {
				if h.Equal(ip) {
					return true
				}
			} else if !slices.Contains(names, host) {
				names = append(names, host)
			}
		}
	}
	return a.resolvesTo(ctx, names, ip)
}

// resolvesTo reports whether one of the host names resolves to ip.
func (a *PeerAuth) resolvesTo(ctx context.Context, names []string, ip net.IP) bool {
	if len(names) == 0 {
		return false
	}
	lookup := a.lookup
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	ctx, cancel := context.WithTimeout(ctx, hostLookupTimeout)
	defer cancel()
	for _, name := range names {
		addrs, err := lookup(ctx, name)
		if err != nil {
			continue
		}
		for _, s := range addrs {
			if h := net.ParseIP(s); h != nil && h.Equal(ip) {
				return true
			}
		}
	}
	return false
}

func addrIP(a net.Addr) net.IP {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return nil
	}
	return net.ParseIP(host)
}

func (a *PeerAuth) refuse(code codes.Code, addr, method, why string) error {
	log := a.Logger
	if log == nil {
		log = slog.Default()
	}
	a.refused.warn(log, "refused a call to the cluster's gRPC listener", "component", "peer-auth", "remote", addr, "method", method, "why", why)
	return status.Error(code, "meshgw: refused: "+why)
}

// quote quotes a name a caller sent, cut to a length a log line can take.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}
