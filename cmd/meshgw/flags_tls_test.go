package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/certs"
)

// testCerts makes a CA with node certificates gw1 and gw2 and returns the flags of each.
func testCerts(t *testing.T) (dir string, flags func(id string) []string) {
	t.Helper()
	dir = t.TempDir()
	if _, err := certs.CreateCA(certs.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"gw1", "gw2"} {
		if _, err := certs.CreateNode(certs.Options{Dir: dir}, id, []string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
	}
	return dir, func(id string) []string {
		cert, key := certs.NodeFiles(dir, id)
		return []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", filepath.Join(dir, certs.CACertFile)}
	}
}

// TestSecureByDefault: where raft, gRPC and the mesh bind, and which command lines refuse to
// start without TLS (DESIGN.md section 12).
func TestSecureByDefault(t *testing.T) {
	dir, tlsOf := testCerts(t)
	_, otherOf := testCerts(t)
	cluster := []string{"--host", "0.0.0.0", "--join", "10.0.0.2", "--mesh-advertise-host", "10.0.0.1"}
	with := func(a []string, more ...string) []string { return append(append([]string{}, a...), more...) }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr []string // substrings of the one-line error; nil for success
		binds   string   // "mesh raft gRPC" bind addresses, checked on success when set
		tls     bool
		warning string // a substring of the --insecure warning
	}{
		{"standalone keeps the control plane on loopback", nil, nil, nil, "127.0.0.1 127.0.0.1 127.0.0.1", false, ""},
		{"standalone on one address too", []string{"--host", "10.0.0.1"}, nil, nil, "127.0.0.1 127.0.0.1 127.0.0.1", false, ""},
		{"a loopback advertise host is standalone", []string{"--mesh-advertise-host", "localhost"}, nil, nil, "127.0.0.1 127.0.0.1 127.0.0.1", false, ""},
		{"a loopback cluster needs no TLS", []string{"--host", "127.0.0.1", "--join", "127.0.0.1:7000"}, nil, nil, "127.0.0.1 127.0.0.1 127.0.0.1", false, ""},
		{"bootstrap-expect on loopback", []string{"--host", "127.0.0.2", "--bootstrap-expect", "3"}, nil, nil, "127.0.0.2 127.0.0.2 127.0.0.2", false, ""},
		{"join on 0.0.0.0 without TLS", cluster, nil, []string{"raft and gRPC would listen on 0.0.0.0 without TLS", "--tls-cert", "--tls-key", "--tls-ca", "--insecure"}, "", false, ""},
		{"an advertised address is a cluster", []string{"--mesh-advertise-host", "10.0.0.1"}, nil, []string{"raft and gRPC would listen on 0.0.0.0", "--insecure"}, "", false, ""},
		{"a raft advertise address too", []string{"--raft-advertise", "10.0.0.1:39528"}, nil, []string{"raft and gRPC would listen on 0.0.0.0"}, "", false, ""},
		{"gRPC alone beyond loopback", []string{"--host", "127.0.0.1", "--join", "127.0.0.1:7000", "--rpc-host", "10.0.0.1"}, nil, []string{"gRPC would listen on 10.0.0.1 without TLS"}, "", false, ""},
		{"an explicit gRPC host on a standalone gateway", []string{"--rpc-host", "0.0.0.0"}, nil, []string{"gRPC would listen on 0.0.0.0 without TLS"}, "", false, ""},
		{"--insecure allows it and says so", with(cluster, "--insecure"), nil, nil, "0.0.0.0 0.0.0.0 0.0.0.0", false, "raft and gRPC listen on 0.0.0.0"},
		{"--insecure from the environment", cluster, map[string]string{"MESHGW_INSECURE": "true"}, nil, "", false, "without TLS (--insecure)"},
		{"TLS allows it", with(cluster, tlsOf("gw1")...), nil, nil, "0.0.0.0 0.0.0.0 0.0.0.0", true, ""},
		{"TLS from the environment", cluster, map[string]string{"MESHGW_TLS_CERT": tlsOf("gw1")[1], "MESHGW_TLS_KEY": tlsOf("gw1")[3], "MESHGW_TLS_CA": tlsOf("gw1")[5]}, nil, "", true, ""},
		{"TLS on loopback too", with(tlsOf("gw1"), "--tls-http"), nil, nil, "127.0.0.1 127.0.0.1 127.0.0.1", true, ""},
		{"half of TLS", []string{"--tls-cert", tlsOf("gw1")[1]}, nil, []string{"go together", "--tls-key, --tls-ca missing"}, "", false, ""},
		{"TLS and --insecure", with(tlsOf("gw1"), "--insecure"), nil, []string{"--insecure turns TLS off"}, "", false, ""},
		{"--tls-http without TLS", []string{"--tls-http"}, nil, []string{"--tls-http needs --tls-cert"}, "", false, ""},
		{"--tls-verify-node-id without TLS", []string{"--tls-verify-node-id"}, nil, []string{"--tls-verify-node-id needs"}, "", false, ""},
		{"a certificate of another CA", []string{"--tls-cert", otherOf("gw1")[1], "--tls-key", otherOf("gw1")[3], "--tls-ca", filepath.Join(dir, "ca.crt")}, nil, []string{"does not chain to --tls-ca"}, "", false, ""},
		{"a certificate of another node", with(tlsOf("gw2"), "--tls-verify-node-id", "--node-id", "gw1"), nil, []string{"names gw2", `not the node id "gw1"`}, "", false, ""},
		{"a certificate of this node", with(tlsOf("gw1"), "--tls-verify-node-id", "--node-id", "gw1"), nil, nil, "", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.args, tt.env)
			if tt.wantErr != nil {
				if err == nil || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line", err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			c := &o.cluster
			if got := c.meshBind() + " " + c.raftBind() + " " + c.rpcBind(); tt.binds != "" && got != tt.binds {
				t.Errorf("binds %q, want %q", got, tt.binds)
			}
			if o.tls.enabled() != tt.tls {
				t.Errorf("TLS %v, want %v", o.tls.enabled(), tt.tls)
			}
			if w := o.tls.warning(); (tt.warning == "") != (w == "") || !strings.Contains(w, tt.warning) {
				t.Errorf("warning %q, want one saying %q", w, tt.warning)
			}
		})
	}
}

// TestSecureByDefaultExits: the refusal exits 2 with one line, before any listener opens.
func TestSecureByDefaultExits(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runContext(context.Background(), []string{"--host", "0.0.0.0", "--port", "1", "--join", "10.0.0.2", "--mesh-advertise-host", "10.0.0.1"},
		env(nil), &stdout, &stderr)
	line := stderr.String()
	if code != 2 || strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "meshgw: raft and gRPC would listen on 0.0.0.0 without TLS") {
		t.Fatalf("exit %d, stderr %q", code, line)
	}
	for _, w := range []string{"--tls-cert", "--tls-key", "--tls-ca", "--insecure"} {
		if !strings.Contains(line, w) {
			t.Errorf("the error does not name %s: %q", w, line)
		}
	}
}
