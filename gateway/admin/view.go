package admin

import (
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/consensus/fsm"
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

// WorkersView returns what GET /workers answers: every record with this gateway's runtime state
// of it (a host-local worker another gateway owns left out), in the records' order.
func (h *Handler) WorkersView() []Record {
	snap := h.cfg.Pool.Snapshot()
	recs := h.records()
	out := make([]Record, 0, len(recs))
	for i := range recs {
		rec := &recs[i]
		if rec.Owner != h.cfg.NodeID && rec.Spec.HostLocal() {
			continue
		}
		out = append(out, h.record(rec, snap.Get(rec.ID)))
	}
	return out
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
