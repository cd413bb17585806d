// Package console serves the operator console (DESIGN.md section 19, docs/console.md): a
// read-only page of the mesh at /ui on the admin listener, its JSON snapshot and a stream of
// server-sent events that carries every change.
//
// Contract:
//
//  1. A Source gives the mesh as this gateway sees it (State): peers, workers, open journal
//     records. AdminSource reads it from the admin API's answers; Synthetic makes one of any
//     size for benchmarks and the scale test.
//  2. A Hub reads its Source every Interval (every 8 intervals while no page is open, and less
//     often when a read costs more than Budget of a core), diffs the state with the previous
//     one, derives transitions from the diff (a worker joining or leaving routing, a failover or
//     a handoff of its ownership, a leader change, a peer's status) stamped with the time it saw
//     them, and pushes one delta per read to every open stream: however fast the mesh changes, a
//     page gets at most one update per interval.
//  3. A page fetches the whole state (Hub.Snapshot, GET /ui/api/snapshot) and opens its stream
//     with ?since= its version: the stream starts with the whole state only if the Hub moved
//     past it. Versions start at the Hub's first read in Unix milliseconds, so that a restarted
//     gateway's never match an old page's. A stream that falls behind (its queue of deltas
//     full) is sent the whole state again instead of the deltas it missed; a stream ends when
//     its client goes (noticed at the next write, a heartbeat at the latest), or when the Hub is
//     closed (the gateway's shutdown).
//  4. The page and its assets are public: they hold no data. Every path under /ui/api/ (the
//     snapshot, the stream, and one that does not exist) passes the admin auth (Auth) before
//     anything else, a 404 or a 405 included: the bearer key in the Authorization header, never
//     in a URL. A method other than GET or HEAD is 405 with Allow: GET, HEAD.
//     The page keeps a key it is given in sessionStorage only, and reads the stream with
//     fetch(), which can send that header (EventSource cannot).
package console
