package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPeersRefusedOrUnreadable: a gateway without a mesh, a refused key and an answer meshctl
// cannot read all exit 1 with one line on stderr and nothing on stdout.
func TestPeersRefusedOrUnreadable(t *testing.T) {
	tests := []struct {
		name   string
		answer canned
		args   []string
		stderr string
	}{
		{"no mesh", canned{503, `{"error": {"message": "this gateway runs without a mesh", "code": "unavailable"}}`},
			nil, "meshctl: 503 unavailable: this gateway runs without a mesh"},
		{"no mesh, json", canned{503, `{"error": {"message": "this gateway runs without a mesh", "code": "unavailable"}}`},
			[]string{"-o", "json"}, "meshctl: 503 unavailable: this gateway runs without a mesh"},
		{"unauthorized", canned{401, `{"error": {"message": "missing or wrong admin bearer key", "code": "unauthorized"}}`},
			nil, "meshctl: 401 unauthorized: missing or wrong admin bearer key"},
		{"not JSON", canned{200, `<html>`}, nil, "meshctl: the gateway's answer to GET /mesh/peers cannot be read"},
		{"a peer of the wrong shape", canned{200, `{"peers": [{"id": 3}]}`}, nil,
			"meshctl: the gateway's answer to GET /mesh/peers cannot be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAdmin{answers: map[string]canned{"GET /mesh/peers": tt.answer}}
			srv := httptest.NewServer(f)
			defer srv.Close()
			code, stdout, stderr := runCLI(t, srv.URL, nil, append([]string{"peers"}, tt.args...)...)
			if code != exitRefused || !strings.HasPrefix(stderr, tt.stderr) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 1 and one line starting %q", code, stderr, tt.stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if strings.Contains(stderr, testKey) {
				t.Errorf("the admin key was printed: %q", stderr)
			}
		})
	}
}

// TestPeersEmpty: a mesh that lists nobody prints the header and its count.
func TestPeersEmpty(t *testing.T) {
	for _, body := range []string{`{"peers": []}`, `{"peers": null}`} {
		f := &fakeAdmin{answers: map[string]canned{"GET /mesh/peers": {200, body}}}
		srv := httptest.NewServer(f)
		code, stdout, stderr := runCLI(t, srv.URL, nil, "peers", "-o", "wide")
		srv.Close()
		want := "NAME  ADDRESS  STATUS  RAFT  REGION  COLOR  VERSION  OWNED  APPLIED  LAG\n0 peers: no leader\n"
		if code != 0 || trimLines(stdout) != want {
			t.Errorf("%s: exit %d (%q), stdout %q; want %q", body, code, stderr, stdout, want)
		}
	}
}
