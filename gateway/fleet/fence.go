package fleet

import (
	"runtime/debug"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// fence runs, instead of a pass, on each change raft applies while the reconciler holds the
// applied state back (CaughtUp has not closed: a restart still catching up). It stops the health
// checks of every worker this gateway owns whose applied record names another owner, or is gone
// (DESIGN.md section 5: a gateway that learns it is no longer the owner stops probing at once),
// and applies nothing else: the pool keeps the restored state (fail-static), a worker that
// became this gateway's meanwhile is owned by the pass when CaughtUp closes, and that pass logs
// the owner change.
//
// Stopping is right whatever the held state: an owner and epoch that raft replaced never become
// current again (a worker given back gets a new epoch), so the checks of the epoch given to Own
// are over, even when later entries move the worker back here. A record still naming this
// gateway at another epoch (moved away and back) keeps its checks until that pass.
//
// It reads only the records changed since the previous fence or pass, like an incremental pass,
// and every record when the records cannot name them (a restored snapshot). It recovers and logs
// a panic, so a bad record never stops the loop.
func (r *Reconciler) fence() {
	if r.cfg.Owner == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("panic while stopping the checks of workers owned elsewhere now", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	since := max(r.fenced, r.version)
	ch, ok := r.cfg.Records.ChangedSince(since)
	switch {
	case !ok:
		// ch.Now was read before the records, as in fullPass: what changes between the two reads
		// is fenced again next time.
		r.fenceAll(r.cfg.Records.WorkersShared())
	case ch.Now == since:
		return
	default:
		for i := range ch.Workers {
			r.fenceOne(ch.Workers[i].ID, &ch.Workers[i])
		}
		for _, id := range ch.Removed {
			r.fenceOne(id, nil)
		}
	}
	r.fenced = ch.Now
}

// fenceAll fences every owned worker against recs, every applied record.
func (r *Reconciler) fenceAll(recs []fsm.Record) {
	byID := make(map[worker.ID]*fsm.Record, len(recs))
	for i := range recs {
		byID[recs[i].ID] = &recs[i]
	}
	for id, a := range r.seen {
		if a.owned {
			r.fenceOne(id, byID[id])
		}
	}
}

// fenceOne disowns worker id if this gateway runs its checks and rec, its applied record (nil
// when it is gone), names another owner.
func (r *Reconciler) fenceOne(id worker.ID, rec *fsm.Record) {
	a, known := r.seen[id]
	if !known || !a.owned || rec != nil && rec.Owner == r.cfg.NodeID {
		return
	}
	r.cfg.Owner.Disown(id)
	a.owned = false // the pass when CaughtUp closes sees no checks left to stop
	r.seen[id] = a
	if rec == nil {
		r.log.Info("worker record removed while raft state is not current: its health checks stopped", "id", id, "epoch", a.epoch)
		return
	}
	r.log.Info("worker owned elsewhere now, while raft state is not current: its health checks stopped",
		"id", id, "owner", rec.Owner, "epoch", rec.Epoch, "from_epoch", a.epoch)
}
