package admin

import (
	"strings"
	"testing"
)

// TestRegisterOwnerIsALiveGateway: POST /workers takes an owner only when it is this gateway
// or an alive peer of the mesh that is not draining, as a transfer takes its "to": a name the
// mesh does not know (or a foreign gateway) is 404 peer_not_found, a gateway that cannot take
// workers 409 peer_unavailable, and nothing is written.
func TestRegisterOwnerIsALiveGateway(t *testing.T) {
	e := newEnv(t, nil)
	mesh := &fakePeers{list: []Peer{
		{ID: "n1", Status: "alive", Self: true}, {ID: "n2", Status: "alive"}, {ID: "n3", Status: "dead"},
		{ID: "n4", Status: "alive", Draining: true}, {ID: "n5", Status: "suspect"}, {ID: "n6", Status: "left"},
		{ID: "x", Status: "foreign"},
	}}
	h := e.handler(func(c *Config) { c.Peers = mesh })
	noMesh := e.handler(func(c *Config) { c.Peers = nil })
	tests := []struct {
		name   string
		h      *Handler
		owner  string
		status int
		code   string
		msg    string
	}{
		{"this gateway by default", h, "", 201, "", ""},
		{"this gateway by name", h, `"owner":"n1",`, 201, "", ""},
		{"an alive peer", h, `"owner":"n2",`, 201, "", ""},
		{"a name the mesh does not know", h, `"owner":"ghost",`, 404, "peer_not_found", "owner: ghost is not a peer of this mesh"},
		{"a foreign gateway", h, `"owner":"x",`, 404, "peer_not_found", "owner: x is not a peer of this mesh"},
		{"a dead peer", h, `"owner":"n3",`, 409, "peer_unavailable", "owner: n3 is dead"},
		{"a draining peer", h, `"owner":"n4",`, 409, "peer_unavailable", "owner: n4 is draining"},
		{"a suspect peer", h, `"owner":"n5",`, 409, "peer_unavailable", "owner: n5 is suspect"},
		{"a peer that left", h, `"owner":"n6",`, 409, "peer_unavailable", "owner: n6 is left"},
		{"without a mesh, this gateway", noMesh, `"owner":"n1",`, 201, "", ""},
		{"without a mesh, another", noMesh, `"owner":"n2",`, 404, "peer_not_found", "owner: n2 is not a peer of this mesh"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := workerURL(8100 + i)
			a := do(tt.h, req{method: "POST", uri: "/workers", body: `{` + tt.owner + `"url":"` + u + `"}`})
			if a.status != tt.status || a.errCode() != tt.code || !strings.Contains(a.body, tt.msg) {
				t.Fatalf("%d %s; want %d %s %q", a.status, a.body, tt.status, tt.code, tt.msg)
			}
			if _, written := e.node.Worker(idOf(t, u)); written != (tt.status == 201) {
				t.Errorf("written %v after %d", written, a.status)
			}
		})
	}
}
