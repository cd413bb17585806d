// Package storage keeps a gateway's durable raft state: raft's log store and stable store in one
// bbolt file, inside a per-node folder of the state directory.
//
// # Durability
//
//  1. Every write is one bbolt transaction, and bbolt fsyncs (fdatasync) the file before a
//     commit returns: when StoreLogs, DeleteRange, Set or SetUint64 returns nil, the change
//     survives a crash of the process or the host. A batch given to StoreLogs is all there or
//     not there at all after a crash; there is no torn entry.
//  2. bbolt's freelist is not written on commit (NoFreelistSync) but rebuilt by a scan at open:
//     cheaper commits, and no persisted freelist that could be left inconsistent.
//  3. Each log entry carries a CRC-32C over its encoding; GetLog reports a mismatch as an error
//     rather than hand raft a damaged entry.
//  4. A newly created database file has its directory fsynced, so the file itself survives a
//     power loss right after the first start.
//  5. The Store implements raft.CommitTrackingLogStore: the commit index raft stages before an
//     append is stored in that append's transaction (CommitIndex). Every entry up to it is
//     committed and on disk, so package consensus applies them at start, before any leader
//     exists, and a follower's fleet acknowledgement needs no save of its own.
//  6. The database file is locked while open. A second process asking for the same node folder
//     gets, after Options.LockTimeout (1 s), an error saying another meshgw holds it.
//
// Log entries use a compact binary encoding of every raft.Log field (term, type, data,
// extensions, appended_at; the index is the big-endian bucket key), not msgpack or protobuf.
//
// The Store does not implement raft.MonotonicLogStore. That interface is for stores that cannot
// hold a gap between indexes; bbolt keys are sparse, so a gap left by a snapshot install is
// harmless here. Declaring it would make raft delete the whole log after every snapshot restore
// or install (removeOldLogs) instead of compacting up to the snapshot, which buys nothing on
// this store and costs a large delete.
//
// # State directory
//
// ResolveStateDir applies DESIGN.md's order (--state-dir, $MESHGW_STATE_DIR,
// $XDG_STATE_HOME/meshgw, ~/.local/state/meshgw) and PrepareNodeDir makes the node's folder
// (0700, files 0600) and checks it is writable. There is no fallback to a temporary directory:
// an unusable path stops the gateway with one line naming the path and the reason.
//
// raft's FileSnapshotStore creates its files 0644 and folders 0755 (less the umask); the 0700
// node folder is what keeps them private. A daemon that wants them 0600 too sets its umask to
// 0077 at start.
//
// # Ephemeral mode
//
// With --ephemeral the caller (package consensus) does not use this package at all: it runs
// raft on raft.NewInmemStore and raft.NewInmemSnapshotStore, resolves no state directory and
// writes nothing to disk. That is for tests and demos only.
package storage
