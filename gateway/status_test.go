package gateway

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/gateway/admin"
)

type fakeRaft struct {
	info consensus.Info
	err  error
}

func (f fakeRaft) Info() (consensus.Info, error) { return f.info, f.err }

func TestStatusRaftSummary(t *testing.T) {
	tests := []struct {
		name string
		raft *fakeRaft
		want string
	}{
		{name: "no raft node", want: `null`},
		{name: "three voters", raft: &fakeRaft{info: consensus.Info{Leader: "n1", Term: 3, AppliedIndex: 42, Servers: make([]consensus.Server, 3),
			Voters: 3, VotersWanted: 3, FaultTolerant: true}},
			want: `{"leader":"n1","term":3,"applied_index":42,"servers":3,"voters":3,"voters_wanted":3,"fault_tolerant":true}`},
		{name: "not yet fault-tolerant", raft: &fakeRaft{info: consensus.Info{Leader: "n1", Term: 2, AppliedIndex: 7, Servers: make([]consensus.Server, 3),
			Voters: 1, VotersWanted: 3}},
			want: `{"leader":"n1","term":2,"applied_index":7,"servers":3,"voters":1,"voters_wanted":3,"fault_tolerant":false}`},
		{name: "five voters chosen by the fleet's size", raft: &fakeRaft{info: consensus.Info{Leader: "n1", Term: 4, AppliedIndex: 9, Servers: make([]consensus.Server, 5),
			Voters: 5, VotersWanted: 5, VotersAuto: true, FaultTolerant: true}},
			want: `{"leader":"n1","term":4,"applied_index":9,"servers":5,"voters":5,"voters_wanted":5,"voters_auto":true,"fault_tolerant":true}`},
		{name: "error", raft: &fakeRaft{err: errors.New("raft is shut down")},
			want: `{"leader":"","term":0,"applied_index":0,"servers":0,"voters":0,"fault_tolerant":false,"error":"raft is shut down"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg Config
			if tt.raft != nil {
				cfg.Admin.Raft = *tt.raft
			}
			e := newEnv(t, cfg)
			code, _, body := e.get("/status")
			if code != 200 {
				t.Fatalf("GET /status = %d %s", code, body)
			}
			var st struct {
				Raft json.RawMessage `json:"raft"`
			}
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatal(err)
			}
			if got := string(st.Raft); got != tt.want && !(tt.want == "null" && got == "") {
				t.Fatalf("raft = %s; want %s", got, tt.want)
			}
		})
	}
}

type fakePeers []admin.Peer

func (f fakePeers) Peers() []admin.Peer { return f }

func TestStatusMeshSummary(t *testing.T) {
	tests := []struct {
		name  string
		peers admin.Peers
		want  string
	}{
		{name: "no peers provider", want: `null`},
		{name: "empty mesh", peers: fakePeers{},
			want: `{"members":0,"alive":0,"suspect":0,"dead":0,"left":0,"foreign":0}`},
		{name: "every status", peers: fakePeers{
			{ID: "a", Status: "alive", Self: true}, {ID: "b", Status: "alive"}, {ID: "c", Status: "suspect"},
			{ID: "d", Status: "dead"}, {ID: "e", Status: "left"}, {ID: "f", Status: "foreign"}, {ID: "g", Status: "odd"},
		}, want: `{"members":7,"alive":2,"suspect":1,"dead":1,"left":1,"foreign":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg Config
			cfg.Admin.Peers = tt.peers
			e := newEnv(t, cfg)
			code, _, body := e.get("/status")
			if code != 200 {
				t.Fatalf("GET /status = %d %s", code, body)
			}
			var st map[string]json.RawMessage
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatal(err)
			}
			if got := string(st["mesh"]); got != tt.want && !(tt.want == "null" && got == "") {
				t.Fatalf("mesh = %s; want %s", got, tt.want)
			}
			// The fields /status had before the mesh summary are all still there.
			for _, k := range []string{"node_id", "region", "policy", "draining", "workers", "admission"} {
				if _, ok := st[k]; !ok {
					t.Errorf("/status lost %q: %s", k, body)
				}
			}
		})
	}
}
