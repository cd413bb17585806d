package gateway

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/meshgw/meshgw/consensus"
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
		{name: "leader", raft: &fakeRaft{info: consensus.Info{Leader: "n1", Term: 3, AppliedIndex: 42, Servers: make([]consensus.Server, 3)}},
			want: `{"leader":"n1","term":3,"applied_index":42,"servers":3}`},
		{name: "error", raft: &fakeRaft{err: errors.New("raft is shut down")},
			want: `{"leader":"","term":0,"applied_index":0,"servers":0,"error":"raft is shut down"}`},
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
