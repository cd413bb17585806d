package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pki is a CA with node and client certificates in one folder.
type pki struct {
	dir string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	if _, err := CreateCA(Options{Dir: p.dir}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pki) node(t *testing.T, id string) Files {
	t.Helper()
	if _, err := CreateNode(Options{Dir: p.dir, Overwrite: true}, id, []string{"127.0.0.1", "localhost"}); err != nil {
		t.Fatal(err)
	}
	cert, key := NodeFiles(p.dir, id)
	return Files{Cert: cert, Key: key, CA: filepath.Join(p.dir, CACertFile)}
}

func (p *pki) client(t *testing.T, name string) Files {
	t.Helper()
	if _, err := CreateClient(Options{Dir: p.dir}, name); err != nil {
		t.Fatal(err)
	}
	cert, key := ClientFiles(p.dir, name)
	return Files{Cert: cert, Key: key, CA: filepath.Join(p.dir, CACertFile)}
}

func TestCreateWritesFilesWithModes(t *testing.T) {
	p := newPKI(t)
	p.node(t, "gw1")
	p.client(t, "admin")
	want := map[string]os.FileMode{
		"ca.crt": 0o644, "ca.key": 0o600, "node-gw1.crt": 0o644, "node-gw1.key": 0o600,
		"client-admin.crt": 0o644, "client-admin.key": 0o600,
	}
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("%d files, want %d (no temporary file left behind)", len(entries), len(want))
	}
	for name, mode := range want {
		fi, err := os.Stat(filepath.Join(p.dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}
	ca := leaf(t, filepath.Join(p.dir, "ca.crt"))
	node := leaf(t, filepath.Join(p.dir, "node-gw1.crt"))
	if !ca.IsCA || ca.NotAfter.Sub(ca.NotBefore) < 9*365*24*time.Hour {
		t.Errorf("CA: IsCA %v, lifetime %v", ca.IsCA, ca.NotAfter.Sub(ca.NotBefore))
	}
	if node.Subject.CommonName != "gw1" || !NamesID(node, "gw1") || !NamesID(node, "127.0.0.1") || !NamesID(node, "localhost") || !IsNode(node) {
		t.Errorf("node certificate names %v, node %v", Names(node), IsNode(node))
	}
	if life := node.NotAfter.Sub(node.NotBefore); life < 365*24*time.Hour || life > 3*365*24*time.Hour {
		t.Errorf("node lifetime %v, want one to two years", life)
	}
	if IsNode(leaf(t, filepath.Join(p.dir, "client-admin.crt"))) {
		t.Error("a client certificate passes for a node's")
	}
}

func leaf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := parseCerts(data)
	if err != nil || len(cs) != 1 {
		t.Fatalf("%s: %v (%d certificates)", path, err, len(cs))
	}
	return cs[0]
}

func TestCreateRefusesToOverwrite(t *testing.T) {
	p := newPKI(t)
	before, _ := os.ReadFile(filepath.Join(p.dir, "ca.key"))
	tests := []struct {
		name string
		make func(o Options) error
	}{
		{"ca", func(o Options) error { _, err := CreateCA(o); return err }},
		{"node", func(o Options) error { _, err := CreateNode(o, "gw1", []string{"10.0.0.1"}); return err }},
		{"client", func(o Options) error { _, err := CreateClient(o, "admin"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_ = tt.make(Options{Dir: p.dir}) // the first of node and client succeeds
			err := tt.make(Options{Dir: p.dir})
			if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "--overwrite") {
				t.Fatalf("second create: %v, want ErrExists naming --overwrite", err)
			}
			if err := tt.make(Options{Dir: p.dir, Overwrite: true}); err != nil {
				t.Fatalf("with Overwrite: %v", err)
			}
		})
	}
	after, _ := os.ReadFile(filepath.Join(p.dir, "ca.key"))
	if string(before) == string(after) {
		t.Error("CreateCA with Overwrite kept the old key")
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	p := newPKI(t)
	if _, err := CreateNode(Options{Dir: p.dir}, "gw1", nil); err == nil {
		t.Error("a node certificate without --host")
	}
	if _, err := CreateNode(Options{Dir: p.dir}, "../gw1", []string{"10.0.0.1"}); err == nil {
		t.Error("a node id with a slash")
	}
	if _, err := CreateNode(Options{Dir: t.TempDir()}, "gw1", []string{"10.0.0.1"}); err == nil || !strings.Contains(err.Error(), "create-ca") {
		t.Errorf("without a CA: %v", err)
	}
}

func TestLoadChecksTheFiles(t *testing.T) {
	p, other := newPKI(t), newPKI(t)
	good := p.node(t, "gw1")
	foreign := other.node(t, "gw1")
	client := p.client(t, "admin")
	tests := []struct {
		name    string
		files   Files
		wantErr string
	}{
		{"good", good, ""},
		{"another CA", Files{Cert: foreign.Cert, Key: foreign.Key, CA: good.CA}, "does not chain to --tls-ca"},
		{"key of another certificate", Files{Cert: good.Cert, Key: foreign.Key, CA: good.CA}, "not a matching PEM certificate"},
		{"client certificate", client, "for server use"},
		{"missing CA", Files{Cert: good.Cert, Key: good.Key, CA: filepath.Join(p.dir, "nope")}, "--tls-ca"},
		{"CA is a key", Files{Cert: good.Cert, Key: good.Key, CA: good.Key}, "no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.files)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("the error quotes a file: %v", err)
			}
		})
	}
}

