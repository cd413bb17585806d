package admin

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/testkit"
)

// fakePeers is a Peers that answers a fixed list and counts its calls.
type fakePeers struct {
	list  []Peer
	calls int
}

func (f *fakePeers) Peers() []Peer { f.calls++; return f.list }

// threePeers is out of id order on purpose: the route sorts.
func threePeers() []Peer {
	return []Peer{
		{ID: "gw-3", Address: "127.0.0.1:39533", Status: "foreign", Version: "0.9.0"},
		{ID: "gw-1", Address: "127.0.0.1:39527", Status: "alive", Raft: "leader", Region: "eu", Color: "blue",
			Version: "1.0.0", Owned: 4, AppliedIndex: 120, Self: true},
		{ID: "gw-2", Address: "127.0.0.1:39530", Status: "suspect", Raft: "nonvoter", Region: "us", Color: "green",
			Version: "1.0.0", Owned: 2, AppliedIndex: 118},
	}
}

func TestMeshPeers(t *testing.T) {
	tests := []struct {
		name  string
		peers []Peer
		want  string
	}{
		{name: "three, sorted by id, self marked", peers: threePeers(), want: `{"peers":[` +
			`{"id":"gw-1","address":"127.0.0.1:39527","status":"alive","raft":"leader","region":"eu","color":"blue","version":"1.0.0","owned":4,"applied_index":120,"self":true},` +
			`{"id":"gw-2","address":"127.0.0.1:39530","status":"suspect","raft":"nonvoter","region":"us","color":"green","version":"1.0.0","owned":2,"applied_index":118},` +
			`{"id":"gw-3","address":"127.0.0.1:39533","status":"foreign","raft":"","region":"","color":"","version":"0.9.0","owned":0,"applied_index":0}]}`},
		{name: "none known", peers: nil, want: `{"peers":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := &fakePeers{list: tt.peers}
			var before []Peer
			before = append(before, tt.peers...)
			h := New(Config{NodeID: "gw-1", Peers: fp, Logger: testkit.Quiet()})
			a := do(h, req{method: "GET", uri: "/mesh/peers"})
			if a.status != 200 || string(a.header.ContentType()) != "application/json" {
				t.Fatalf("%d %q %s", a.status, a.header.ContentType(), a.body)
			}
			if a.body != tt.want {
				t.Errorf("body\n got %s\nwant %s", a.body, tt.want)
			}
			if diff := cmp.Diff(before, fp.list); diff != "" {
				t.Errorf("the route changed the provider's slice (-before +after):\n%s", diff)
			}
			if a := do(h, req{method: "HEAD", uri: "/mesh/peers"}); a.status != 200 {
				t.Errorf("HEAD: %d", a.status)
			}
		})
	}
}

func TestMeshPeersRefusals(t *testing.T) {
	fp := &fakePeers{list: threePeers()}
	withPeers := New(Config{Peers: fp, Logger: testkit.Quiet()})
	withKey := New(Config{Peers: fp, APIKey: "admin-key", Logger: testkit.Quiet()})
	noPeers := New(Config{Logger: testkit.Quiet()})
	tests := []struct {
		name   string
		h      *Handler
		r      req
		status int
		code   string
		allow  string
	}{
		{"no provider", noPeers, req{method: "GET"}, 503, "unavailable", ""},
		{"post", withPeers, req{method: "POST", body: `{}`}, 405, "method_not_allowed", "GET"},
		{"delete", withPeers, req{method: "DELETE"}, 405, "method_not_allowed", "GET"},
		{"remote without a key", withPeers, req{method: "GET", from: remote}, 403, "forbidden", ""},
		{"missing key", withKey, req{method: "GET"}, 401, "unauthorized", ""},
		{"wrong key", withKey, req{method: "GET", auth: "Bearer nope"}, 401, "unauthorized", ""},
		{"right key, remote", withKey, req{method: "GET", auth: "Bearer admin-key", from: remote}, 200, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := fp.calls
			tt.r.uri = "/mesh/peers"
			a := do(tt.h, tt.r)
			if a.status != tt.status || a.errCode() != tt.code {
				t.Fatalf("%d %s, want %d %s", a.status, a.body, tt.status, tt.code)
			}
			if got := string(a.header.Peek("Allow")); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
			if tt.status == 503 && string(a.header.Peek("Retry-After")) != "1" {
				t.Errorf("503 without Retry-After: 1")
			}
			if tt.status != 200 && fp.calls != calls {
				t.Errorf("a refused request asked the provider")
			}
			if tt.status == 200 {
				var list PeerList
				if err := json.Unmarshal([]byte(a.body), &list); err != nil || len(list.Peers) != 3 {
					t.Errorf("answer %s: %v", a.body, err)
				}
			}
		})
	}
}
