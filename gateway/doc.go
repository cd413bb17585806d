// Package gateway is meshgw's HTTP data plane: it routes OpenAI-style requests to workers,
// proxies them over fasthttp with retries and SSE streaming, bounds admission, and serves the
// probe, status and admin endpoints.
//
// The data plane never waits for the control plane: it routes from this gateway's local view,
// the pool (gateway/pool), which gateway/fleet keeps in step with the applied raft state and
// with the owners' bulletins, and it keeps serving when raft has no leader (fail-static).
//
// # A request's way
//
//  1. Accept. fasthttp reads the headers; before any of the body is read (early.go), a model
//     request is refused at once when this gateway left the mesh (503 draining), when its
//     declared length is over --max-payload-size (413), or when the in-flight limit
//     (--max-connections, admission.go) is full (503 overloaded, Retry-After: 1). Probes,
//     /v1/models and the admin API (gateway/admin) are dispatched by path and never gated.
//  2. Read. The body is read within the payload limit and the shared body budget
//     (--max-buffered-body-mb, body.go, budget.go); a body larger than the whole budget is read
//     only in its first bytes and streamed to the worker as it arrives (and then not retried).
//  3. Parse. gateway/reqmeta scans at most the first MiB of the body (or a multipart upload's
//     fields) for the model, stream and the capabilities it requires, and reads the
//     X-Mesh-Route-* hint headers; a contradiction or an unreadable body is a 400. Hop-by-hop
//     headers and hints are stripped; the request id is kept or made (X-Mesh-Request-Id).
//  4. Select. The pool's current Snapshot (one atomic load) gives the candidates: routable
//     workers (no gate closed: health, breaker, disabled, is_dead, draining, removing) with
//     every capability the request needs and serving its model. With a --region, locality
//     routing (locality.go, gateway/locality) first narrows them to one region's: this
//     gateway's own while enough of its workers are routable, others in proportion below that.
//     gateway/policy picks one (--policy). No candidate: 503 no_available_workers, naming why; a route of external
//     providers fails open to those closed only by health or breaker (provider.go).
//  5. Proxy. One attempt goes to the worker over its transport, made at its first request
//     (upstream.go): HTTP with a keep-alive pool and the worker's API key, an external
//     provider's own endpoint and auth (provider.go), or the same JSON over gRPC or ZMQ
//     (upstream_rpc.go). A streamed answer (text/event-stream) is relayed event by event
//     (stream.go, relaypipe.go); a client that leaves while the model is silent is noticed
//     (clientwatch.go).
//  6. Retry. An attempt that got no answer, or a retryable status (408, 429, 500, 502, 503,
//     504), is tried again after a backoff (retry.go, --retry-*), selecting again and
//     preferring another worker, as long as nothing reached the client; never once a stream
//     started. The last failure is answered in the OpenAI envelope: 502 no answer, 504 timeout,
//     or the worker's own status.
//  7. Answer and report. The answer carries X-Mesh-Worker, X-Mesh-Request-Id,
//     X-Mesh-Route-Attempt, X-Mesh-Gateway, X-Mesh-Owner and X-Mesh-Worker-Region (when the
//     worker has a region). When it ends (finish), each worker
//     tried is reported to Config.OnOutcome: the owner's circuit breaker and passive health
//     learn it, here (gateway/owned) for a worker this gateway owns, or through an outcome
//     report to its owner (mesh/outcome) for an imported one. The request log writes one
//     route_completed or route_rejected record (reqlog.go) and the metrics count it; the
//     admission slot is given back.
//
// docs/architecture.md draws this way next to a write's.
package gateway
