package admin

import (
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Peers lists the gateways of the mesh for GET /mesh/peers and meshctl peers; package
// server implements it over package mesh's members and the raft configuration.
type Peers interface {
	// Peers returns every gateway the mesh knows (this one included, foreign and departed
	// ones while they are remembered), sorted by id.
	Peers() []Peer
}

// Peer is one gateway as GET /mesh/peers answers it (DESIGN.md section 9); fields may be added,
// none renamed.
type Peer struct {
	ID string `json:"id"`
	// Address is the peer's mesh (memberlist) address, host:port.
	Address string `json:"address"`
	// Status is alive, suspect, dead, left or foreign.
	Status string `json:"status"`
	// Raft is the peer's place in the raft configuration: leader, voter, nonvoter, or "" when
	// it is not in it.
	Raft   string `json:"raft"`
	Region string `json:"region"`
	Color  string `json:"color"`
	// Version is the meshgw version the peer runs.
	Version string `json:"version"`
	// Owned is the number of workers the peer owns in the raft records this gateway applied.
	Owned int `json:"owned"`
	// AppliedIndex is the raft index the peer has applied, as it last published.
	AppliedIndex uint64 `json:"applied_index"`
	// Incarnation is the id of the peer's state directory, made when it was created.
	Incarnation string `json:"incarnation,omitempty"`
	// Rejoining marks a peer whose raft state is new and not yet confirmed caught up by a
	// leader: it votes for nobody and is not promoted to voter until then.
	Rejoining bool `json:"rejoining,omitempty"`
	// Started is when the peer's process started, as it published (absent from an older
	// build): a restart changes it, and a drain mark names the process it drains by it.
	Started *time.Time `json:"started,omitempty"`
	// Self marks the answering gateway.
	Self bool `json:"self,omitempty"`
	// Draining marks a gateway being drained (POST /mesh/drain, --leave-on-terminate).
	Draining bool `json:"draining,omitempty"`
	// CutOff marks the answering gateway when it has heard from no raft leader for longer
	// than the leader's heartbeats allow (a partition or a region cut off): it serves its
	// workers from its last state and answers writes 503 no_leader. Only the self row has it.
	CutOff bool `json:"cut_off,omitempty"`
	// LeaderSilenceSecs is how long the cut-off gateway has heard from no leader.
	LeaderSilenceSecs float64 `json:"leader_silence_secs,omitempty"`
}

// PeerList is the answer of GET /mesh/peers.
type PeerList struct {
	Peers []Peer `json:"peers"`
}

// meshPeers is GET /mesh/peers: every gateway the mesh knows, sorted by id.
func (h *Handler) meshPeers(ctx *fasthttp.RequestCtx) {
	if h.cfg.Peers == nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, codeUnavailable, "this gateway runs without a mesh")
		return
	}
	// A copy, sorted here too: the provider's slice may be shared, and tools rely on the order.
	peers := slices.Clone(h.cfg.Peers.Peers())
	if peers == nil {
		peers = []Peer{}
	}
	slices.SortStableFunc(peers, func(a, b Peer) int { return strings.Compare(a.ID, b.ID) })
	writeJSON(ctx, fasthttp.StatusOK, PeerList{Peers: peers})
}
