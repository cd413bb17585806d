// Package breaker is the per-worker circuit breaker, with SMG's semantics exactly, and the
// classification of request outcomes that feeds it.
//
// It is a pure library: no HTTP, raft or gossip, and time comes from an injected Clock. The
// gateway runs one Breaker per owned worker and drives it as follows:
//
//  1. Build the worker's Config and Classifier with Resolve(flags, spec.Resilience), and the
//     breaker with New(cfg, Options{Clock, Hooks: metrics.Hooks(url), Logger}).
//  2. Before sending a request, ask Allow. A closed or half-open circuit allows (half-open is
//     not throttled); an open one refuses until its timeout (60 s) has passed, when the check
//     itself moves it to half-open.
//  3. Classify every attempt's answer: Classifier.Classify(status), or Classify(NoResponse) when
//     the worker never answered (Classify(NoResponseInTime) when it sent nothing within the
//     request timeout: a TimedOut, a failure the hang rule counts), or ClassifyGRPC(code). The
//     lists classify outcomes only: what the gateway retries does not depend on them (SMG).
//  4. Record one outcome per request per engine worker, however many attempts went to it (the
//     gateway keeps the last answer each worker gave the request, and reports it when the
//     request ends). An external provider's worker is the exception, as in SMG: record every
//     attempt, so that one request whose three attempts failed there counts three failures
//     (SMG does the same for HTTP workers in PD mode, which meshgw does not have). Record
//     nothing for a shed by the gateway itself (admission, no_available_workers) or a request
//     the client abandoned.
//  5. When health checks flip the worker to ready from pending, not_ready or failed, call
//     Promote: an open circuit goes half-open at once (a health readmission) and a closed one
//     forgets its failures. Passing probes on a ready worker are not a promotion.
//  6. Publish Snapshot in GET /workers and bulletins; hooks publish metrics and fire only on a
//     real change.
//  7. With Config.HangTimeout set (the request timeout), the hang rule (hang.go), meshgw's own
//     addition to SMG's breaker, opens a closed circuit once HangTimeouts requests got no
//     answer within it while the worker answered no request at all: an engine that accepts
//     requests and never answers, whose health endpoint still passes. Its owner sees the
//     outcomes of every gateway (outcome reports), so one judgment takes it out fleet-wide.
package breaker
