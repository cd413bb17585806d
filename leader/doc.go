// Package leader runs the raft leader's reconcile duties: one loop skeleton for all of them.
//
// A duty (the voter reconciler, failover, the automatic rebalance, clearing finished drains)
// is a pass the leader runs at the start of its term, on each of its signals (membership
// changes), every interval, and at the time its last pass asked for. The skeleton owns the
// signals, the ticker and the timer; a duty only says what wakes it (Term) and what one pass
// does. Loop is what consensus.Config.LeaderLoop runs: it waits until the duties are set (the
// leader may be elected before the node that the duties drive is returned by consensus.Start),
// then runs them side by side until the term ends.
package leader
