package gateway

import (
	"errors"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/zmqlink"
)

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string       `json:"object"`
	Data   []modelEntry `json:"data"`
}

// serveModels answers GET /v1/models with the models the routable workers serve, deduplicated
// and sorted, in the OpenAI list shape: a worker's declared models, else those its owner
// discovered (pool.Worker.ListedModels), else --model when it is set. Nothing is asked here.
func (g *Gateway) serveModels(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	var idBuf [64]byte
	defer g.stampID(ctx, idBuf[:0]) // after the answer is written: writeError resets it
	if !ctx.IsGet() {
		writeError(ctx, fasthttp.StatusMethodNotAllowed, bodyMethod)
		g.metrics.observe(routeModels, fasthttp.StatusMethodNotAllowed, 0)
		return
	}
	var names []string
	for _, w := range g.pool.Snapshot().Routable {
		listed := w.ListedModels()
		if len(listed) == 0 && g.cfg.DefaultModel != "" {
			names = append(names, g.cfg.DefaultModel)
		}
		names = append(names, listed...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	list := modelList{Object: "list", Data: make([]modelEntry, 0, len(names))}
	for _, n := range names {
		list.Data = append(list.Data, modelEntry{ID: n, Object: "model", OwnedBy: "meshgw"})
	}
	writeJSON(ctx, fasthttp.StatusOK, list)
	g.metrics.observe(routeModels, fasthttp.StatusOK, time.Since(start).Seconds())
}

// errNoLink: only ZMQ workers announce their models in a handshake.
var errNoLink = errors.New("the worker has no zmq link")

// AnnouncedModels returns the models a ZMQ worker's engine announced in the WELCOME of its
// current session; zmqlink.ErrNotReady before the first handshake. gateway/owned reads it
// through the pool's transport to discover the models of a ZMQ worker that declares none.
func (u *upstream) AnnouncedModels() ([]string, error) {
	u.ready()
	z, ok := u.rpc.(*zmqTransport)
	if !ok {
		return nil, errNoLink
	}
	info := z.link.Info()
	if info.Session == "" {
		return nil, zmqlink.ErrNotReady
	}
	return info.Models, nil
}

// Status is the answer of GET /status.
type Status struct {
	NodeID    string          `json:"node_id"`
	Region    string          `json:"region"`
	Policy    string          `json:"policy"`
	Draining  bool            `json:"draining"`
	Workers   WorkersSummary  `json:"workers"`
	Admission AdmissionStatus `json:"admission"`
	// BodyBudget is the buffer for request bodies shared by every request in flight
	// (--max-buffered-body-mb).
	BodyBudget BodyBudgetStatus `json:"body_budget"`
	// Quorum says whether raft has a leader: without one, admin writes answer 503 no_leader
	// and the data plane serves the last applied state (fail-static). Omitted on a gateway
	// without a control plane.
	Quorum *bool `json:"quorum,omitempty"`
	// Raft summarizes the raft node: leader, term, applied index, servers; omitted on a gateway
	// without one.
	Raft *RaftSummary `json:"raft,omitempty"`
	// Mesh counts the gateways of the mesh by status; omitted on a gateway without a peers
	// provider (Config.Admin.Peers).
	Mesh *MeshSummary `json:"mesh,omitempty"`
	// Security says how the control plane is protected (Config.Security); omitted when unset.
	Security *SecurityStatus `json:"security,omitempty"`
}

// SecurityStatus is the security part of GET /status (DESIGN.md section 12).
type SecurityStatus struct {
	// TLS says that raft and gRPC run mutual TLS; TLSHTTP that this listener serves HTTPS.
	TLS     bool `json:"tls"`
	TLSHTTP bool `json:"tls_http"`
	// Insecure says that --insecure allowed raft and gRPC in plaintext; Warning repeats the
	// line logged at start.
	Insecure bool   `json:"insecure"`
	Warning  string `json:"warning,omitempty"`
}

// MeshSummary is the mesh part of GET /status: the gateways GET /mesh/peers lists, counted by
// their status. Members is their number, this gateway included; a status outside the five
// known ones counts in Members only.
type MeshSummary struct {
	Members int `json:"members"`
	Alive   int `json:"alive"`
	Suspect int `json:"suspect"`
	Dead    int `json:"dead"`
	Left    int `json:"left"`
	Foreign int `json:"foreign"`
}

// summarizeMesh counts peers by status.
func summarizeMesh(peers []admin.Peer) *MeshSummary {
	m := &MeshSummary{Members: len(peers)}
	for _, p := range peers {
		switch p.Status {
		case "alive":
			m.Alive++
		case "suspect":
			m.Suspect++
		case "dead":
			m.Dead++
		case "left":
			m.Left++
		case "foreign":
			m.Foreign++
		}
	}
	return m
}

// RaftSummary is the raft part of GET /status.
type RaftSummary struct {
	Leader       string `json:"leader"`
	Term         uint64 `json:"term"`
	AppliedIndex uint64 `json:"applied_index"`
	Servers      int    `json:"servers"`
	// Voters, VotersWanted and FaultTolerant are consensus.Info's: how many servers vote, how
	// many the leader works towards (omitted when not known), and whether losing one voter
	// keeps the quorum. "voters 1 of 3" and fault_tolerant false: the joined gateways are not
	// voters yet, and the first one's death would stop every write.
	Voters       int `json:"voters"`
	VotersWanted int `json:"voters_wanted,omitempty"`
	// VotersAuto says VotersWanted is the count the leader chooses by the fleet's size
	// (--raft-voters 0).
	VotersAuto    bool   `json:"voters_auto,omitempty"`
	FaultTolerant bool   `json:"fault_tolerant"`
	Error         string `json:"error,omitempty"`
}

// WorkersSummary counts the pool.
type WorkersSummary struct {
	Total    int `json:"total"`
	Routable int `json:"routable"`
	Inflight int `json:"active_requests"`
}

// Status returns the pool summary, admission counters, and the raft and mesh summaries of the
// providers in Config.Admin.
func (g *Gateway) Status() any {
	snap := g.pool.Snapshot()
	ws := WorkersSummary{Total: len(snap.All), Routable: snap.RoutableCount()}
	for _, w := range snap.All {
		ws.Inflight += int(w.Inflight())
	}
	st := Status{
		NodeID: g.cfg.NodeID, Region: g.cfg.Region, Policy: g.policy.Name(),
		Draining: g.draining.Load(), Workers: ws, Admission: g.adm.status(), BodyBudget: g.budget.status(), Security: g.cfg.Security,
	}
	if r := g.cfg.Admin.Raft; r != nil {
		info, err := r.Info()
		st.Raft = &RaftSummary{Leader: info.Leader, Term: info.Term, AppliedIndex: info.AppliedIndex, Servers: len(info.Servers),
			Voters: info.Voters, VotersWanted: info.VotersWanted, VotersAuto: info.VotersAuto, FaultTolerant: info.FaultTolerant}
		if err != nil {
			st.Raft.Error = err.Error()
		}
	}
	if p := g.cfg.Admin.Peers; p != nil {
		st.Mesh = summarizeMesh(p.Peers())
	}
	if q := g.cfg.Quorum; q != nil {
		has := q()
		st.Quorum = &has
	}
	return st
}
