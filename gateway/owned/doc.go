// Package owned runs what an owner gateway does for the workers it owns: health checks and
// circuit breakers, feeding their verdicts to the pool.
//
// Contract, as the gateway's wiring (and later the raft-backed fleet reconciler) drives it:
//
//  1. New builds one health.Checker for every owned worker, with a prober per connection mode:
//     HTTP, gRPC (grpc.health.v1 for Options.GRPCService), external providers (Rolter's rules)
//     and ZMQ (the local check of the worker's link, which runs even when health checks are
//     disabled). The pool's workers should start pending (pool.Config.StartPending)
//     while checks run.
//  2. Own starts checking a worker this gateway owns, after the caller has put it in the pool. It
//     attaches a circuit breaker (breaker.Resolve of the --cb-* flags and the worker's
//     resilience block) to the pool's worker, so that selection skips an open circuit. Own of a
//     worker already owned applies a changed spec in place (a PATCH), keeping health state and
//     breaker counts, and records the new epoch. dead (the is_dead quarantine) stops its probes
//     and keeps it pending; releasing the quarantine verifies it again.
//  3. A newly owned HTTP or gRPC worker becomes ready at its first passing probe: that probe is
//     registration reaching it. If the first probe fails, the worker stays pending and needs S
//     consecutive passes. A ZMQ worker becomes ready when its link's handshake is done.
//  4. Every health transition sets the pool's health of the worker (pending, ready, not_ready,
//     failed, draining), and so its routability and the gateway's readiness. A promotion to
//     ready calls the breaker's Promote, once per real promotion.
//  5. OnOutcome, plugged into gateway.Config.OnOutcome, classifies each request's outcome on a
//     worker (Classifier.Classify; NoResponse when no answer came, NoResponseInTime when none
//     came within the request timeout) and records it. With Options.Breaker.HangTimeout set,
//     the breakers' hang rule (breaker/hang.go) opens the circuit of a worker that answers
//     nobody while requests to it, through any gateway, time out, whatever its probes say. The
//     gateway reports one outcome per worker per request, so a request's retries on one worker
//     count once. Workers not owned here have no breaker attached and are not recorded.
//     RecordRemote records, in order, the outcomes other gateways report for an owned worker
//     (package mesh/outcome), only at the epoch given to Own.
//  6. When health removes a worker on its own (failed with --remove-unhealthy-workers, or the end
//     of a Drain), the manager forgets it and calls Options.OnRemove with the epoch given to Own,
//     so that the caller removes the record fenced by (owner, epoch); without OnRemove it removes
//     the worker from the pool itself. Disown forgets a worker without touching the pool, after
//     telling Options.OnDisown its last state (the mirror image of Options.Seed), so that the
//     former owner keeps routing it by that state until the new owner's first bulletin.
//  7. Drain owns a worker whose record is draining (a DELETE accepted through raft; the record
//     holds when the drain started and its settle): the worker is never probed again, whatever
//     its state or quarantine, its health reads draining, and once the settle has passed since
//     the start (at once when it has already, after a restart or a failover) it is removed
//     through OnRemove as above. The deadline is the record's, so a repeated Drain or Own never
//     postpones it; Disown (ownership moved) hands it to the next owner.
//  8. A worker that declares no model is asked which models it serves when it is promoted to
//     ready (the first promotion is registration reaching it; with checks disabled, Own), in the
//     background so that readiness never waits: HTTP GET {url}/v1/models with its key and
//     X-Mesh-Gateway, gRPC meshgw.engine.v1.Engine/Models, ZMQ the WELCOME of its link (the
//     pool's transport offers AnnouncedModels). Each ask is bounded by the health timeout; a
//     failure is logged at DEBUG and the next promotion asks again. HTTP and gRPC workers are
//     asked until they answer once; a ZMQ worker's WELCOME is read again at each promotion.
//     The answer goes to pool.SetDiscoveredModels, which GET /v1/models lists and routing
//     ignores. Declared models are never overwritten; external providers are never asked.
//  9. Status reports a worker's runtime state for GET /workers; Close stops every probe and
//     model discovery.
//
// The health and breaker series (meshgw_worker_health, meshgw_worker_health_checks_total,
// meshgw_worker_cb_*) are registered on Options.Registerer; a forgotten worker's
// meshgw_worker_health and meshgw_worker_cb_state read -1.
package owned
