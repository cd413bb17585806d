package admin

import (
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// This file lends the admin API's auth and answers, as values, to the operator console
// (gateway/console): the console shows what GET /mesh/peers, GET /workers and GET
// /weight_update_journal answer, under the same auth.

// Authorize reports whether ctx passes the admin auth (the bearer key, a verified client
// certificate, or, without a key, a loopback client); when it does not, the 401 or 403 is
// written.
func (h *Handler) Authorize(ctx *fasthttp.RequestCtx) bool { return h.authorized(ctx) }

// PeersView returns what GET /mesh/peers answers, sorted by id; nil on a gateway without a mesh.
func (h *Handler) PeersView() []Peer {
	if h.cfg.Peers == nil {
		return nil
	}
	peers := slices.Clone(h.cfg.Peers.Peers())
	slices.SortStableFunc(peers, func(a, b Peer) int { return strings.Compare(a.ID, b.ID) })
	return peers
}

// WorkerRow is one worker as the operator console lists it: what GET /workers says of its
// owner and routing, read without rendering the rest of the record, so that a read of 10,000
// workers stays cheap enough to repeat every 250 ms.
type WorkerRow struct {
	ID, URL, Owner, Region string
	// Models are the worker's declared models, else those it said it serves; they may be shared
	// with the stored record: read only.
	Models               []string
	Health, Breaker      string
	Disabled, Dead       bool
	DisabledReason       string
	Routable, Stale      bool
	Active               int64
	PromptTokens, Cached uint64
	Transitions          []owned.Transition // only for a worker this gateway owns
}

// sharedRecords is implemented by a Records that can list the records without copying them
// (*consensus.Node).
type sharedRecords interface {
	WorkersShared() []fsm.Record
}

// WorkerRows returns a row per worker GET /workers lists (a host-local worker another gateway
// owns left out), in the records' order, with the same state GET /workers shows (record, in
// record.go; TestWorkerRowsMatchRecords holds the two together).
func (h *Handler) WorkerRows() []WorkerRow {
	var recs []fsm.Record
	if sh, ok := h.cfg.Records.(sharedRecords); ok {
		recs = sh.WorkersShared()
	} else {
		recs = h.records()
	}
	snap := h.cfg.Pool.Snapshot()
	out := make([]WorkerRow, 0, len(recs))
	for i := range recs {
		rec := &recs[i]
		local := rec.Owner == h.cfg.NodeID
		if !local && rec.Spec.HostLocal() {
			continue
		}
		r := WorkerRow{ID: string(rec.ID), URL: rec.Spec.URL, Owner: rec.Owner, Region: rec.Spec.Region, Models: rec.Spec.Models,
			Health: health.Pending.String(), Breaker: BreakerUnknown, Disabled: rec.Disabled, DisabledReason: rec.DisabledReason,
			Dead: rec.IsDead}
		if rec.Spec.Model != "" || len(r.Models) == 0 {
			r.Models = rec.Spec.ModelList()
		}
		if w := snap.Get(rec.ID); w != nil {
			r.Health = w.Health().String()
			r.Routable = w.Gates() == 0 && w.Allow() && !rec.Disabled && !rec.IsDead
			r.Active = w.Inflight()
			r.PromptTokens, r.Cached = w.CacheTokens()
			if len(r.Models) == 0 {
				r.Models = w.DiscoveredModels()
			}
		}
		switch {
		case local && h.cfg.Runtime != nil:
			if st, ok := h.cfg.Runtime.Status(rec.ID); ok {
				r.Breaker, r.Transitions = st.Breaker.State.String(), st.Transitions
			}
		case !local:
			h.importedRow(&r, rec.ID)
		}
		if rec.Draining {
			r.Health, r.Routable = health.Draining.String(), false
		}
		out = append(out, r)
	}
	return out
}

// importedRow is imported for a WorkerRow.
func (h *Handler) importedRow(r *WorkerRow, id worker.ID) {
	st, ok := h.importedStatus(id)
	if !ok {
		r.Health = HealthUnknown
		return
	}
	if !st.Bulletin.HealthUnknown {
		r.Health = st.Bulletin.Health.String()
	}
	r.Stale = st.Stale
	if !st.Bulletin.BreakerUnknown {
		r.Breaker = st.Bulletin.Breaker.String()
	}
}

// JournalView returns the open weight-update records; nil on a gateway without a journal.
func (h *Handler) JournalView() []fsm.JournalRecord {
	if h.cfg.Journal == nil {
		return nil
	}
	return h.cfg.Journal.Journal()
}

// NodeID returns this gateway's node id.
func (h *Handler) NodeID() string { return h.cfg.NodeID }