// handshake runs a TLS handshake of client against a server over loopback and returns the
// serial the server presented, the client's error and the server's (the client's first Read
// sees a server's refusal in TLS 1.3).
func handshake(t *testing.T, server, client *tls.Config) (serial string, clientErr, serverErr error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		if err := c.(*tls.Conn).Handshake(); err != nil {
			done <- err
			return
		}
		_, err = c.Write([]byte("ok"))
		done <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err == nil {
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadFull(c, make([]byte, 2))
		serial = c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	return serial, err, <-done
}

func TestPeerConfigIsMutual(t *testing.T) {
	p, other := newPKI(t), newPKI(t)
	gw1, err := Load(p.node(t, "gw1"))
	if err != nil {
		t.Fatal(err)
	}
	gw2, err := Load(p.node(t, "gw2"))
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := Load(other.node(t, "gw9"))
	if err != nil {
		t.Fatal(err)
	}
	clientFiles := p.client(t, "admin")
	clientCert, err := tls.LoadX509KeyPair(clientFiles.Cert, clientFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		server *tls.Config
		client *tls.Config
		ok     bool
	}{
		{"two nodes of the CA", gw1.PeerConfig(), gw2.DialConfig(), true},
		{"client without a certificate", gw1.PeerConfig(), &tls.Config{InsecureSkipVerify: true}, false},
		{"client of another CA", gw1.PeerConfig(), stranger.DialConfig(), false},
		{"server of another CA", stranger.PeerConfig(), gw1.DialConfig(), false},
		{"meshctl's client certificate", gw1.PeerConfig(), &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{clientCert}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, cerr, serr := handshake(t, tt.server, tt.client)
			if tt.ok && (cerr != nil || serr != nil) {
				t.Fatalf("refused: client %v, server %v", cerr, serr)
			}
			if !tt.ok && (cerr == nil || serr == nil) {
				t.Fatalf("accepted: client %v, server %v", cerr, serr)
			}
		})
	}
}

func TestReloadSwapsTheCertificate(t *testing.T) {
	p := newPKI(t)
	files := p.node(t, "gw1")
	gw1, err := Load(files)
	if err != nil {
		t.Fatal(err)
	}
	gw2, err := Load(p.node(t, "gw2"))
	if err != nil {
		t.Fatal(err)
	}
	server, client := gw1.PeerConfig(), gw2.DialConfig()
	before, _, _ := handshake(t, server, client)
	p.node(t, "gw1") // a new certificate in the same files
	if err := gw1.Reload(); err != nil {
		t.Fatal(err)
	}
	after, _, _ := handshake(t, server, client)
	if before == "" || before == after {
		t.Errorf("serial before %q, after %q: the same configuration should serve the new certificate", before, after)
	}
	if err := os.WriteFile(files.Cert, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gw1.Reload(); err == nil {
		t.Fatal("a reload of a broken file succeeded")
	}
	if kept, _, _ := handshake(t, server, client); kept != after {
		t.Errorf("after a failed reload the serial is %q, want the last good %q", kept, after)
	}
}

func TestHTTPConfigTakesClientsWithoutCertificates(t *testing.T) {
	p, other := newPKI(t), newPKI(t)
	gw1, err := Load(p.node(t, "gw1"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf(t, filepath.Join(p.dir, "ca.crt")))
	foreign := other.client(t, "admin")
	fc, err := tls.LoadX509KeyPair(foreign.Cert, foreign.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, cerr, serr := handshake(t, gw1.HTTPConfig(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}); cerr != nil || serr != nil {
		t.Errorf("a client without a certificate: client %v, server %v", cerr, serr)
	}
	if _, cerr, _ := handshake(t, gw1.HTTPConfig(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{fc}}); cerr == nil {
		t.Error("a client certificate of another CA was taken")
	}
}
