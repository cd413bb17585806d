// Package ownership decides who owns which worker: the failover of a dead or departed owner's
// workers to live peers, the handoff of a draining peer's workers, the transfer of one worker,
// and the rebalance that evens out ownership (DESIGN.md section 5).
//
// Every decision is a pure function of the records, the peers and, where time matters, now:
// PlanFailover, PlanHandoff, PlanTransfer and PlanRebalance. Each returns moves fenced by the
// (owner, epoch) it read; the scenario scripts of testdata/ show them at work. They share two
// rules: only a live peer (alive, not draining) receives a worker, and a worker goes to the
// peer of the highest rendezvous hash of its region first, so that a handoff puts a worker
// where a failover would have.
//
// The contract of failover:
//
//  1. Only the raft leader writes. FailoverReconciler.Run is meant to run in the node's leader
//     loop, and stops when the leadership ends.
//  2. It passes when it starts, on each membership signal, every reconcile interval, and when the
//     grace of a gone owner runs out: each pass reads the records and the mesh anew, so a
//     dropped signal costs nothing.
//  3. PlanFailover, a pure function, decides the moves: every worker of an owner that has been
//     dead, left or unknown to the mesh for longer than the grace goes to the live peer of the
//     highest rendezvous hash (worker id, peer id), among the peers of the worker's region when
//     there are any, else among all live peers. Alive and suspect owners, and gone owners still
//     within the grace, keep their workers. Host-local (ipc://) workers never move.
//  4. A pass applies one fsm.Reassign entry of at most MaxMovesPerEntry moves, each fenced by the
//     (owner, epoch) it read, so that a move planned on a stale view is skipped by the FSM, never
//     applied twice. A pass that moved something is followed at once by another.
//  5. Each moved record's epoch becomes the entry's raft index; the new owner's fleet reconciler
//     sees the record name it and starts probing the worker.
//  6. A pass with nothing to fail over moves what draining peers still own (PlanHandoff), as
//     drain: a drain's own moves go through the Operator, and this pass catches what came after.
//
// The contract of an operator's change (Operator): the caller runs a read barrier, the Operator
// plans on the applied records and the mesh with the drain marks, and writes fsm.OperatorReassign
// entries (forwarded to the leader from any gateway) whose moves are fenced like failover's; a
// drain's marks go in the same entry as its first moves, each naming the process it drains (the
// peer's start time, from its node metadata). The caller then waits for the fleet to apply the last
// entry's index before it answers.
//
// The end of a drain: every raft leader, on each pass of its drain duty, clears the marks
// Finished returns, a pure function of the marks, the records, the mesh and the raft
// configuration: a drained peer that owns nothing, does not lead, is out of the configuration
// and gone from the mesh (left, dead or forgotten) is done; one the mesh lists alive as another
// process than its mark names was started again, and its drain is over whatever the rest says.
// The gateway then joins as a new one: the voter reconciler adds it, and it takes workers again.
package ownership
