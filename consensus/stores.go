package consensus

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/storage"
)

// Snapshots kept on disk, and log entries cached in memory in front of bbolt.
const (
	snapshotsRetained = 2
	logCacheEntries   = 512
)

// stores are raft's log, stable and snapshot stores, and what closes them.
type stores struct {
	log    raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
	// db also keeps the FSM's applied state (fail-static restarts); nil when ephemeral.
	db    *storage.Store
	close func() error
}

// openStores opens the bbolt store and the file snapshot store in the node's folder, or
// in-memory stores when ephemeral.
func openStores(c Config, b *hclogBridge) (stores, error) {
	if c.Ephemeral {
		mem := raft.NewInmemStore()
		return stores{log: mem, stable: mem, snaps: raft.NewInmemSnapshotStore(), close: func() error { return nil }}, nil
	}
	dir := storage.NodeDir{Path: c.StateDir}
	db, err := storage.Open(dir.RaftDB(), storage.Options{})
	if err != nil {
		return stores{}, fmt.Errorf("consensus: %w", err)
	}
	// FileSnapshotStore adds "snapshots" to its base itself, so it gets the node folder and
	// writes into dir.Snapshots(), which PrepareNodeDir made 0700.
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir.Path, snapshotsRetained, b.Named("snapshots"))
	if err != nil {
		return stores{}, errors.Join(fmt.Errorf("consensus: snapshot store in %s: %w", dir.Path, err), db.Close())
	}
	cached, err := raft.NewLogCache(logCacheEntries, db)
	if err != nil {
		return stores{}, errors.Join(fmt.Errorf("consensus: log cache: %w", err), db.Close())
	}
	return stores{log: trackedLogs{LogCache: cached, tracker: db}, stable: db, snaps: snaps, db: db, close: db.Close}, nil
}
