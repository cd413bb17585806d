// Package outcome carries the outcomes of requests proxied to workers owned by other gateways to
// their owners, so that one circuit breaker per worker decides for the whole fleet (DESIGN.md
// section 4, "Outcome reports").
//
// # Contract
//
//  1. Classify. The gateway that served a request classifies its outcome on each worker it
//     touched with that worker's own status lists (breaker.Classifier, DESIGN.md section 7),
//     once per worker per request, retries included (once per attempt on an external
//     provider, breaker/doc.go step 4): Router.Route, given the worker's owner, epoch and
//     resilience block, a request with no answer counting as breaker.NoResponse unless its
//     status is breaker.NoResponseInTime. Only Success, Failure and TimedOut (a failure whose
//     request got no answer within the request timeout, which the owner's hang rule counts:
//     OUTCOME_FAILURE with timed_out on the wire) are reported; nothing (a capacity status, a
//     shed) never is, nor is an outcome on a worker with no owner yet. Workers this gateway
//     owns are recorded by its own breakers, never routed here.
//  2. Report. Reporter.Report(owner, worker, epoch, outcome) appends to the owner's pending
//     runs under a mutex and returns: it never dials, sends or waits. An outcome identical to
//     the last pending run (same worker, epoch and outcome) adds one to its count, so order is
//     kept and a steady stream of successes costs one run. Beyond Config.MaxPending runs per
//     owner, reports are dropped and counted.
//  3. Flush. One loop per owner sends the pending runs every Config.FlushInterval (100 ms), and
//     at once when they reach Config.MaxBatch, over one long-lived client stream
//     (meshgw.mesh.v1.Outcomes/Report) to the address Config.Resolve gives for the owner.
//  4. Fail. Reports that cannot be sent (address unknown, stream not open, a send that fails or
//     outlasts Config.SendTimeout) are dropped and counted, never retried later: an outcome is
//     worth something to a breaker only while it is fresh. The stream is opened again after a
//     backoff from FlushInterval doubling to Config.MaxBackoff, on a fresh connection.
//  5. Retire. An owner with no report for Config.IdleTimeout (1 minute) has its loop, stream
//     and connection closed; its next report starts them again. Reporter.Close makes a last
//     flush bounded by Config.CloseTimeout, closes everything and waits.
//  6. Record. On the owner, Service.Report calls the Sink once per run, in arrival order, with
//     the run's count. The sink (SinkTo, over the owned-worker manager's RecordRemote) records
//     the run on the worker's breaker when this gateway owns the worker at the run's epoch, and
//     otherwise refuses it (a stale or misdirected report), recording nothing. Malformed runs
//     are refused without calling the sink.
//  7. Close. Service.Close ends open streams with their totals (OutcomeAck), so that the gRPC
//     server's GracefulStop need not wait for reporters.
//
// meshgw_mesh_outcome_reports_total{result} counts reports (the sum of run counts, not runs):
// sent and dropped by the reporter, received and rejected by the owner. Its four results are
// published at zero from the start.
package outcome
