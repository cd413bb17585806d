// Package cachesync makes cache_aware's prefix index and load fleet-wide (DESIGN.md section 16,
// docs/routing.md): the owner of each worker is the single writer of its index entry and the
// one that adds up its load.
//
//  1. Route. Every gateway applies its own choices to its index at once (policy.Routes).
//     Sync.Routed appends what a choice added to the worker's entry (the blocks new to it, and
//     those unused for policy.RefreshAfter) to the owner's batch: a bounded append under the
//     batch's mutex, nothing else on the request path. A batch past Config.MaxPendingBlocks
//     drops, and counts, what does not fit. Choices of workers this gateway owns go straight to
//     its own publication.
//  2. Report. One loop per peer sends its batch every Config.FlushInterval (20 ms) over one
//     long-lived client stream (meshgw.mesh.v1.CacheSync/Report), and this gateway's requests in
//     flight to each of the peer's workers every Config.LoadInterval (the flush interval) when
//     they changed, else every LoadRefresh (500 ms) while not zero. What cannot be sent is
//     dropped and counted; the stream is opened again after a backoff.
//  3. Own. The owner applies the reports of the workers it owns to its index and queues them
//     for publication; it drops the others. It keeps each reporter's last load report per
//     worker for Config.LoadExpiry (1 s) and evicts for its workers: its index's OnEvict
//     queues the evicted blocks of the workers it owns.
//  4. Publish. Every gateway subscribes to every live peer (CacheSync/Subscribe). The owner
//     sends the whole entries of the workers it owns first, then every FlushInterval what
//     changed, and the load of each of its workers less the subscriber's own report: its own
//     requests in flight plus every other gateway's fresh report. A subscriber too slow to take
//     them is cut off; it subscribes again and gets the whole entries again.
//  5. Weigh. Sync.Load, cache_aware's policy.Load, is the published load of a worker (zero
//     when its owner's subscription is down) plus this gateway's own requests in flight now.
//
// A failover or a handoff needs nothing more: every gateway holds a copy of every worker's
// entry, and the new owner publishes and takes reports from then on. A restarted gateway
// rebuilds its index from its peers' first messages.
package cachesync
