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

// TestPeersElection: a gateway that hears from no raft leader while it sees a quorum of voters
// alive is not cut off: an election is under way (the leader just died), and the line says so.
func TestPeersElection(t *testing.T) {
	const body = `{"peers": [
		{"id": "gw-1", "address": "10.78.1.1:7946", "status": "dead", "raft": "voter"},
		{"id": "gw-2", "address": "10.78.1.2:7946", "status": "alive", "raft": "voter", "self": true, "cut_off": true, "leader_silence_secs": 1.1},
		{"id": "gw-3", "address": "10.78.1.3:7946", "status": "alive", "raft": "voter"}]}`
	f := &fakeAdmin{answers: map[string]canned{"GET /mesh/peers": {200, body}}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	code, stdout, stderr := runCLI(t, srv.URL, nil, "peers")
	want := "gw-2 (this gateway) has heard from no raft leader for 1.1s, with 2 of 3 voters alive: an election, most likely"
	if code != 0 || !strings.Contains(stdout, want) || strings.Contains(stdout, "is cut off") {
		t.Errorf("exit %d (%q), stdout %q; want a line %q and no cut-off", code, stderr, stdout, want)
	}
}

// TestPeersCutOff: a gateway that hears from no raft leader (its region cut off) says so under
// the table, naming itself and how long, and what that means for reads and writes; a peer in
// good standing prints no such line.
func TestPeersCutOff(t *testing.T) {
	const body = `{"peers": [
		{"id": "gw-eu", "address": "10.78.1.1:7946", "status": "alive", "raft": "voter", "region": "eu", "self": true, "cut_off": true, "leader_silence_secs": 4.2},
		{"id": "gw-us", "address": "10.78.2.1:7946", "status": "suspect", "raft": "voter", "region": "us"}]}`
	f := &fakeAdmin{answers: map[string]canned{"GET /mesh/peers": {200, body}}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	code, stdout, stderr := runCLI(t, srv.URL, nil, "peers")
	want := "gw-eu (this gateway) is cut off: no raft leader heard for 4.2s"
	if code != 0 || !strings.Contains(stdout, want) || !strings.Contains(stdout, "503 no_leader") {
		t.Errorf("exit %d (%q), stdout %q; want a line %q", code, stderr, stdout, want)
	}
	f = &fakeAdmin{answers: map[string]canned{"GET /mesh/peers": {200, strings.ReplaceAll(body, `"cut_off": true`, `"cut_off": false`)}}}
	srv2 := httptest.NewServer(f)
	defer srv2.Close()
	if code, stdout, _ := runCLI(t, srv2.URL, nil, "peers"); code != 0 || strings.Contains(stdout, "cut off") {
		t.Errorf("exit %d, stdout %q; want no cut-off line", code, stdout)
	}
}
