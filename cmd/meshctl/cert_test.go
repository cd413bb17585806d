package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/certs"
)

func TestCertCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	env := map[string]string{"MESHCTL_GATEWAY": "not a URL"} // cert commands never read it
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   []string // substrings
		stderr   string
		newFiles []string
	}{
		{"node before the CA", []string{"cert", "create-node", "gw1", "--host", "10.0.0.1", "--dir", dir}, 1, nil, "create-ca", nil},
		{"CA", []string{"cert", "create-ca", "--dir", dir}, 0, []string{"ca.crt (0644)", "ca.key (0600)"}, "", []string{"ca.crt", "ca.key"}},
		{"CA again", []string{"cert", "create-ca", "--dir", dir}, 1, nil, "--overwrite", nil},
		{"node", []string{"cert", "create-node", "gw1", "--host", "10.0.0.1,gw1.internal", "--dir", dir}, 0, []string{"node-gw1.crt (0644)", "node-gw1.key (0600)"}, "", []string{"node-gw1.crt", "node-gw1.key"}},
		{"node again", []string{"cert", "create-node", "gw1", "--host", "10.0.0.1", "--dir", dir}, 1, nil, "exists (give --overwrite", nil},
		{"node rotated", []string{"cert", "create-node", "gw1", "--host", "10.0.0.1", "--dir", dir, "--overwrite"}, 0, []string{"node-gw1.crt"}, "", nil},
		{"node without a host", []string{"cert", "create-node", "gw2", "--dir", dir}, 2, nil, "--host is required", nil},
		{"node without an id", []string{"cert", "create-node", "--host", "10.0.0.1", "--dir", dir}, 2, nil, "usage", nil},
		{"client", []string{"cert", "create-client", "--dir", dir}, 0, []string{"client-admin.crt (0644)", "client-admin.key (0600)"}, "", []string{"client-admin.crt", "client-admin.key"}},
		{"named client", []string{"cert", "create-client", "ops", "--dir", dir, "--days", "30"}, 0, []string{"client-ops.crt"}, "", []string{"client-ops.crt", "client-ops.key"}},
		{"bad days", []string{"cert", "create-client", "x", "--dir", dir, "--days", "0"}, 2, nil, "--days 0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", env, tt.args...)
			if code != tt.code || (tt.stderr != "" && !strings.Contains(stderr, tt.stderr)) || strings.Count(stderr, "\n") > 1 {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout %q does not say %q", stdout, s)
				}
			}
			for _, f := range tt.newFiles {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	// The files make a working pair for a gateway.
	cert, key := certs.NodeFiles(dir, "gw1")
	if _, err := certs.Load(certs.Files{Cert: cert, Key: key, CA: filepath.Join(dir, "ca.crt")}); err != nil {
		t.Fatal(err)
	}
}

// TestTLSGateway: meshctl reaches an https:// gateway with --tls-ca and presents
// --tls-cert/--tls-key; a gateway that requires a client certificate refuses it without one.
func TestTLSGateway(t *testing.T) {
	dir := t.TempDir()
	if _, err := certs.CreateCA(certs.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.CreateNode(certs.Options{Dir: dir}, "gw1", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.CreateClient(certs.Options{Dir: dir}, "admin"); err != nil {
		t.Fatal(err)
	}
	nodeCert, nodeKey := certs.NodeFiles(dir, "gw1")
	store, err := certs.Load(certs.Files{Cert: nodeCert, Key: nodeKey, CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error": {"message": "no client certificate", "code": "unauthorized"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"node_id": "gw1"}`))
	}))
	srv.TLS = store.HTTPConfig()
	srv.StartTLS()
	defer srv.Close()
	clientCert, clientKey := certs.ClientFiles(dir, "admin")
	ca := filepath.Join(dir, "ca.crt")
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stderr string
	}{
		{"client certificate", []string{"--tls-ca", ca, "--tls-cert", clientCert, "--tls-key", clientKey, "status"}, nil, 0, ""},
		{"from the environment", []string{"status"}, map[string]string{"MESHCTL_TLS_CA": ca, "MESHCTL_TLS_CERT": clientCert, "MESHCTL_TLS_KEY": clientKey}, 0, ""},
		{"no client certificate", []string{"--tls-ca", ca, "status"}, nil, 1, "401 unauthorized"},
		{"no CA", []string{"status"}, nil, 1, "certificate"},
		{"half a pair", []string{"--tls-ca", ca, "--tls-cert", clientCert, "status"}, nil, 2, "go together"},
		{"key of another pair", []string{"--tls-ca", ca, "--tls-cert", clientCert, "--tls-key", nodeKey, "status"}, nil, 2, "not a matching"},
		{"http gateway", []string{"--gateway", "http://127.0.0.1:1", "--tls-ca", ca, "status"}, nil, 2, "need an https:// --gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, srv.URL, tt.env, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, tt.code, tt.stderr)
			}
			if code == 0 && !strings.Contains(stdout, "gw1") {
				t.Errorf("stdout %q", stdout)
			}
		})
	}
}
