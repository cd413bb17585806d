package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
)

// Files names the three files of a gateway's mutual TLS (--tls-cert, --tls-key, --tls-ca).
type Files struct {
	Cert, Key, CA string
}

// Store holds a gateway's certificate, key and CA, and hands out TLS configurations that read
// them at every handshake: Reload swaps all three at once, so a SIGHUP rotates certificates
// without a restart and without touching open connections. Its methods are safe for
// concurrent use.
type Store struct {
	files Files
	cur   atomic.Pointer[bundle]
}

// bundle is one consistent reading of the three files.
type bundle struct {
	cert tls.Certificate
	leaf *x509.Certificate
	pool *x509.CertPool
}

// Load reads files and checks them: the key matches the certificate, and the certificate
// chains to the CA for both server and client use (peers would refuse it otherwise). Its
// errors name the flag and the file, never their contents.
func Load(files Files) (*Store, error) {
	s := &Store{files: files}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again. On an error the store keeps what it had.
func (s *Store) Reload() error {
	b, err := read(s.files)
	if err != nil {
		return err
	}
	s.cur.Store(b)
	return nil
}

// Leaf is this gateway's certificate as last loaded.
func (s *Store) Leaf() *x509.Certificate { return s.cur.Load().leaf }

func read(f Files) (*bundle, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s and --tls-key %s: %v", f.Cert, f.Key, keyPairError(err))
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %v", err)
	}
	cas, err := parseCerts(caPEM)
	if err != nil || len(cas) == 0 {
		return nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", f.CA)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	b := &bundle{cert: cert, leaf: cert.Leaf, pool: pool}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if err := b.verify(cert.Certificate, usage); err != nil {
			return nil, fmt.Errorf("--tls-cert %s does not chain to --tls-ca %s for %s: %v", f.Cert, f.CA, usageName(usage), err)
		}
	}
	return b, nil
}

// keyPairError keeps tls.LoadX509KeyPair's reason without any PEM it might quote.
func keyPairError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe
	}
	return errors.New("not a matching PEM certificate and private key")
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server use"
	}
	return "client use"
}

// verify checks a presented chain (leaf first) against the CA for usage.
func (b *bundle) verify(chain [][]byte, usage x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return errors.New("no certificate presented")
	}
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: b.pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// IsNode reports whether a certificate is a node's, good for server use as well as client use
// (CreateNode's are; CreateClient's are client-only). Raft and gRPC take only node
// certificates, so meshctl's client certificate opens the admin API and nothing else.
func IsNode(c *x509.Certificate) bool {
	if len(c.ExtKeyUsage) == 0 {
		return true // no restriction: good for any use
	}
	return slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny)
}

// Names are the names a certificate gives its holder: the common name, then the DNS names,
// IP addresses and URIs of its subject alternative names.
func Names(c *x509.Certificate) []string {
	var out []string
	if c.Subject.CommonName != "" {
		out = append(out, c.Subject.CommonName)
	}
	out = append(out, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	return out
}

// NamesID reports whether c names id (its common name or a subject alternative name): with
// --tls-verify-node-id, a gateway's certificate must name its node id.
func NamesID(c *x509.Certificate, id string) bool { return id != "" && slices.Contains(Names(c), id) }

// PeerConfig is the TLS configuration of a listener of the cluster (raft, gRPC): TLS 1.3, this
// gateway's certificate, and a node certificate of the CA required of every client.
func (s *Store) PeerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			b := s.cur.Load()
			return &tls.Config{
				MinVersion:       tls.VersionTLS13,
				Certificates:     []tls.Certificate{b.cert},
				ClientAuth:       tls.RequireAndVerifyClientCert,
				ClientCAs:        b.pool,
				VerifyConnection: requireNode,
			}, nil
		},
	}
}

// requireNode refuses a client certificate that is not a node's (meshctl's client-only one).
func requireNode(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 || !IsNode(cs.PeerCertificates[0]) {
		return errors.New("certs: the peer's certificate is not a node certificate (server and client use)")
	}
	return nil
}

// DialConfig is the TLS configuration of connections to other gateways' raft and gRPC
// listeners: it presents this gateway's certificate and takes only a node certificate of the
// CA. Peers are dialled at whatever address they advertise, so the chain is checked, not the
// host name.
func (s *Store) DialConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &s.cur.Load().cert, nil
		},
		// The standard check would pin the CA read at the time of this call; VerifyConnection
		// checks against the CA of the moment instead, which is the only check that runs.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			chain := make([][]byte, len(cs.PeerCertificates))
			for i, c := range cs.PeerCertificates {
				chain[i] = c.Raw
			}
			if err := s.cur.Load().verify(chain, x509.ExtKeyUsageServerAuth); err != nil {
				return fmt.Errorf("certs: the peer's certificate: %w", err)
			}
			return requireNode(cs)
		},
	}
}

// HTTPConfig is the TLS configuration of the admin and data-plane listener (--tls-http): this
// gateway's certificate, TLS 1.2 or later, HTTP/1.1. A client certificate is not required (the
// data plane's clients have none); one that is given must chain to the CA, and then opens the
// admin API as a bearer key does.
func (s *Store) HTTPConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			b := s.cur.Load()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"http/1.1"},
				Certificates: []tls.Certificate{b.cert},
				ClientAuth:   tls.VerifyClientCertIfGiven,
				ClientCAs:    b.pool,
			}, nil
		},
	}
}
