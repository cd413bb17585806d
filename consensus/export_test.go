package consensus

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// What the external tests of this package (package consensus_test, which also use
// consensus/fleetack) read of a node's internals.

// LastIndex is the index of the last entry of n's raft log.
func (n *Node) LastIndex() uint64 { return n.raft.LastIndex() }

// BarriersAfter counts the Barrier entries in n's log after index.
func (n *Node) BarriersAfter(t testing.TB, index uint64) int {
	t.Helper()
	count := 0
	for i := index + 1; i <= n.raft.LastIndex(); i++ {
		var l raft.Log
		if err := n.stores.log.GetLog(i, &l); err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
		if l.Type == raft.LogBarrier {
			count++
		}
	}
	return count
}

// StoredCommitIndex is the commit index stored with n's raft log (storage.Store.CommitIndex).
func (n *Node) StoredCommitIndex() uint64 { return n.stores.db.CommitIndex() }

// SaveEvery sets the least time between two saves of the applied state.
func SaveEvery(c *Config, d time.Duration) { c.saveInterval = d }

// NoElection keeps raft from electing anyone for the length of a test.
var NoElection = noElection

// SetLookup replaces how a resolves a member's host name.
func (a *PeerAuth) SetLookup(lookup func(ctx context.Context, host string) ([]string, error)) {
	a.lookup = lookup
}

// TestPKI makes a CA and returns a function that issues node id's certificates (testPKI).
var TestPKI = testPKI

// Crash stops n the way kill -9 would as far as the saved state goes (crash).
var Crash = crash

// crash stops n the way kill -9 would as far as the saved state goes: raft stops and the store
// closes before the saver's last save, which then fails.
func crash(t *testing.T, n *Node) {
	t.Helper()
	n.shutdown.Do(func() {
		n.closed.Store(true)
		_ = n.raft.Shutdown().Error()
		close(n.stop)
		n.wg.Wait()
		_ = n.stores.close()
		n.saver.close()
		n.met.unregister()
	})
}
