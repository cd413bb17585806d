// Package weights runs a weight update, POST /update_weights_from_disk, under the fleet-wide
// weight-update journal (DESIGN.md section 9; the SGLang-Omni router's journal, made durable
// and fleet-wide by raft).
//
// One update at a time, on any gateway (its coordinator):
//
//  1. The targets are picked: every enabled HTTP engine worker, or those of a model, or a list
//     of worker ids.
//  2. A journal record naming the coordinator and the targets is committed, and it disables
//     the targets; the write is fleet-acknowledged. While a record is open a new update is
//     refused (409, naming it). If some gateway did not apply the disable in time, the update
//     fails closed: nothing is sent, and the record closes as not started. A close that finds
//     no leader is tried again for a few seconds; if it still fails, or its outcome is unknown,
//     the answer says so: the record stays open (or may), its targets disabled.
//  3. The body is sent, unchanged, to each target's /update_weights_from_disk, a few at a
//     time, each bounded by a timeout. Each outcome is recorded in raft as it arrives: updated
//     (2xx and no "success": false), failed (any other answer), or unknown (no answer: the
//     engine may hold either version).
//  4. If every target was updated, the record closes and the targets it disabled are enabled
//     again; those an operator had disabled before stay disabled.
//
// Anything else leaves the record open, and every gateway keeps its targets disabled: an
// operator verifies each engine and enables it (PUT {"disabled": false}, which takes it out of
// the record; the record closes once empty), or drops the record (POST
// /weight_update_journal/resolve {"acknowledge": true}; the targets then stay disabled until
// enabled one by one). An update that ended with a target not updated reads failed (its record
// is running with every outcome in, one not updated: fsm.JournalRecord.State). A coordinator
// that restarts marks its own running record interrupted; the
// leader marks a running or interrupted record whose coordinator left the mesh, or died,
// coordinator_lost. An opening
// write whose outcome is unknown (the leader failed under it) answers an error and sends
// nothing; if it did commit, the coordinator's Watch finds a record it does not run and marks
// it interrupted, so it is never left running unnoticed.
package weights
