// Package health probes workers and runs each worker's health state machine (DESIGN.md section 6).
//
// It is a pure library: it knows nothing of HTTP routing, raft or gossip, and takes its time from
// an injected Clock. The gateway runs one Checker for the workers this gateway owns and wires it
// in through callbacks.
//
// Contract:
//
//  1. Machine is the state machine alone, with no clock and no I/O: Apply(event) returns a
//     Transition, and side effects fire only when Transition.Changed(). Promotion marks a move to
//     ready from pending, not_ready or failed (the breaker is told); Settle marks the Drain of a
//     ready worker (a non-ready one is removed at once).
//  2. Checker.Add starts checking an owned worker, in Pending, in Ready when registration already
//     reached it, or in the state carried over from the previous owner's bulletin. A probed worker
//     is probed at once, then every interval on its own schedule; one added in Draining (its
//     removal already under way) never is. Remove forgets it (the record is gone); Update applies
//     a PATCH in place, keeping state and counts.
//  3. Every turn starts one probe in its own goroutine, bounded by the worker's timeout; at most
//     MaxInFlight run at once and the rest wait in a FIFO backlog. A worker whose probe is still
//     in flight when its next turn comes skips that turn.
//  4. A worker is probed when its mode has a Prober and its health checks are on, or when the
//     mode is marked ProbeWhenDisabled (ZMQ). A worker with checks off and no such mode counts
//     ready. External providers are off unless their health block says
//     disable_health_check: false.
//  5. On every state change the Checker logs one line, sets meshgw_worker_health and calls
//     OnTransition, in order and outside its lock (callbacks may call the Checker back).
//  6. The Checker removes a worker on its own in two cases, and then calls OnRemove so that the
//     owner removes the record: a worker that reaches failed with RemoveUnhealthyWorkers, and a
//     drained worker (Drain: at once unless it was ready; else after its drain_settle_secs;
//     DrainFor: after the settle it is given, whatever the state, for a drain decided elsewhere).
//     Without RemoveUnhealthyWorkers a failed worker stays, is still probed, and rejoins after S
//     successes.
//  7. An external provider that answers 429 counts healthy, and its next probe skips 1, 2, 4,
//     then 8 sweeps. Its turns fall on a grid shared by every gateway, shifted by JitterOffset.
//
// Wiring, as the gateway does it:
//
//	grpcProber := &health.GRPCProber{}
//	defer grpcProber.Close()
//	checker, err := health.New(health.Options{
//		Config:     cfg, // health.DefaultConfig() with the flags applied, cfg.Validate() passed
//		NodeID:     nodeID,
//		Registerer: reg,
//		Logger:     log,
//		Modes: map[string]health.Mode{
//			worker.ModeHTTP:     {Prober: &health.HTTPProber{}},
//			worker.ModeGRPC:     {Prober: grpcProber},
//			worker.ModeExternal: {Prober: &health.ExternalProber{}},
//			worker.ModeZMQ:      {Prober: zmqCheck, ProbeWhenDisabled: true},
//		},
//		OnTransition: func(id worker.ID, from, to health.State, promotion bool) {
//			// update the routing view and the bulletin; if promotion, tell the breaker
//		},
//		OnRemove: func(id worker.ID, why health.RemoveReason) {
//			// raft CAS removal of the record by its owner
//		},
//	})
//
// Choices where DESIGN.md is silent: Reached moves only a pending worker (a probe judges the
// others); a worker whose mode has no Prober stays pending until MarkReached; last_error and
// last_status_code describe the last probe if it failed and a pass clears them; after a 429 the
// next probe skips 1 sweep, 2 after a second 429 in a row, 4 after a third, 8 after any later one;
// external providers are probed at once when added and then on their jittered grid; the
// X-Mesh-Gateway header is not sent to third-party providers.
package health
