// Package certs makes the cluster's X.509 certificates and serves them, reloadable, as the
// mutual-TLS configurations of raft, gRPC and HTTPS (DESIGN.md section 12).
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Lifetimes of the certificates Create* make, as `consul tls` and `cockroach cert` choose them.
const (
	DefaultCALifetime     = 10 * 365 * 24 * time.Hour
	DefaultNodeLifetime   = 2 * 365 * 24 * time.Hour
	DefaultClientLifetime = 2 * 365 * 24 * time.Hour
)

// File names inside a certificate folder. A node's pair is node-ID.crt and node-ID.key, a
// client's client-NAME.crt and client-NAME.key.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// NodeFiles returns the certificate and key paths of node id in dir.
func NodeFiles(dir, id string) (cert, key string) {
	return filepath.Join(dir, "node-"+id+".crt"), filepath.Join(dir, "node-"+id+".key")
}

// ClientFiles returns the certificate and key paths of client name in dir.
func ClientFiles(dir, name string) (cert, key string) {
	return filepath.Join(dir, "client-"+name+".crt"), filepath.Join(dir, "client-"+name+".key")
}

// Options are what every Create* takes. The zero value of every field but Dir is a working
// default.
type Options struct {
	// Dir is the folder the files go to; it is made 0700 when missing. Required.
	Dir string
	// Lifetime is how long the certificate is valid. Zero means the kind's default.
	Lifetime time.Duration
	// Overwrite replaces existing files. Default false: a file that exists is an error
	// (ErrExists) and nothing is written.
	Overwrite bool
	// Now is when the certificate starts to be valid (less a minute of clock skew). Zero means
	// time.Now().
	Now time.Time
}

// ErrExists is returned when a file to write exists and Options.Overwrite is false.
var ErrExists = errors.New("exists")

// CreateCA makes a new certificate authority, ECDSA P-256, and writes ca.crt (0644) and ca.key
// (0600) to o.Dir. It returns the paths written.
func CreateCA(o Options) ([]string, error) {
	certPath, keyPath := filepath.Join(o.Dir, CACertFile), filepath.Join(o.Dir, CAKeyFile)
	if err := prepare(o, certPath, keyPath); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(o, DefaultCALifetime, "meshgw CA")
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return write(certPath, keyPath, der, key)
}

// CreateNode makes the certificate of gateway id, signed by the CA in o.Dir: its common name
// is id, its subject alternative names are hosts (IP addresses or DNS names the gateway is
// reached at), and it serves as both server and client (raft and gRPC are both). It writes
// node-ID.crt and node-ID.key.
func CreateNode(o Options, id string, hosts []string) ([]string, error) {
	if err := checkName("node id", id); err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, errors.New("a node certificate needs at least one --host (an IP address or DNS name peers reach it at)")
	}
	certPath, keyPath := NodeFiles(o.Dir, id)
	return o.issue(certPath, keyPath, DefaultNodeLifetime, id, hosts,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
}

// CreateClient makes the client certificate name (meshctl's, for a gateway serving HTTPS with
// --tls-http), signed by the CA in o.Dir. It is good for client authentication only, so raft
// and gRPC, which take only node certificates, refuse it. It writes client-NAME.crt and
// client-NAME.key.
func CreateClient(o Options, name string) ([]string, error) {
	if err := checkName("client name", name); err != nil {
		return nil, err
	}
	certPath, keyPath := ClientFiles(o.Dir, name)
	return o.issue(certPath, keyPath, DefaultClientLifetime, name, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
}

// issue makes and writes a leaf certificate signed by the CA in o.Dir.
func (o Options) issue(certPath, keyPath string, lifetime time.Duration, cn string, hosts []string, usage []x509.ExtKeyUsage) ([]string, error) {
	ca, caKey, err := loadCA(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := prepare(o, certPath, keyPath); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(o, lifetime, cn)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = usage
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter // a certificate outlives its CA by nothing
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	return write(certPath, keyPath, der, key)
}

// template is the common part of every certificate: serial, subject, validity.
func template(o Options, def time.Duration, cn string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	life := o.Lifetime
	if life <= 0 {
		life = def
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"meshgw"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(life),
	}, nil
}

// checkName refuses names that would make odd file names.
func checkName(what, s string) error {
	if s == "" || strings.ContainsAny(s, `/\`) || strings.TrimSpace(s) != s || s == "." || s == ".." {
		return fmt.Errorf("%s %q cannot name a certificate file", what, s)
	}
	return nil
}

// prepare makes o.Dir and refuses to go on when a file exists and may not be replaced.
func prepare(o Options, paths ...string) error {
	if o.Dir == "" {
		return errors.New("no folder given for the certificate files")
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return err
	}
	if o.Overwrite {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s %w (give --overwrite to replace it)", p, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// write writes the certificate 0644 and the key 0600, each through a temporary file renamed
// into place, so that a gateway reloading on SIGHUP never reads half a file.
func write(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) ([]string, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	return []string{certPath, keyPath}, nil
}

func writeFile(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// loadCA reads ca.crt and ca.key from dir.
func loadCA(dir string) (*x509.Certificate, any, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, nil, fmt.Errorf("the CA: %w (make it with `meshctl cert create-ca`)", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("the CA's key: %w", err)
	}
	certs, err := parseCerts(certPEM)
	if err != nil || len(certs) == 0 {
		return nil, nil, fmt.Errorf("%s holds no certificate", filepath.Join(dir, CACertFile))
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, nil, fmt.Errorf("%s holds no PEM key", filepath.Join(dir, CAKeyFile))
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: the key does not parse", filepath.Join(dir, CAKeyFile))
	}
	if !certs[0].IsCA {
		return nil, nil, fmt.Errorf("%s is not a CA certificate", filepath.Join(dir, CACertFile))
	}
	return certs[0], key, nil
}

// parseCerts returns every CERTIFICATE block of a PEM file.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}
